#include "bench/model_prediction.hpp"

#include "cost/compute_model.hpp"
#include "cost/memory_model.hpp"
#include "spec/names.hpp"

namespace mdtp::bench {

Prediction predict(const cost::Workload& workload, const cost::TimeModel& model) {
  Prediction p;
  const Topology topology(workload.mesh);
  for (const auto& t : cost::predict_plan(cost::plan_step(workload), topology, model)) {
    PredictedComm c;
    c.group_size = t.group_size;
    c.calls = t.calls;
    c.logical_bytes = t.logical_bytes;
    c.bus_bytes = t.bus_bytes;
    c.seconds = t.seconds;
    c.link = link_class_name(t.link);
    c.algorithms = t.algorithms;
    p.comm[t.key] = c;
  }
  const std::vector<cost::PlannedGemm> gemms = cost::plan_gemms(workload);
  p.gemm_flops = cost::total_flops(gemms);
  const double rate = model.gemm_rate(workload.dtype);
  for (const char* phase : {phase::forward, phase::backward, phase::grad_sync}) p.compute_seconds[phase] = 0.0;
  for (const auto& g : gemms) p.compute_seconds[g.phase] += g.flops() / rate;
  const cost::MemoryEstimate m = cost::estimate_memory(workload);
  p.memory_bytes["parameters"] = static_cast<double>(m.parameter_bytes);
  p.memory_bytes["gradients"] = static_cast<double>(m.gradient_bytes);
  p.memory_bytes["optimizer_state"] = static_cast<double>(m.optimizer_bytes);
  p.memory_bytes["activations"] = static_cast<double>(m.activation_bytes + m.output_bytes);
  p.memory_bytes["total"] = static_cast<double>(m.total() + m.output_bytes);
  return p;
}

}  // namespace mdtp::bench
