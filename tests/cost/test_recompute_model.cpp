// Recomputation in the whole-step model: selective removes the attention core's kept bytes
// (Korthikanti's 5as/h) and adds the core's forward FLOPs once more; the attention kernel is an
// input — with a streaming kernel (no T×T probabilities kept) selective is none, in memory, time
// and FLOPs; the planner searches none, selective and full, and with a streaming kernel no
// selective configuration separate from none.
#include <catch2/catch.hpp>

#include <set>

#include "cost/layer_costs.hpp"
#include "cost/model_flops.hpp"
#include "cost/planner.hpp"
#include "cost/step_model.hpp"
#include "dgx_a100.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using mdtp::testing::dgx_a100;

namespace {

StepConfig base_config() {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);  // the step model's usual case: bf16 with dropout
  c.spec.dropout = 0.1;
  c.spec.model = ModelShape{16, 2048, 16, 2048, 51200};
  c.spec.global_batch = 64;
  c.spec.layout.mode = TpMode::d1_sp;
  c.spec.layout.tp = 4;
  c.spec.layout.pp = 2;
  c.spec.layout.dp = 2;
  c.set_micro_batch(1);
  c.spec.layout.schedule = ScheduleKind::one_f_one_b;
  return c;
}

}  // namespace

TEST_CASE("selective recomputation drops the attention core's bytes and recomputes its FLOPs", "[cost][recompute]") {
  StepConfig none = base_config(), selective = base_config();
  selective.spec.recompute = Recompute::selective;
  const LayerCosts lc = layer_costs(none.spec.model, none.spec.layout.mode, none.spec.layout.tp, none.spec.layout.depth, none.micro_batch(), none.dtype(),
                                    dgx_a100(), {.dropout = none.dropout()});
  const StepEstimate en = estimate_step(none, dgx_a100()), es = estimate_step(selective, dgx_a100());
  const double layers = static_cast<double>(none.layers_per_stage());
  // Per micro-batch in flight, each layer keeps `core` fewer bytes; one layer's core is the
  // working set of the recomputation.
  REQUIRE(lc.block_activations.core > 0);
  CHECK(en.memory.in_flight == es.memory.in_flight);
  CHECK(en.memory.activations - es.memory.activations ==
        Approx(en.memory.in_flight * layers * lc.block_activations.core - lc.block_activations.core));
  // HFU's count: the core's forward (Q·Kᵀ and P·V, 4·h·s per token and layer) once more.
  const double tokens = static_cast<double>(none.spec.global_batch * none.spec.model.seq);
  const double l = static_cast<double>(none.spec.model.layers), h = static_cast<double>(none.spec.model.hidden),
               s = static_cast<double>(none.spec.model.seq);
  CHECK(es.hardware_flops - en.hardware_flops == Approx(tokens * l * 4 * h * s));
  CHECK(es.model_flops == en.model_flops);
  // HFU counts the model FLOPs plus the recomputed ones over the same GPUs and peak.
  const double recomputed = es.hardware_flops - en.hardware_flops;
  CHECK(es.hfu / en.hfu == Approx((es.model_flops + recomputed) / en.model_flops * en.step_seconds / es.step_seconds));
}

TEST_CASE("with a streaming attention kernel selective recomputation is none", "[cost][recompute]") {
  StepConfig keeping = base_config();
  StepConfig none = base_config(), selective = base_config();
  none.attention_keeps_probabilities = false;
  selective.attention_keeps_probabilities = false;
  selective.spec.recompute = Recompute::selective;
  const LayerCosts lc = layer_costs(none.spec.model, none.spec.layout.mode, none.spec.layout.tp, none.spec.layout.depth, none.micro_batch(), none.dtype(),
                                    dgx_a100(), {.dropout = none.dropout()});
  const StepEstimate ek = estimate_step(keeping, dgx_a100()), en = estimate_step(none, dgx_a100()),
                     es = estimate_step(selective, dgx_a100());
  CHECK(es.memory.activations == en.memory.activations);
  CHECK(es.hardware_flops == en.hardware_flops);
  CHECK(es.step_seconds == en.step_seconds);
  CHECK(selective.effective_recompute() == Recompute::none);
  // The streaming kernel keeps no core under none either.
  CHECK(ek.memory.activations - en.memory.activations ==
        Approx(ek.memory.in_flight * static_cast<double>(keeping.layers_per_stage()) * lc.block_activations.core));
  CHECK(describe(none).find("streaming-attention") != std::string::npos);

  StepConfig full = none;
  full.spec.recompute = Recompute::full;
  StepConfig full_keeping = keeping;
  full_keeping.spec.recompute = Recompute::full;
  // Full recomputation keeps the inputs either way; only the recomputed layer's working set differs.
  const double kept_full = estimate_step(full_keeping, dgx_a100()).memory.activations;
  CHECK(kept_full - estimate_step(full, dgx_a100()).memory.activations == Approx(lc.block_activations.core));
}

TEST_CASE("the planner searches none, selective and full", "[cost][recompute][planner]") {
  PlanRequest r;
  r.base.spec.model = ModelShape{8, 1024, 16, 512, 8192};
  r.base.spec.global_batch = 32;
  r.base.spec.precision = precision_for(DType::bf16);
  r.base.spec.dropout = 0.1;
  r.gpus = 16;
  r.modes = {TpMode::d1};
  std::set<Recompute> seen;
  for (const StepEstimate& e : plan(r, dgx_a100()).ranked) seen.insert(e.config.spec.recompute);
  CHECK(seen == std::set<Recompute>{Recompute::none, Recompute::selective, Recompute::full});
  r.base.attention_keeps_probabilities = false;
  seen.clear();
  const PlanResult streaming = plan(r, dgx_a100());
  for (const StepEstimate& e : streaming.ranked) seen.insert(e.config.spec.recompute);
  CHECK(seen == std::set<Recompute>{Recompute::none, Recompute::full});
}
