// CudaBackend's training ops other than attention: embedding, vocabulary-parallel cross-entropy,
// AdamW.  Token ids and targets arrive as host spans (the data is read on the host) and are
// uploaded per call into pooled device memory.  Validation reuses the host backend's checks, so
// both backends refuse the same arguments with the same messages.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/host_train_ops.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_indices.hpp"

namespace mdtp {

void CudaBackend::embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                                    Tensor& out) const {
  require_device_tensor(table, "embedding table");
  require_device_tensor(out, "embedding output");
  host_ops::check_embedding(table, ids.size(), out, "embedding_forward");
  DeviceIndices dev_ids = upload_indices(*this, ids);
  kernels::embedding_forward(table.dtype(), table.raw_data(), table.rows(), table.cols(), dev_ids.data(),
                             static_cast<std::int64_t>(ids.size()), first_row, out.raw_data(), stream());
}

void CudaBackend::embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                                     Tensor& table_grad) const {
  require_device_tensor(dy, "embedding output gradient");
  require_device_tensor(table_grad, "embedding table gradient");
  host_ops::check_embedding(table_grad, ids.size(), dy, "embedding_backward");
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
  DeviceIndices dev = upload_indices(*this, packed);
  const std::int32_t* base = dev.data();
  kernels::embedding_backward(dy.dtype(), dy.raw_data(), dy.cols(), base, base + U, base + 2 * U + 1, U,
                              table_grad.raw_data(), stream());
}

void CudaBackend::xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const {
  require_device_tensor(logits, "cross-entropy logits");
  require_device_tensor(row_max, "cross-entropy row maxima");
  host_ops::check_xent(logits, valid_cols, 0, row_max, 1, "xent_row_max");
  kernels::xent_row_max(logits.dtype(), logits.raw_data(), logits.rows(), logits.cols(), valid_cols,
                        row_max.data<double>(), stream());
}

void CudaBackend::xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                    std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const {
  require_device_tensor(logits, "cross-entropy logits");
  require_device_tensor(row_max, "cross-entropy row maxima");
  require_device_tensor(sums, "cross-entropy sums");
  host_ops::check_xent(logits, valid_cols, targets.size(), row_max, 1, "xent_partial_sums");
  host_ops::check_xent(logits, valid_cols, targets.size(), sums, 2, "xent_partial_sums");
  DeviceIndices dev_targets = upload_indices(*this, targets);
  kernels::xent_partial_sums(logits.dtype(), logits.raw_data(), logits.rows(), logits.cols(), valid_cols,
                             row_max.data<double>(), dev_targets.data(), col0, sums.data<double>(), stream());
}

void CudaBackend::xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                                std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                                Tensor& dlogits) const {
  require_device_tensor(logits, "cross-entropy logits");
  require_device_tensor(lse, "cross-entropy log-sum-exp");
  require_device_tensor(dlogits, "cross-entropy logit gradient");
  host_ops::check_xent(logits, valid_cols, targets.size(), lse, 1, "xent_backward");
  require(dlogits.dtype() == logits.dtype(), "xent_backward: mixed dtypes ", dtype_name(logits.dtype()), " and ",
          dtype_name(dlogits.dtype()));
  require(dlogits.numel() == logits.numel(), "xent_backward: dlogits has shape ", shape_string(dlogits.shape()),
          "; expected ", shape_string(logits.shape()));
  DeviceIndices dev_targets = upload_indices(*this, targets);
  kernels::xent_backward(logits.dtype(), logits.raw_data(), logits.rows(), logits.cols(), valid_cols,
                         lse.data<double>(), dev_targets.data(), col0, scale, dlogits.raw_data(), stream());
}

void CudaBackend::adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&param, &grad, &m, &v}) {
    require_device_tensor(*t, "adamw tensor");
    require(t->dtype() == param.dtype(), "adamw_update: mixed dtypes ", dtype_name(param.dtype()), " and ",
            dtype_name(t->dtype()));
    require(t->numel() == param.numel(), "adamw_update: a tensor of shape ", shape_string(t->shape()),
            " for a parameter of shape ", shape_string(param.shape()));
  }
  const kernels::AdamWScalars s = kernels::adamw_scalars(step.lr, step.beta1, step.beta2, step.eps,
                                                         step.weight_decay, step.step, step.grad_scale);
  const DType dt = param.dtype();
  kernels::adamw(dt, param.raw_data(), dt, grad.raw_data(), dt, nullptr, m.raw_data(), v.raw_data(), param.numel(), s,
                 stream());
}

}  // namespace mdtp
