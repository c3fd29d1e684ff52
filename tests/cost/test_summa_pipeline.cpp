// SUMMA's products as the engine pipelines them (cost/summa_pipeline.hpp): the clock of one rank
// against hand timelines, the limits (no GEMM hides nothing, no communication leaves the GEMMs),
// and what it takes off a 2D and a 2.5D block's collectives and leaves on 1D's and 3D's.  And the
// pipeline drain when the input gradient leaves before the weight pass (mdtp's engine).
#include <catch2/catch.hpp>

#include "cost/geometry.hpp"
#include "cost/layer_costs.hpp"
#include "cost/step_model.hpp"
#include "cost/summa_pipeline.hpp"
#include "dgx_a100.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using mdtp::testing::dgx_a100;

TEST_CASE("SUMMA's pipelined product: one rank's clock in the engine's issue and wait order", "[cost][summa]") {
  // C = A·B, q = 2: broadcast 0 alone, then broadcast 1 under GEMM 0: max(c + 2g, 2c + g).
  CHECK(summa_product_seconds(2, {1.0, 0.0, 3.0}) == Approx(7.0));  // c + 2g: the GEMMs hide broadcast 1
  CHECK(summa_product_seconds(2, {3.0, 0.0, 1.0}) == Approx(7.0));  // 2c + g: the link is the bottleneck
  // dX = dY·Wᵀ, q = 2, b = 1, g = 3, r = 2: b0 [0,1]; b1 [1,2] under GEMM 0 [1,4]; r0 [4,6] under
  // GEMM 1 [4,7]; r1 [7,9] waited for at the end: 9 against the listed 2(b + r) + 2g = 12.
  CHECK(summa_product_seconds(2, {1.0, 2.0, 3.0}) == Approx(9.0));
  // q = 3, b = r = g = 1, one link: b0 [0,1]; G0 [1,2] with b1 [1,2]; r0 [2,3] then, issued at 2,
  // b2 [3,4]; G1 [2,3]; r1 issued at 3 runs [4,5]; G2 waits for b2: [4,5]; r2 [5,6].
  CHECK(summa_product_seconds(3, {1.0, 1.0, 1.0}) == Approx(6.0));
  for (int q : {2, 3, 4, 7}) {
    CAPTURE(q);
    // Without GEMM time nothing is hidden; without communication the GEMMs alone.
    CHECK(summa_product_seconds(q, {0.5, 0.25, 0.0}) == Approx(q * 0.75));
    CHECK(summa_product_seconds(q, {0.5, 0.0, 0.0}) == Approx(q * 0.5));
    CHECK(summa_product_seconds(q, {0.0, 0.0, 2.0}) == Approx(q * 2.0));
    // Long GEMMs hide every broadcast but the first and every reduce but the last.
    CHECK(summa_product_seconds(q, {0.5, 0.25, 10.0}) == Approx(0.5 + q * 10.0 + 0.25));
    // Never below the GEMMs or the link's serial work, never above everything in a row.
    for (double g : {0.1, 0.6, 1.5}) {
      const double t = summa_product_seconds(q, {0.5, 0.25, g});
      CHECK(t >= std::max(q * g, q * 0.75) - 1e-12);
      CHECK(t <= q * (0.75 + g) + 1e-12);
    }
  }
}

namespace {

Workload block_workload(const char* layer, TpMode mode, int tp, int depth) {
  Workload w;
  w.mode = mode;
  w.mesh.world = tp;
  w.mesh.tp = tp;
  w.mesh.tp_mode = mode;
  w.mesh.tp_depth = depth;
  w.mesh.ranks_per_node = 8;
  w.layer = layer;
  w.rows = 4 * 2048;
  w.hidden = 4096;
  w.ffn_hidden = 4 * 4096;
  w.dtype = DType::bf16;
  w.grad_dtype = DType::f32;
  return w;
}

}  // namespace

