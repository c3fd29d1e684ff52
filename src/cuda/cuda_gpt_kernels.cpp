// CudaGptKernels other than attention: the embedding and the vocabulary-parallel cross-entropy.
// The GptKernels front has validated every argument; token ids and targets are uploaded per call
// into pooled device memory (MemCategory::workspace).
#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_indices.hpp"

namespace mdtp {

void CudaGptKernels::do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                                    Tensor& out) const {
  DeviceIndices dev_ids = upload_indices(cuda_, ids, MemCategory::workspace);
  kernels::embedding_forward(table.dtype(), table.raw_data(), table.rows(), table.cols(), dev_ids.data(),
                             static_cast<std::int64_t>(ids.size()), first_row, out.raw_data(), cuda_.stream());
}

void CudaGptKernels::do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                                     Tensor& table_grad) const {
  // Group the in-range tokens by table row, in token order, on the host: the kernel then sums
  // each row's tokens in a fixed order (deterministic, as the host) without atomics.
  const std::int64_t rows = table_grad.rows();
  std::vector<std::int32_t> tokens;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t r = ids[i] - first_row;
    if (r >= 0 && r < rows) tokens.push_back(static_cast<std::int32_t>(i));
  }
  if (tokens.empty()) return;
  std::stable_sort(tokens.begin(), tokens.end(), [&](std::int32_t a, std::int32_t b) { return ids[a] < ids[b]; });
  // One upload: [unique rows (U) | offsets (U + 1) | tokens (M)].
  std::vector<std::int32_t> unique_rows, offsets;
  for (std::size_t k = 0; k < tokens.size(); ++k)
    if (k == 0 || ids[tokens[k]] != ids[tokens[k - 1]]) {
      unique_rows.push_back(static_cast<std::int32_t>(ids[tokens[k]] - first_row));
      offsets.push_back(static_cast<std::int32_t>(k));
    }
  offsets.push_back(static_cast<std::int32_t>(tokens.size()));
  const auto U = static_cast<std::int64_t>(unique_rows.size());
  std::vector<std::int32_t> packed(unique_rows);
  packed.insert(packed.end(), offsets.begin(), offsets.end());
  packed.insert(packed.end(), tokens.begin(), tokens.end());
  DeviceIndices dev = upload_indices(cuda_, packed, MemCategory::workspace);
  const std::int32_t* base = dev.data();
  kernels::embedding_backward(dy.dtype(), dy.raw_data(), dy.cols(), base, base + U, base + 2 * U + 1, U,
                              table_grad.dtype(), table_grad.raw_data(), cuda_.stream());
}

void CudaGptKernels::do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const {
  kernels::xent_row_max(logits.dtype(), logits.raw_data(), logits.rows(), logits.cols(), valid_cols,
                        row_max.data<double>(), cuda_.stream());
}

void CudaGptKernels::do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                    std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const {
  DeviceIndices dev_targets = upload_indices(cuda_, targets, MemCategory::workspace);
  kernels::xent_partial_sums(logits.dtype(), logits.raw_data(), logits.rows(), logits.cols(), valid_cols,
                             row_max.data<double>(), dev_targets.data(), col0, sums.data<double>(), cuda_.stream());
}

void CudaGptKernels::do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                                std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                                Tensor& dlogits) const {
  DeviceIndices dev_targets = upload_indices(cuda_, targets, MemCategory::workspace);
  kernels::xent_backward(logits.dtype(), logits.raw_data(), logits.rows(), logits.cols(), valid_cols,
                         lse.data<double>(), dev_targets.data(), col0, scale, dlogits.raw_data(), cuda_.stream());
}

void CudaGptKernels::do_rope(Tensor&, std::int64_t, std::int64_t, std::int64_t, double, bool) const {
  throw_error("the rotary position embedding (--model llama) is not implemented on CUDA yet; it runs on the host");
}

void CudaGptKernels::do_swiglu_forward(const Tensor&, Tensor&) const {
  throw_error("the SwiGLU MLP (--model llama) is not implemented on CUDA yet; it runs on the host");
}

void CudaGptKernels::do_swiglu_backward(const Tensor&, const Tensor&, Tensor&) const {
  throw_error("the SwiGLU MLP (--model llama) is not implemented on CUDA yet; it runs on the host");
}

std::unique_ptr<GptKernels> make_cuda_gpt_kernels(const CudaBackend& backend) {
  return std::make_unique<CudaGptKernels>(backend);
}

}  // namespace mdtp
