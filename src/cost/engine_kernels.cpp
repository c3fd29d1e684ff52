#include "cost/engine_kernels.hpp"

namespace mdtp::cost {
namespace {

double bytes_per(DType dtype) { return static_cast<double>(dtype_size(dtype)); }

// Row statistics and the merged mean and reciprocal deviation are f64 pairs (tp/layernorm.cpp).
constexpr double kRowStats = 16.0;

void add_norm(UnitKernels& k, const Geometry& ln, bool rms_norm) {
  const LayerNormShape& n = ln.layernorms()[0];
  const Workload& w = ln.workload();
  const double delta = bytes_per(w.dtype), gamma = bytes_per(w.gradient_dtype());
  const double x = static_cast<double>(n.x.numel()) * delta, rows = static_cast<double>(n.x.rows);
  const double cols = static_cast<double>(n.x.cols), parts = n.hidden_group.empty() ? 1.0 : ln.group_size(n.hidden_group);
  k.forward.push_back({"row_mean_m2", x + kRowStats * rows});
  k.forward.push_back({"merge_row_stats", kRowStats * rows * parts + kRowStats * rows});
  k.forward.push_back({"layernorm_apply", 3 * x + kRowStats * rows + 2 * cols * delta});
  k.backward_input.push_back({"layernorm_backward_sums", 2 * x + cols * delta + kRowStats * rows});
  if (rms_norm) k.backward_input.push_back({"fill", cols * gamma});  // the dropped β gradient's row
  k.backward_input.push_back({"layernorm_backward", 3 * x + cols * delta + 4 * cols * gamma + 2 * kRowStats * rows});
}

void add_linears(UnitKernels& k, const Geometry& layer) {
  const Workload& w = layer.workload();
  const double delta = bytes_per(w.dtype), gamma = bytes_per(w.gradient_dtype());
  for (const LinearShape& l : layer.linears()) {
    const double y = static_cast<double>(l.y.numel()), b = static_cast<double>(l.bias);
    if (l.bias > 0) {
      k.forward.push_back({"add_row_vector", (2 * y + b) * delta});
      k.backward_weight.push_back({"column_sums", y * delta + b * gamma});
    }
    // 3D reduce-scatters each weight gradient and adds it into the gradient (tp3d/linear_3d.cpp).
    if (l.kind == LinearKind::cube_3d)
      k.backward_weight.push_back({"axpy", 3 * static_cast<double>(l.w.numel()) * gamma});
  }
}

}  // namespace

UnitKernels engine_block_kernels(const Geometry& attention, const Geometry& mlp, const Geometry& layernorm,
                                  bool gated_mlp, bool rms_norm, double rotary_qk_elements,
                                  const AttentionCoreCosts& core) {
  UnitKernels k;
  const double delta = bytes_per(layernorm.workload().dtype);
  const double E_r = static_cast<double>(layernorm.layernorms()[0].x.numel());
  const double E_f = static_cast<double>(mlp.linears()[0].y.numel());
  const double E_h = static_cast<double>(mlp.linears()[1].x.numel());
  // In the order the block runs them (model/block.cpp): norm, attention, residual, norm, MLP, residual.
  add_norm(k, layernorm, rms_norm);
  add_linears(k, attention);
  if (rotary_qk_elements > 0) {
    k.forward.push_back({"rope", 2 * rotary_qk_elements * delta});
    k.backward_input.push_back({"rope", 2 * rotary_qk_elements * delta});
  }
  k.forward.push_back({"attention_forward", core.forward.stream_bytes});
  k.backward_input.push_back({"attention_backward", core.backward.stream_bytes});
  k.forward.push_back({"axpy", 3 * E_r * delta});
  k.backward_input.push_back({"axpy", 3 * E_r * delta});
  add_norm(k, layernorm, rms_norm);
  add_linears(k, mlp);
  k.forward.push_back({gated_mlp ? "swiglu_forward" : "gelu_forward", (E_f + E_h) * delta});
  k.backward_input.push_back({gated_mlp ? "swiglu_backward" : "gelu_backward", (2 * E_f + E_h) * delta});
  k.forward.push_back({"axpy", 3 * E_r * delta});
  k.backward_input.push_back({"axpy", 3 * E_r * delta});
  return k;
}

UnitKernels engine_embedding_kernels(double lookup, double local, bool positions, DType dtype) {
  const double delta = bytes_per(dtype);
  UnitKernels k;
  k.forward.push_back({"embedding_forward", 2 * lookup * delta});
  k.backward_weight.push_back({"embedding_backward", 3 * lookup * delta});
  if (positions) {
    k.forward.push_back({"embedding_forward", 2 * local * delta});
    k.forward.push_back({"axpy", 3 * local * delta});
    k.backward_weight.push_back({"embedding_backward", 3 * local * delta});
  }
  return k;
}

UnitKernels engine_head_kernels(const Geometry& layernorm, bool rms_norm, double logit_rows, double logits) {
  const double delta = bytes_per(layernorm.workload().dtype);
  UnitKernels k;
  add_norm(k, layernorm, rms_norm);
  // The row maximum and the (sum of exponentials, target logit) pairs are f64 (model/lm_head.cpp).
  k.forward.push_back({"xent_row_max", logits * delta + 8 * logit_rows});
  k.forward.push_back({"xent_partial_sums", logits * delta + 24 * logit_rows});
  k.backward_input.push_back({"xent_backward", 2 * logits * delta + 8 * logit_rows});
  return k;
}

}  // namespace mdtp::cost