TEST_CASE("SUMMA's GEMMs hide part of 2D's and 2.5D's collectives; 1D and 3D have none to hide", "[cost][summa]") {
  const Cluster cluster = dgx_a100();
  const TimeModel model = cluster_time_model(cluster);
  for (auto [mode, tp, depth] : {std::tuple{TpMode::d2, 4, 1}, std::tuple{TpMode::d2, 16, 1},
                                 std::tuple{TpMode::d2p5, 8, 2}}) {
    CAPTURE(mode, tp, depth);
    for (const char* layer : {"mlp", "attention"}) {
      CAPTURE(layer);
      const Geometry g(block_workload(layer, mode, tp, depth));
      const SummaHidden hidden = summa_hidden_seconds(g, model, cluster);
      // What plan_step lists for each pass's products, one call after another.
      double forward = 0.0, backward = 0.0, weight = 0.0;
      for (const PlannedCall& call : plan_step(g.workload())) {
        if (call.phase == "grad_sync") continue;
        (call.phase == "forward" ? forward : call.weight_pass ? weight : backward) +=
            predict_call(call, g.topology(), model).seconds;
      }
      CHECK(hidden.forward > 0.0);
      CHECK(hidden.backward_input > 0.0);
      CHECK(hidden.backward_weight > 0.0);
      // At most all but each product's first broadcast (and last reduce): (q−1)/q of the listed.
      const double share = (g.q() - 1.0) / g.q();
      CHECK(hidden.forward <= share * forward + 1e-15);
      CHECK(hidden.backward_input <= share * backward + 1e-15);
      CHECK(hidden.backward_weight <= share * weight + 1e-15);
    }
  }
  for (auto [mode, tp] : {std::pair{TpMode::d1, 8}, std::pair{TpMode::d1_sp, 8}, std::pair{TpMode::d3, 8}}) {
    CAPTURE(mode);
    const SummaHidden hidden = summa_hidden_seconds(Geometry(block_workload("mlp", mode, tp, 1)), model, cluster);
    CHECK(hidden.forward == 0.0);
    CHECK(hidden.backward_input == 0.0);
    CHECK(hidden.backward_weight == 0.0);
  }
  // The block's costs carry the difference, pass by pass: the listed less the hidden; the weight
  // pass holds the dW products' collectives (2D and 3D), 1D's weight pass none.
  const ModelShape shape{8, 4096, 32, 2048, 51200};
  const LayerCosts costs = layer_costs(shape, TpMode::d2, 4, 1, 4, DType::bf16, cluster, {.grad_dtype = DType::f32});
  double listed_f = 0.0, listed_w = 0.0, hidden_f = 0.0, hidden_w = 0.0;
  for (const char* layer : {"attention", "mlp", "layernorm", "layernorm"}) {
    Workload w = block_workload(layer, TpMode::d2, 4, 1);
    const Geometry g(w);
    for (const PlannedCall& call : plan_step(w)) {
      if (call.phase == "forward") listed_f += predict_call(call, g.topology(), model).seconds;
      if (call.weight_pass) listed_w += predict_call(call, g.topology(), model).seconds;
    }
    if (std::string(layer) != "layernorm") {
      hidden_f += summa_hidden_seconds(g, model, cluster).forward;
      hidden_w += summa_hidden_seconds(g, model, cluster).backward_weight;
    }
  }
  CHECK(costs.block.forward.comm_seconds == Approx(listed_f - hidden_f).epsilon(1e-9));
  CHECK(costs.block.backward_weight.comm_seconds == Approx(listed_w - hidden_w).epsilon(1e-9));
  CHECK(layer_costs(shape, TpMode::d3, 8, 1, 4, DType::bf16, cluster).block.backward_weight.comm_seconds > 0.0);
  CHECK(layer_costs(shape, TpMode::d1_sp, 8, 1, 1, DType::bf16, cluster).block.backward_weight.comm_seconds == 0.0);
}

TEST_CASE("the input gradient sent before the weight pass: GPipe and 1F1B drain in (p-1)(T_F + T_B)",
          "[cost][step][pipeline]") {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);
  c.spec.model = ModelShape{16, 4096, 32, 2048, 51200};
  c.spec.global_batch = 32;
  c.spec.layout.mode = TpMode::d1;
  c.spec.layout.tp = 8;
  c.spec.layout.pp = 4;
  c.spec.layout.dp = 1;
  c.set_micro_batch(1);
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    c.spec.layout.schedule = kind;
    StepConfig early = c;
    early.overlap.input_gradient_first = true;
    const StepEstimate after = estimate_step(c, dgx_a100()), before = estimate_step(early, dgx_a100());
    // Everything but the bubble is the same; the bubble loses (p − 1) mean weight passes: a
    // stage's blocks' and, over the four stages, the head's and the embedding's.
    CHECK(before.time.compute == Approx(after.time.compute).epsilon(1e-12));
    CHECK(before.time.tp_comm == Approx(after.time.tp_comm).epsilon(1e-12));
    CHECK(before.time.bubble < after.time.bubble);
    const LayerCosts costs =
        layer_costs(c.spec.model, TpMode::d1, 8, 1, 1, DType::bf16, for_job(dgx_a100(), c.gpus()));
    const double blocks_per_stage = 16.0 / 4.0;
    // The weight pass also holds the f32 buffer's read and write in its GEMMs' epilogues (6 bytes
    // per element beyond the bf16 dW write layer_costs prices).
    const double params = blocks_per_stage * costs.block_params + (costs.head_params + costs.embedding_params) / 4;
    const double accumulate = params * 6.0 / (dgx_a100().hbm_bandwidth * dgx_a100().memory_efficiency);
    CHECK(after.time.bubble - before.time.bubble ==
          Approx(3 * (blocks_per_stage * costs.block.backward_weight.seconds() +
                      (costs.head.backward_weight.seconds() + costs.embedding.backward_weight.seconds()) / 4 +
                      accumulate))
              .epsilon(1e-9));
  }
  // ZB-H1 places its weight passes itself: the switch changes nothing.
  c.spec.layout.schedule = ScheduleKind::zb_h1;
  StepConfig early = c;
  early.overlap.input_gradient_first = true;
  CHECK(estimate_step(early, dgx_a100()).step_seconds == estimate_step(c, dgx_a100()).step_seconds);
}
