#pragma once
// Hooks at unit granularity (unit 0 the embedding, 1 … L the blocks, L + 1 the head), which the
// pipeline and ZeRO engines attach to a GptModel: ZeRO-3 gathers a unit's parameters before its
// forward and its backward-input pass and frees them after; ZeRO-2 starts a bucket's
// reduce-scatter once every unit in it has its gradients.  The defaults do nothing, and a model
// without hooks pays one null test per unit and pass.
namespace mdtp {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit, int microbatch) {}
  virtual void after_forward(int unit, int microbatch) {}
  virtual void before_backward_input(int unit, int microbatch) {}
  virtual void after_backward_input(int unit, int microbatch) {}
  // Before and after each of the unit's weight passes (after: its gradients hold this
  // micro-batch's share now).
  virtual void before_backward_weight(int unit, int microbatch) {}
  virtual void after_backward_weight(int unit, int microbatch) {}
  // After the unit's last weight pass of the step (following after_backward_weight): its
  // gradients are complete.
  virtual void grads_ready(int unit) {}
};

}  // namespace mdtp
