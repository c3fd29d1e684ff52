#pragma once
// PassCost: the work of one pass (forward, backward-input, backward-weight) of one unit of the
// model for one micro-batch on one rank — GEMM flops and their time, streaming bytes and their
// time, and the tensor-parallel collectives' bytes and time — which layer costs add up and the
// step model schedules (layer_costs.hpp).
namespace mdtp::cost {

struct PassCost {
  double gemm_flops = 0.0, gemm_seconds = 0.0;
  double stream_bytes = 0.0, stream_seconds = 0.0;
  double comm_bytes = 0.0, comm_seconds = 0.0;  // tensor-parallel collectives (logical bytes)
  // Of comm_seconds, the collectives Transformer Engine's userbuffers overlap runs on SMs: every
  // reduce-scatter and 1d-sp's re-gather of X (collective_sms.hpp).
  double comm_on_sms_seconds = 0.0;
  double compute_seconds() const { return gemm_seconds + stream_seconds; }
  double seconds() const { return compute_seconds() + comm_seconds; }
  PassCost& operator+=(const PassCost& o);
  PassCost scaled(double factor) const;
};

}  // namespace mdtp::cost
