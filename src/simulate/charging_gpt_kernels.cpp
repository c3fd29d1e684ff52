#include "simulate/charging_gpt_kernels.hpp"

#include "cost/attention_core.hpp"
#include "cost/kernel_time.hpp"

namespace mdtp::simulate {
namespace {

double bytes_of(const Tensor& t) { return static_cast<double>(t.bytes()); }

}  // namespace

ChargingGptKernels::ChargingGptKernels(std::unique_ptr<GptKernels> inner, cost::Cluster cluster, KernelCharge charge,
                                       std::shared_ptr<KernelTally> tally)
    : GptKernels(inner->backend()),
      inner_(std::move(inner)),
      cluster_(std::move(cluster)),
      charge_(std::move(charge), std::move(tally)) {}

// Each kernel runs only where what it writes holds values: a synthetic tensor's
// (synthetic_allocator.hpp) are charged and skipped.
void ChargingGptKernels::charge_bytes(const char* kind, double bytes) const {
  charge_(kind, bytes, cost::stream_seconds(bytes, cluster_));
}

void ChargingGptKernels::charge_attention(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head,
                                          std::int64_t head_dim, bool backward) const {
  const std::int64_t kv_heads = (qkv.cols() / head_dim - n_head) / 2;
  const cost::AttentionCoreCosts core = cost::attention_core_costs(
      {seq_len, head_dim, n_head, kv_heads, qkv.rows() / seq_len}, qkv.dtype(), false, false, cluster_);
  const cost::PassCost& pass = backward ? core.backward : core.forward;
  charge_(backward ? "attention_backward" : "attention_forward", pass.stream_bytes, pass.compute_seconds());
}

void ChargingGptKernels::do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids,
                                              std::int64_t first_row, Tensor& out) const {
  charge_bytes("embedding_forward", 2 * bytes_of(out));  // one table row read per output row written
  if (out.holds_values()) inner_->embedding_forward(table, ids, first_row, out);
}
void ChargingGptKernels::do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids,
                                               std::int64_t first_row, Tensor& table_grad) const {
  charge_bytes("embedding_backward", 3 * bytes_of(dy));  // dy read, the rows it adds to read and written
  if (table_grad.holds_values()) inner_->embedding_backward(dy, ids, first_row, table_grad);
}
void ChargingGptKernels::do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                                              Tensor& probs) const {
  charge_attention(qkv, seq_len, n_head, y.cols() / n_head, false);
  if (y.holds_values()) inner_->attention_forward(qkv, seq_len, n_head, y, probs);
}
void ChargingGptKernels::do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs,
                                               std::int64_t seq_len, std::int64_t n_head, Tensor& dqkv) const {
  charge_attention(qkv, seq_len, n_head, dy.cols() / n_head, true);
  if (dqkv.holds_values()) inner_->attention_backward(dy, qkv, probs, seq_len, n_head, dqkv);
}
void ChargingGptKernels::do_rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads,
                                 double theta, bool inverse) const {
  // Q and K read and written in place: (n_head + kv) of the (n_head + 2·kv) head columns.
  const double qk_share = static_cast<double>(n_head + kv_heads) / static_cast<double>(n_head + 2 * kv_heads);
  charge_bytes("rope", 2 * qk_share * bytes_of(qkv));
  if (qkv.holds_values()) inner_->rope(qkv, seq_len, n_head, kv_heads, theta, inverse);
}
void ChargingGptKernels::do_swiglu_forward(const Tensor& gate_up, Tensor& y) const {
  charge_bytes("swiglu_forward", bytes_of(gate_up) + bytes_of(y));
  if (y.holds_values()) inner_->swiglu_forward(gate_up, y);
}
void ChargingGptKernels::do_swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const {
  charge_bytes("swiglu_backward", bytes_of(gate_up) + bytes_of(dy) + bytes_of(dgate_up));
  if (dgate_up.holds_values()) inner_->swiglu_backward(gate_up, dy, dgate_up);
}
void ChargingGptKernels::do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const {
  charge_bytes("xent_row_max", bytes_of(logits) + bytes_of(row_max));
  if (row_max.holds_values()) inner_->xent_row_max(logits, valid_cols, row_max);
}
void ChargingGptKernels::do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                              std::span<const std::int32_t> targets, std::int64_t col0,
                                              Tensor& sums) const {
  charge_bytes("xent_partial_sums", bytes_of(logits) + bytes_of(row_max) + bytes_of(sums));
  if (sums.holds_values()) inner_->xent_partial_sums(logits, valid_cols, row_max, targets, col0, sums);
}
void ChargingGptKernels::do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                                          std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                                          Tensor& dlogits) const {
  charge_bytes("xent_backward", bytes_of(logits) + bytes_of(lse) + bytes_of(dlogits));
  if (dlogits.holds_values()) inner_->xent_backward(logits, valid_cols, lse, targets, col0, scale, dlogits);
}

std::function<std::unique_ptr<GptKernels>(const Backend& backend)> simulated_gpt_kernels_factory(
    std::shared_ptr<KernelTally> tally) {
  return [cluster = simulated_cluster(), tally](const Backend& backend) -> std::unique_ptr<GptKernels> {
    return std::make_unique<ChargingGptKernels>(make_host_gpt_kernels(backend), cluster, charge_simulated_seconds,
                                                tally);
  };
}

}  // namespace mdtp::simulate
