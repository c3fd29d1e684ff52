#include "cost/attention_core.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "cost/kernel_time.hpp"

namespace mdtp::cost {

double causal_tile_share(std::int64_t seq, double tile_overhead) {
  require(seq > 0 && tile_overhead >= 0, "causal tile share: seq must be positive and the overhead not negative; got seq ",
          seq, ", overhead ", tile_overhead);
  const double n = static_cast<double>((seq + 127) / 128);
  return (n * (n + 1) / 2 + tile_overhead * n) / (n * n);
}

AttentionCoreCosts attention_core_costs(const AttentionCoreShape& shape, DType dtype, bool dropout, bool streaming,
                                        const Cluster& cluster) {
  require(shape.seq > 0 && shape.head_dim > 0 && shape.query_heads > 0 && shape.kv_heads > 0 && shape.sequences >= 0,
          "attention core: seq, head_dim and heads must be positive; got seq ", shape.seq, ", head_dim ",
          shape.head_dim, ", query heads ", shape.query_heads, ", kv heads ", shape.kv_heads);
  const std::int64_t s = shape.seq, d = shape.head_dim;
  const std::int64_t products = shape.query_heads * shape.sequences;
  const double flops_one = 2.0 * static_cast<double>(products) * static_cast<double>(s * s * d);
  const double delta = static_cast<double>(dtype_size(dtype)), mu = dropout ? 1.0 : 0.0;
  AttentionCoreCosts out;
  out.forward.gemm_flops = 2 * flops_one;
  if (products == 0) return out;
  if (!streaming) {
    const double E_A = static_cast<double>(products) * static_cast<double>(s) * static_cast<double>(s);
    const double t_scores = gemm_kernel_seconds(s, s, d, dtype, cluster, products);
    const double t_context = gemm_kernel_seconds(s, d, s, dtype, cluster, products);
    const double attention_dropout = dropout ? (2 * delta + mu) * E_A : 0.0;
    const int kernels = dropout ? 2 : 1;
    out.forward.gemm_seconds = t_scores + t_context;
    out.forward.stream_bytes = 2 * E_A * delta + attention_dropout;
    out.forward.stream_seconds = stream_seconds(out.forward.stream_bytes, cluster, kernels);
    out.backward.gemm_flops = 4 * flops_one;
    out.backward.gemm_seconds = t_scores + 3 * t_context;
    out.backward.stream_bytes = 3 * E_A * delta + attention_dropout;
    out.backward.stream_seconds = stream_seconds(out.backward.stream_bytes, cluster, kernels);
    return out;
  }
  const double E_q = static_cast<double>(shape.sequences * s * shape.query_heads * d);
  const double E_kv = static_cast<double>(shape.sequences * s * shape.kv_heads * d);
  const double causal = causal_tile_share(s, cluster.attention_tile_overhead);
  double c_scores = 0.0, c_context = 0.0;  // one forward product each: Q·Kᵀ, P·V
  double backward_rate = 1.0;               // the backward's products at the forward's rate x this
  if (cluster.attention_efficiency > 0) {
    // A rate measured at a reference length on the benchmark's count (half the scores) is a rate on
    // the tiles done there times 2·share(s_ref): the same tiles at any length then cost the same.
    const double counted_to_done =
        cluster.attention_reference_seq > 0
            ? 2 * causal_tile_share(cluster.attention_reference_seq, cluster.attention_tile_overhead)
            : 1.0;
    c_scores = c_context = causal * flops_one /
                           (counted_to_done * cluster.attention_efficiency * cluster.synchronous_pace *
                            cluster.peak(dtype));
    if (cluster.attention_backward_efficiency > 0)
      backward_rate = cluster.attention_backward_efficiency / cluster.attention_efficiency;
  } else {
    c_scores = causal * gemm_compute_seconds(s, s, d, dtype, cluster, products);
    c_context = causal * gemm_compute_seconds(s, d, s, dtype, cluster, products);
  }
  const double io_forward = (2 * E_q + 2 * E_kv) * delta, io_backward = (4 * E_q + 4 * E_kv) * delta;
  out.forward.gemm_seconds =
      std::max(c_scores + c_context, io_forward / cluster.stream_bandwidth()) + cluster.kernel_overhead;
  out.backward.gemm_flops = 5 * flops_one;
  out.backward.gemm_seconds =
      std::max((2 * c_scores + 3 * c_context) / backward_rate, io_backward / cluster.stream_bandwidth()) +
      cluster.kernel_overhead;
  return out;
}

}  // namespace mdtp::cost
