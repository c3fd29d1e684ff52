#pragma once
// GptKernels whose modelled time on a named GPU is charged (KernelCharge, charging_backend.hpp)
// before the kernels it wraps run on the host: the embedding lookup, the attention core, rotary
// positions, SwiGLU and the vocabulary-parallel cross-entropy — the model's kernels outside the
// Backend interface, which a simulated rank would otherwise run for free.
//
// The attention core is charged as the engine runs it, materialised (its probabilities are kept
// for backward) and without dropout (mdtp's engine has none), by the same function the step
// model uses (cost/attention_core.hpp); the rest as streaming kernels that read and write their
// tensors once (cost/kernel_time.hpp).
#include <functional>
#include <memory>

#include "cost/cluster.hpp"
#include "model/gpt_kernels.hpp"
#include "simulate/charging_backend.hpp"

namespace mdtp::simulate {

class ChargingGptKernels final : public GptKernels {
 public:
  ChargingGptKernels(std::unique_ptr<GptKernels> inner, cost::Cluster cluster, KernelCharge charge,
                     std::shared_ptr<KernelTally> tally = nullptr);
  // Seconds charged so far.
  double charged_seconds() const { return charge_.total(); }

 protected:
  void do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                            Tensor& out) const override;
  void do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                             Tensor& table_grad) const override;
  void do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                            Tensor& probs) const override;
  void do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                             std::int64_t n_head, Tensor& dqkv) const override;
  void do_rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads, double theta,
               bool inverse) const override;
  void do_swiglu_forward(const Tensor& gate_up, Tensor& y) const override;
  void do_swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const override;
  void do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const override;
  void do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                            std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const override;
  void do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                        std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                        Tensor& dlogits) const override;

 private:
  // Charges the attention core's pass (forward or backward) for these operands.
  void charge_attention(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t head_dim,
                        bool backward) const;
  // Charges one streaming kernel of this kind reading and writing `bytes`.
  void charge_bytes(const char* kind, double bytes) const;

  std::unique_ptr<GptKernels> inner_;
  cost::Cluster cluster_;
  mutable ChargeMeter charge_;
};

// What makes the SMPI build's model kernels under `mdtp simulate`: the host ones over `backend`,
// charged as the GPU of the simulated cluster (simulated_cluster(), read once, here); `tally` as
// simulated_backend_factory's.
std::function<std::unique_ptr<GptKernels>(const Backend& backend)> simulated_gpt_kernels_factory(
    std::shared_ptr<KernelTally> tally = nullptr);

}  // namespace mdtp::simulate
