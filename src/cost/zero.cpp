#include "cost/zero.hpp"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

ZeroStageCost zero_stage_cost(const ZeroPaperInputs& c, int stage) {
  require(c.parameters > 0 && std::isfinite(c.parameters), "ZeRO needs a positive parameter count; got ", c.parameters);
  require(c.data_parallel >= 1, "ZeRO needs a data-parallel group of at least one rank; got dp=", c.data_parallel);
  require(c.param_bytes >= 0 && c.grad_bytes >= 0 && c.optimizer_bytes >= 0,
          "ZeRO bytes per parameter must be >= 0; got param=", c.param_bytes, ", grad=", c.grad_bytes,
          ", optimizer=", c.optimizer_bytes);
  const double psi = c.parameters, nd = c.data_parallel;
  const double p = c.param_bytes, g = c.grad_bytes, k = c.optimizer_bytes;
  ZeroStageCost s;
  s.stage = stage;
  switch (stage) {
    case 0:
      s.name = "baseline DP";
      s.memory_bytes = (p + g + k) * psi;
      s.comm_elements = 2.0 * psi;
      s.comm_bytes = 2.0 * psi * g;  // all-reduce of gradients = reduce-scatter + all-gather
      s.memory_formula = "(p+g+K)*Psi";
      s.comm_formula = "2Psi all-reduce";
      return s;
    case 1:
      s.name = "optimizer states";
      s.memory_bytes = p * psi + g * psi + k * psi / nd;
      s.comm_elements = 2.0 * psi;
      s.comm_bytes = psi * g + psi * p;
      s.memory_formula = "p*Psi + g*Psi + K*Psi/Nd";
      s.comm_formula = "2Psi reduce-scatter + all-gather";
      return s;
    case 2:
      s.name = "+ gradients";
      s.memory_bytes = p * psi + (g + k) * psi / nd;
      s.comm_elements = 2.0 * psi;
      s.comm_bytes = psi * g + psi * p;
      s.memory_formula = "p*Psi + (g+K)*Psi/Nd";
      s.comm_formula = "2Psi reduce-scatter + all-gather";
      return s;
    case 3:
      s.name = "+ parameters";
      s.memory_bytes = (p + g + k) * psi / nd;
      s.comm_elements = 3.0 * psi;
      s.comm_bytes = 2.0 * psi * p + psi * g;
      s.memory_formula = "(p+g+K)*Psi/Nd";
      s.comm_formula = "3Psi all-gather fwd + all-gather bwd + reduce-scatter";
      return s;
    default: break;
  }
  throw_error("ZeRO stages are 0, 1, 2 and 3; got stage=", stage);
}

std::vector<ZeroStageCost> zero_costs(const ZeroPaperInputs& config) {
  std::vector<ZeroStageCost> out;
  for (int stage = 0; stage <= 3; ++stage) out.push_back(zero_stage_cost(config, stage));
  return out;
}

ZeroPaperTraffic zero_paper_traffic(const BucketPlan& plan, int stage, int micro_batches, bool keep_parameters,
                                    bool reduce_per_micro_batch, const std::map<LedgerKey, LedgerTotals>& ledger,
                                    const std::map<LedgerKey, LedgerTotals>* model) {
  require(stage >= 0 && stage <= 3, "ZeRO stages are 0, 1, 2 and 3; got stage=", stage);
  ZeroPaperTraffic t;
  t.factor = stage == 3 ? 3 : 2;
  double padding = 0.0;
  std::set<std::string> groups;
  for (const Bucket& b : plan.buckets) {
    // One reduction of the gradients (in their dtype) and factor - 1 gathers of the values (in
    // theirs): the paper's 2Psi or 3Psi, with mixed precision's f32 gradients and bf16 values.
    const double grad_size = static_cast<double>(dtype_size(b.grad_dtype)), value_size = static_cast<double>(dtype_size(b.dtype));
    double elements = 0.0;
    for (const BucketSlot& s : b.slots) elements += static_cast<double>(s.numel);
    t.psi += elements;
    t.paper_bus_bytes += elements * (b.shards - 1) / b.shards * (grad_size + (t.factor - 1) * value_size);
    // Stage 0 reduces parameter by parameter: no padding travels.
    if (stage > 0 && b.shards > 1) padding += (static_cast<double>(b.padded) - elements) * grad_size;
    groups.insert(b.shard_group.empty() ? group::dp : b.shard_group);
  }
  auto data_parallel = [&](const std::map<LedgerKey, LedgerTotals>& calls) {
    double bus = 0.0;
    for (const auto& [key, totals] : calls)
      if (groups.count(key.group) &&
          (key.phase == phase::grad_sync || key.phase == phase::optimizer || key.phase == phase::param_gather))
        bus += totals.bus_bytes;
    return bus;
  };
  t.ledger_bus_bytes = data_parallel(ledger);
  if (model) t.model_bus_bytes = data_parallel(*model);

  // What the paper leaves out, as it applies to this configuration.
  std::vector<std::string> why;
  if (padding > 0) why.push_back(fmt::format("bucket padding and alignment ({:.0f} B per collective pass)", padding));
  if (stage >= 1 && plan.options.dp > 1) why.push_back("the gradient norm's 8-byte all-reduce over dp");
  if (stage >= 2 && reduce_per_micro_batch && micro_batches > 1)
    why.push_back(fmt::format("gradients reduce-scattered after every micro-batch (m = {}: {} reduce-scatters per "
                              "bucket, not 1)",
                              micro_batches, micro_batches));
  if (stage == 3 && keep_parameters) why.push_back("keep-params gathers each bucket once per step (2Psi, not 3Psi)");
  if (stage == 3 && !keep_parameters)
    why.push_back(fmt::format("stage 3 gathers per pass and micro-batch (m = {}: about 2m gathers per bucket; none "
                              "for the embedding's backward, the tied wte again for the head)",
                              micro_batches));
  t.why = why.empty() ? "nothing (every parameter moves unpadded, as the paper counts)" : fmt::format("{}", fmt::join(why, "; "));
  return t;
}

std::string ZeroPaperTraffic::line() const {
  return fmt::format("ZeRO data-parallel bus bytes per step: paper {}Psi = {:.0f} B (Psi = {:.0f} elements), ledger "
                     "{:.0f} B, model {:.0f} B; they differ by: {}",
                     factor, paper_bus_bytes, psi, ledger_bus_bytes, model_bus_bytes, why);
}

}  // namespace mdtp::cost
