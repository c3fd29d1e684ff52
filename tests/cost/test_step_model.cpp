// The whole-step model against hand formulas: FLOP counts (PaLM's 6N + 12lhs, Narayanan's
// 96·B·s·l·h²(...)) and the per-rank GEMM lists that must add up to them in every mode; the
// pipeline bubbles; the activation memory against Korthikanti et al. 2022's closed forms; the
// time split adding up to the step.  Llama: the published parameter totals, its FLOPs and GEMMs,
// and the memory of an untied head.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <numbers>

#include "cost/collective_sms.hpp"
#include "cost/kernel_time.hpp"
#include "cost/gpt_step_comm.hpp"
#include "cost/layer_costs.hpp"
#include "cost/model_flops.hpp"
#include "cost/model_presets.hpp"
#include "cost/step_memory.hpp"
#include "cost/step_model.hpp"
#include "cost/straggler_pace.hpp"
#include "plan/schedule.hpp"
#include "plan/schedule_sim.hpp"
#include "dgx_a100.hpp"
#include "zero_step_config.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using mdtp::testing::dgx_a100;
using mdtp::testing::zero_step_config;

namespace {

LayerCosts costs_of(const StepConfig& c) {
  return layer_costs(c.spec.model, c.spec.layout.mode, c.spec.layout.tp, c.spec.layout.depth, c.micro_batch(), c.dtype(),
                     dgx_a100(), {.dropout = c.dropout(), .engine_kernels = c.engine_kernels});
}

}  // namespace

TEST_CASE("model FLOPs: PaLM's 6N + 12lhs per token, and Narayanan's count with recomputation", "[cost][step]") {
  const ModelShape m{24, 2304, 24, 2048, 51200};
  const double l = 24, h = 2304, s = 2048, V = 51200, B = 512;
  const double N = l * (12 * h * h + 13 * h) + V * h + s * h + 2 * h;
  CHECK(parameter_count(m) == Approx(N).epsilon(1e-12));
  CHECK(model_flops(m, 512) == Approx(B * s * (6 * (N - s * h) + 12 * l * h * s)).epsilon(1e-12));
  const double narayanan = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  CHECK(narayanan_flops(m, 512) == Approx(narayanan).epsilon(1e-12));
  CHECK(hardware_flops(m, 512, Recompute::full) == Approx(narayanan).epsilon(1e-12));
  CHECK(hardware_flops(m, 512, Recompute::none) ==
        Approx(B * s * (72 * l * h * h + 12 * l * h * s + 6 * V * h)).epsilon(1e-12));
  CHECK(hardware_flops(m, 512, Recompute::selective) ==
        Approx(B * s * (72 * l * h * h + 16 * l * h * s + 6 * V * h)).epsilon(1e-12));
}

TEST_CASE("Llama's parameters and FLOPs: the released totals, PaLM's count without the lookup table",
          "[cost][step][llama]") {
  // The element counts of the released checkpoints (the sum over their safetensors tensors).
  CHECK(parameter_count(find_model_preset("llama2-7b").model) == 6738415616.0);
  CHECK(parameter_count(find_model_preset("llama2-70b").model) == 68976648192.0);
  CHECK(parameter_count(find_model_preset("llama3-8b").model) == 8030261248.0);
  // The short names stand for Llama 2's sizes.
  CHECK(&find_model_preset("llama-70b") == &find_model_preset("llama2-70b"));
  CHECK(&find_model_preset("llama-7b") == &find_model_preset("llama2-7b"));
  CHECK_THROWS_WITH(find_model_preset("llama-65b"), Catch::Contains("unknown model preset 'llama-65b'"));
  // Llama 2 7B by hand: per layer Q, K, V, O 4h², gate, up, down 3hF, two RMSNorm γ; the embedding
  // and the untied head V·h each; the final norm.
  const ModelShape m = find_model_preset("llama2-7b").model;
  const double l = 32, h = 4096, F = 11008, s = 4096, V = 32000, B = 8;
  const double N = l * (4 * h * h + 3 * h * F + 2 * h) + 2 * V * h + h;
  CHECK(parameter_count(m) == Approx(N).epsilon(1e-15));
  // The embedding is only looked up; the head is a product: 6(N − Vh) per token.
  CHECK(model_flops(m, 8) == Approx(B * s * (6 * (N - V * h) + 12 * l * h * s)).epsilon(1e-12));
  CHECK(hardware_flops(m, 8, Recompute::none) ==
        Approx(B * s * (3 * l * 2 * (4 * h * h + 3 * h * F) + 3 * l * 4 * h * s + 6 * V * h)).epsilon(1e-12));
  // Grouped-query attention: K and V of 8 heads of 128 (Llama 2 70B): 2·h·(h + 2·8·128) per token.
  const ModelShape g = find_model_preset("llama2-70b").model;
  const double h70 = 8192, kv_width = 8 * 128, F70 = 28672;
  CHECK(hardware_flops(g, 1, Recompute::none) ==
        Approx(4096.0 * (3 * 80 * 2 * (h70 * (h70 + 2 * kv_width) + h70 * h70 + 3 * h70 * F70) + 3 * 80 * 4 * h70 * 4096 +
                         6 * 32000 * h70))
            .epsilon(1e-12));
  // Tied, the table is the head's product: counted once, at 6 per token.
  ModelShape tied = m;
  tied.tied_head = true;
  CHECK(parameter_count(tied) == Approx(N - V * h).epsilon(1e-15));
  CHECK(model_flops(tied, 8) == Approx(B * s * (6 * (N - V * h) + 12 * l * h * s)).epsilon(1e-12));
}

TEST_CASE("the per-rank GEMMs of every mode add up to the hardware FLOPs", "[cost][step]") {
  ModelShape llama{4, 256, 8, 64, 1000};
  llama.family = ModelFamily::llama;
  llama.kv_heads = 4;  // divisible by every head split below
  llama.ffn_hidden = 704;
  llama.tied_head = false;
  for (const ModelShape& m : {ModelShape{4, 256, 8, 64, 1000}, llama}) {
    struct Case {
      TpMode mode;
      int tp, depth;
    };
    for (const Case& c : {Case{TpMode::d1, 1, 1}, Case{TpMode::d1, 4, 1}, Case{TpMode::d1_sp, 4, 1}, Case{TpMode::d2, 4, 1},
                          Case{TpMode::d2p5, 8, 2}, Case{TpMode::d3, 8, 1}}) {
      for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
        INFO(tp_mode_name(c.mode) << " tp=" << c.tp << " recompute " << recompute_name(r));
        const std::int64_t b = 4;
        const LayerCosts lc = layer_costs(m, c.mode, c.tp, c.depth, b, DType::bf16, dgx_a100(), {.dropout = true});
        const UnitCosts& u = lc.block;
        const double block = u.forward.gemm_flops + u.backward_input.gemm_flops + u.backward_weight.gemm_flops +
                             u.recompute(r).gemm_flops;
        const double head = lc.head.forward.gemm_flops + lc.head.backward_input.gemm_flops +
                            lc.head.backward_weight.gemm_flops;
        // Every rank runs the same shapes: the rank's FLOPs × tp is the replica's (the padded vocabulary
        // of the head aside: V = 1000 splits evenly over 1, 2, 4 and 8 ranks here).
        const double micro_batches = 16.0 / b;
        const double total = c.tp * micro_batches * (m.layers * block + head);
        INFO(model_family_name(m.family));
        CHECK(total == Approx(hardware_flops(m, 16, r)).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("pipeline bubbles: GPipe/1F1B (p-1)/m, interleaved (p-1)/(vm), ZB-H1 (p-1)(F+B-W)", "[cost][step]") {
  const StageTimes t{1.0, 1.2, 0.8};
  PipelineConfig c{4, 8, 1, ScheduleKind::one_f_one_b};
  CHECK(bubble_seconds(c, t) == Approx(3 * 3.0));
  c.schedule = ScheduleKind::gpipe;
  CHECK(bubble_seconds(c, t) == Approx(3 * 3.0));
  CHECK(bubble_seconds(c, t) / (c.microbatches * 3.0) == Approx(bubble_over_ideal(c)));
  c = PipelineConfig{4, 8, 2, ScheduleKind::interleaved};
  CHECK(bubble_seconds(c, t) == Approx(3 * 3.0 / 2));
  CHECK(bubble_seconds(c, t) / (c.microbatches * 3.0) == Approx(bubble_over_ideal(c)));
  c = PipelineConfig{4, 8, 1, ScheduleKind::zb_h1};
  CHECK(bubble_seconds(c, t) == Approx(3 * (1.0 + 1.2 - 0.8)));
  CHECK(bubble_over_ideal(c) == Approx(3.0 / (3 * 8)));  // T_F = T_B = T_W: a third of 1F1B's
  CHECK(bubble_seconds(c, StageTimes{1, 1, 5}) == 0.0);
  // 1F1B holds min(p - r, m): never more micro-batches than there are.
  CHECK(peak_in_flight(PipelineConfig{4, 2, 1, ScheduleKind::one_f_one_b}) == std::vector<int>{2, 2, 2, 1});
  CHECK(parse_schedule("zb-h1") == ScheduleKind::zb_h1);
  CHECK_THROWS_WITH(parse_schedule("zb-h3"), Catch::Contains("zb-h3"));
}

TEST_CASE("overlapped pipeline sends: every virtual-stage boundary's latency once forward and once backward",
          "[cost][step]") {
  // Asynchronous sends block no stage, but each pass waits for its input: the first micro-batch's
  // forward crosses the p·v − 1 boundaries of the virtual pipeline one after another, the last one's
  // backward crosses them back, and nothing overlaps those waits.  Interleaving multiplies the
  // boundaries by v.  GPipe and interleaved 1F1B have slack for them in their steady state.  Under
  // Megatron's groups of N = p micro-batches stage 0 wraps to its next chunk just as the group's first
  // micro-batch would be back from stage p − 1: every wrap waits; a larger group leaves N − p passes
  // of slack there, and then only the p − 1 boundaries between the stages' first chunks wait.
  const double h = 0.013;
  for (const StageTimes& t : {StageTimes{1.0, 1.0, 1.0}, StageTimes{0.7, 1.1, 0.9}, StageTimes{1.0, 2.0, 0.0}}) {
    for (int p : {2, 4, 8}) {
      for (int m : {2 * p, 4 * p}) {
        INFO("p " << p << " m " << m << " times " << t.forward << ", " << t.backward_input << ", " << t.backward_weight);
        PipelineConfig gpipe{p, m, 1, ScheduleKind::gpipe};
        CHECK(bubble_seconds(gpipe, t, h) - bubble_seconds(gpipe, t) == Approx(2 * (p - 1) * h));
        for (int v : {2, 3}) {
          INFO("v " << v);
          const PipelineConfig megatron{p, m, v, ScheduleKind::interleaved};  // groups of p
          CHECK(bubble_seconds(megatron, t, h) - bubble_seconds(megatron, t) == Approx(2 * (p * v - 1) * h));
          const PipelineConfig one_group{p, m, v, ScheduleKind::interleaved, m};  // N − p ≥ p passes of slack
          CHECK(bubble_seconds(one_group, t, h) - bubble_seconds(one_group, t) == Approx(2 * (p - 1) * h));
        }
        // Plain 1F1B has no slack: each steady-state cycle waits for the round trip again, so it
        // pays more than the fill's crossings, and more with more micro-batches.
        const PipelineConfig one_f_one_b{p, m, 1, ScheduleKind::one_f_one_b};
        const double extra = bubble_seconds(one_f_one_b, t, h) - bubble_seconds(one_f_one_b, t);
        CHECK(extra > 2 * (p - 1) * h * 1.5);
        const PipelineConfig longer{p, 2 * m, 1, ScheduleKind::one_f_one_b};
        CHECK(bubble_seconds(longer, t, h) - bubble_seconds(longer, t) > extra);
      }
    }
  }
  // ZB-H1's latency comes on top of its closed form, (p − 1)(F + B − W), however its action order
  // fills the gaps: the first micro-batch's forward and the last one's input gradient cross the
  // p − 1 boundaries once each, at least.
  for (int m : {4, 8, 13}) {
    const PipelineConfig zb{4, m, 1, ScheduleKind::zb_h1};
    const StageTimes t{0.7, 1.1, 0.9};
    CHECK(bubble_seconds(zb, t) == Approx(3 * (0.7 + 1.1 - 0.9)));
    CHECK(bubble_seconds(zb, t, h) - bubble_seconds(zb, t) >= 2 * 3 * h * (1 - 1e-12));
  }
  // The latency is what the simulation adds; without one, GPipe's, 1F1B's and the interleaved
  // schedule's simulated action lists (each chunk's passes 1/v of the stage's) idle their most idle
  // stage exactly as long as the closed forms say, so closed form plus that difference is the
  // simulated schedule's own bubble.
  const StageTimes t{0.7, 1.1, 0.9};
  for (const PipelineConfig& c : {PipelineConfig{4, 8, 1, ScheduleKind::one_f_one_b},
                                  PipelineConfig{4, 13, 1, ScheduleKind::gpipe},
                                  PipelineConfig{4, 8, 2, ScheduleKind::interleaved},
                                  PipelineConfig{8, 24, 3, ScheduleKind::interleaved}}) {
    INFO(schedule_name(c.schedule) << " p " << c.stages << " m " << c.microbatches << " v " << c.chunks);
    const double v = c.chunks;
    const Simulation sim = simulate(make_schedule(c.schedule, c.stages, c.microbatches, c.chunks),
                                    PassTimes{t.forward / v, t.backward_input / v, t.backward_weight / v});
    CHECK(*std::max_element(sim.idle.begin(), sim.idle.end()) == Approx(bubble_seconds(c, t)).epsilon(1e-12));
  }
  CHECK_THROWS_WITH(bubble_seconds(PipelineConfig{4, 8, 1, ScheduleKind::one_f_one_b}, t, -1.0),
                    Catch::Contains("-1"));
}

TEST_CASE("activation memory per layer equals Korthikanti et al. 2022's formulas", "[cost][step][memory]") {
  // GPT-3 175B's layer: s = 2048, h = 12288, a = 96, b = 1, t = 8; 2-byte activations, 1-byte masks.
  const ModelShape m{96, 12288, 96, 2048, 51200};
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8, sbh = s * b * h;
  const LayerCosts tp = layer_costs(m, TpMode::d1, 8, 1, 1, DType::bf16, dgx_a100(), {.dropout = true});
  CHECK(tp.block_activations.kept(Recompute::none) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  CHECK(tp.block_activations.kept(Recompute::selective) == Approx(sbh * (10 + 24 / t)).epsilon(1e-12));
  CHECK(tp.block_activations.kept(Recompute::full) == Approx(2 * sbh).epsilon(1e-12));
  const LayerCosts sp = layer_costs(m, TpMode::d1_sp, 8, 1, 1, DType::bf16, dgx_a100(), {.dropout = true});
  CHECK(sp.block_activations.kept(Recompute::none) == Approx(sbh * (34 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  CHECK(sp.block_activations.kept(Recompute::selective) == Approx(sbh * 34 / t).epsilon(1e-12));
  CHECK(sp.block_activations.kept(Recompute::full) == Approx(2 * sbh / t).epsilon(1e-12));
  const LayerCosts serial = layer_costs(m, TpMode::d1, 1, 1, 1, DType::bf16, dgx_a100(), {.dropout = true});
  CHECK(serial.block_activations.kept(Recompute::none) == Approx(sbh * (34 + 5 * a * s / h)).epsilon(1e-12));
}

TEST_CASE("the step: its split adds up, memory per GPU follows ZeRO and the schedule", "[cost][step]") {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);  // the step model's usual case: bf16 with dropout
  c.spec.dropout = 0.1;
  c.spec.model = ModelShape{32, 4096, 32, 2048, 51200};
  c.spec.global_batch = 256;
  c.spec.layout.mode = TpMode::d1_sp;
  c.spec.layout.tp = 8;
  c.spec.layout.pp = 4;
  c.spec.layout.dp = 2;
  c.set_micro_batch(1);
  c.spec.layout.schedule = ScheduleKind::one_f_one_b;
  c.spec.recompute = Recompute::selective;
  const StepEstimate e = estimate_step(c, dgx_a100());
  CHECK(e.time.total() == Approx(e.step_seconds));
  CHECK(e.time.bubble > 0);
  CHECK(e.placement.tp.link == LinkClass::intra_node);
  CHECK(e.placement.pp.link == LinkClass::inter_node);
  CHECK(e.tokens_per_second == Approx(256 * 2048 / e.step_seconds));
  CHECK(e.hfu >= e.mfu);
  CHECK(e.memory.in_flight == 4);  // 1F1B: p micro-batches on the first stage

  StepConfig z = c;
  z.spec.layout.pp = 1;
  z.spec.layout.dp = 8;
  z.set_micro_batch(1);  // the micro-batch size stays 1 (m follows dp and the batch)
  z.spec.zero.stage = 1;
  const double params = estimate_step(z, dgx_a100()).memory.parameter_elements;
  const double optimizer0 = params * 12;
  CHECK(estimate_step(z, dgx_a100()).memory.optimizer == Approx(optimizer0 / 8));
  z.spec.zero.stage = 3;
  // fp32 main gradients: the shards, and with m = 256 / 8 = 32 micro-batches every full bucket too
  // (see the next test).
  CHECK(estimate_step(z, dgx_a100()).memory.gradients == Approx(params * 4 / 8 + params * 4));
  z.spec.global_batch = 8;  // one micro-batch: the shards and a window of two blocks plus the tied wte
  z.set_micro_batch(1);
  CHECK(estimate_step(z, dgx_a100()).memory.gradients < params * 4 / 8 + params * 4 / 4);
  z.spec.layout.pp = 2;  // ZeRO-3 under a pipeline, as the engine runs it (its gathers: the tests below)
  z.spec.layout.dp = 4;
  z.set_micro_batch(1);
  CHECK(estimate_step(z, dgx_a100()).memory.parameters_gathered > 0);
  z.spec.zero.stage = 2;
  z.spec.zero.keep_parameters = true;
  CHECK_THROWS_WITH(estimate_step(z, dgx_a100()), Catch::Contains("needs ZeRO stage 3; got zero=2"));

  StepConfig bad = c;
  bad.spec.layout.schedule = ScheduleKind::interleaved;
  bad.spec.layout.chunks = 3;
  CHECK_THROWS_WITH(estimate_step(bad, dgx_a100()), Catch::Contains("pp x chunks"));
  bad = c;
  bad.spec.layout.mode = TpMode::d2;
  bad.spec.layout.tp = 4;
  bad.spec.layout.dp = 4;
  bad.set_micro_batch(1);
  CHECK_THROWS_WITH(estimate_step(bad, dgx_a100()), Catch::Contains("whole sequences"));  // b = 1 over q = 2 row blocks
}

TEST_CASE("the step's compute by kernel class: GEMM-class plus streaming kernels, the hardware count's FLOPs",
          "[cost][step]") {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);
  c.spec.dropout = 0.1;
  c.spec.model = ModelShape{8, 1024, 16, 512, 8192};
  c.spec.global_batch = 16;
  c.spec.layout.mode = TpMode::d1;
  c.spec.layout.tp = 4;
  c.spec.layout.dp = 2;
  c.set_micro_batch(1);  // m = 8
  const Cluster cluster = dgx_a100();
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    INFO("recompute " << recompute_name(r));
    c.spec.recompute = r;
    const StepEstimate e = estimate_step(c, cluster);
    // The split is of compute, nothing more or less.
    CHECK(e.compute.gemm_seconds + e.compute.stream_seconds == Approx(e.time.compute).epsilon(1e-12));
    // Every rank runs the same shapes (V = 8192 splits evenly): one rank's GEMM-class work x tp x dp
    // is the step's hardware FLOPs, recomputation included.
    CHECK(e.compute.gemm_flops * 4 * 2 == Approx(hardware_flops(c.spec.model, 16, r)).epsilon(1e-9));
    // Each class at or under its ceiling: the GEMM rate, the streaming bandwidth.
    CHECK(e.compute.gemm_flops / e.compute.gemm_seconds < cluster.peak(DType::bf16) * cluster.gemm_efficiency);
    CHECK(e.compute.stream_bytes / e.compute.stream_seconds <= cluster.stream_bandwidth());
  }
}

TEST_CASE("the step: an untied head holds its own weight and sums nothing over the embedding group",
          "[cost][step][llama]") {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);
  c.spec.model = ModelShape{8, 1024, 16, 512, 32000};
  c.spec.model.family = ModelFamily::llama;
  c.spec.model.kv_heads = 4;
  c.spec.model.ffn_hidden = 2816;
  c.spec.global_batch = 16;
  c.spec.layout.tp = 2;
  c.spec.layout.pp = 2;
  c.spec.layout.dp = 2;
  c.set_micro_batch(1);
  for (const bool tied : {false, true}) {
    INFO((tied ? "tied" : "untied"));
    c.spec.model.tied_head = tied;
    const LayerCosts lc = layer_costs(c.spec.model, c.spec.layout.mode, c.spec.layout.tp, c.spec.layout.depth,
                                      c.micro_batch(), c.dtype(), dgx_a100(), {.dropout = c.dropout()});
    // Per rank: the vocabulary table's shard V/tp × h; an RMSNorm's γ alone; no position table.
    const double table = 32000.0 / 2 * 1024, norm = 1024;
    CHECK(lc.wte_params == table);
    CHECK(lc.embedding_params == table);
    CHECK(lc.head_params == norm + (tied ? 0.0 : table));
    // The last stage holds the same elements either way (the tied wte's copy, or lm_head.weight) ...
    CHECK(stage_parameters(c, lc, 1) == Approx(4 * lc.block_params + norm + table));
    CHECK(stage_parameters(c, lc, 0) == Approx(4 * lc.block_params + table));
    // ... but only the tied copy is all-reduced between the first and the last stage.
    CHECK(c.head_holds_wte_copy() == tied);
    CHECK(c.head_copies_wte(1) == tied);
  }
  // With the head beside the embedding (pp 1) an untied model holds both tables.
  c.spec.model.tied_head = false;
  c.spec.layout.pp = 1;
  c.spec.layout.dp = 4;
  c.set_micro_batch(1);
  const LayerCosts lc = layer_costs(c.spec.model, c.spec.layout.mode, c.spec.layout.tp, c.spec.layout.depth,
                                    c.micro_batch(), c.dtype(), dgx_a100(), {.dropout = c.dropout()});
  CHECK(stage_parameters(c, lc, 0) == Approx(8 * lc.block_params + 2 * lc.wte_params + 1024));
  CHECK(estimate_step(c, dgx_a100()).traffic.pp_bytes == 0.0);
}

TEST_CASE("the step: ZeRO shards 2.5D weights over dp x depth, the rest over dp", "[cost][step][zero]") {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);  // the step model's usual case: bf16 with dropout
  c.spec.dropout = 0.1;
  c.spec.model = ModelShape{8, 1024, 16, 512, 51200};
  c.spec.global_batch = 64;
  c.spec.layout.mode = TpMode::d2p5;
  c.spec.layout.tp = 8;  // q = 2, d = 2
  c.spec.layout.depth = 2;
  c.spec.layout.pp = 1;
  c.spec.layout.dp = 4;
  c.set_micro_batch(4);  // rows split over q x d = 4 blocks must stay whole sequences
  c.spec.zero.stage = 1;
  const MemorySplit m = estimate_step(c, dgx_a100()).memory;
  // The linear weights of a block, 12h² elements, split over the q × q grid (replicated over depth).
  const double h = 1024, weights = 8 * 12 * h * h / 4;
  const double K = c.optimizer_bytes_per_param();
  CHECK(m.optimizer == Approx(((m.parameter_elements - weights) / 4 + weights / 8) * K));
  c.spec.zero.stage = 3;
  const MemorySplit m3 = estimate_step(c, dgx_a100()).memory;
  // fp32 main gradients: the shards, beside the full buckets inside the step (the next test)
  CHECK(m3.gradients - m3.gradients_in_step == Approx(((m3.parameter_elements - weights) / 4 + weights / 8) * 4));
  CHECK(m3.gradients_in_step == Approx(m3.parameter_elements * 4));  // m = 4 micro-batches: all of them
  c.spec.layout.depth = 1;  // 2.5D with depth 1 is 2D's layout: nothing folds
  c.spec.layout.tp = 4;
  c.spec.zero.stage = 1;
  const MemorySplit flat = estimate_step(c, dgx_a100()).memory;
  CHECK(flat.optimizer == Approx(flat.parameter_elements / 4 * K));
}

TEST_CASE("the step: ZeRO-2/3 hold full gradient buckets inside a step as the engine does", "[cost][step][zero]") {
  // Hand replays of the engine's rule (docs/zero.md §3): a unit's buckets open at its first
  // backward-input pass and are freed when the next unit that completes a bucket reports, after
  // the unit's last weight pass.  In elements per rank of one block (B), the embedding (E = wte +
  // wpe), the wte alone, and a stage's parameters (P).
  StepConfig c = zero_step_config(2, 1, DType::f32);
  const LayerCosts costs = costs_of(c);
  const double B = costs.block_params, E = costs.embedding_params, wte = costs.wte_params;
  REQUIRE(B > E - wte);  // a block outweighs wpe and the final LayerNorm
  REQUIRE(B > costs.head_params);

  // No pipeline, one micro-batch: unit by unit, each block freed one block later; the tied wte,
  // written by the head first and the embedding last, stays through the whole backward.
  CHECK(full_gradient_window(c, costs, 0) == Approx(wte + 2 * B));
  const MemorySplit one = step_memory(c, costs, dgx_a100());
  CHECK(one.gradients_in_step == Approx((wte + 2 * B) * 4));
  CHECK(one.gradients == Approx(one.parameter_elements / 4 * 4 + (wte + 2 * B) * 4));

  // Several micro-batches: the first one's backward opens every bucket, the last one's weight
  // passes complete them — the whole model in full, beside the shards.
  c.spec.global_batch = 32;  // m = 4
  c.set_micro_batch(2);  // two sequences per micro-batch, as zero_window_config
  CHECK(full_gradient_window(c, costs, 0) == Approx(stage_parameters(c, costs, 0)));
  CHECK(step_memory(c, costs, dgx_a100()).gradients == Approx(one.parameter_elements * 4 * (1.0 + 1.0 / 4)));

  // Below stage 2 there is no window: stage 1 holds the gradients whole.
  c.spec.zero.stage = 1;
  CHECK(full_gradient_window(c, costs, 0) == 0.0);
  CHECK(step_memory(c, costs, dgx_a100()).gradients == Approx(one.parameter_elements * 4));
  c.spec.zero.stage = 2;

  // Two stages, one micro-batch, 1F1B: the first stage runs unit by unit (its wte has no second
  // writer), so at the embedding it holds block 1 (not freed yet) and the embedding; the last stage
  // runs every backward-input pass before its weight passes: all its buckets at once.
  c.spec.layout.pp = 2;
  c.spec.layout.dp = 2;
  c.spec.global_batch = 4;  // m = 1
  c.set_micro_batch(2);  // two sequences per micro-batch, as zero_window_config
  CHECK(full_gradient_window(c, costs, 0) == Approx(std::max(2 * B, B + E)));
  CHECK(full_gradient_window(c, costs, 1) == Approx(stage_parameters(c, costs, 1)));
  // The run's own split (--pp-layers 2,6): the last stage's buckets, all open at once, are its six
  // blocks and the head — not an even split's four (the window once took the even split whatever
  // the run gave).
  const double even_last = stage_parameters(c, costs, 1);
  c.spec.layout.pp_layers = {2, 6};
  CHECK(stage_parameters(c, costs, 1) == Approx(even_last + 2 * B));
  CHECK(full_gradient_window(c, costs, 1) == Approx(stage_parameters(c, costs, 1)));
  c.spec.layout.pp_layers.clear();

  // Interleaved, p = 2, v = 2, m = 2: stage 0 holds the embedding + blocks 1–2 (chunk 0, virtual
  // stage 0, unit by unit) and blocks 5–6 (chunk 1).  Its backwards: chunk 1 for micro-batches 0, 1
  // (blocks 6, 5 complete at the second; 5 is still in flight), then chunk 0 for 0, 1, whose first
  // pass opens blocks 2, 1 and the embedding while block 5 is held: 3B + E.
  c.spec.layout.schedule = ScheduleKind::interleaved;
  c.spec.layout.chunks = 2;
  c.spec.global_batch = 8;  // m = 2
  c.set_micro_batch(2);  // two sequences per micro-batch, as zero_window_config
  CHECK(full_gradient_window(c, costs, 0) == Approx(3 * B + E));
  CHECK(full_gradient_window(c, costs, 0) < stage_parameters(c, costs, 0));
}

TEST_CASE("the step: ZeRO-2/3 reducing per micro-batch trade m reduce-scatters for the full buckets",
          "[cost][step][zero]") {
  StepConfig c = zero_step_config(2, 4, DType::f32);
  c.overlap.dp_gradients = false;  // every reduction on the critical path: the count shows
  const LayerCosts costs = costs_of(c);
  const double B = costs.block_params, wte = costs.wte_params, wpe = costs.embedding_params - wte;
  const double ln_f = costs.head_params;
  for (int zero : {2, 3}) {
    INFO("zero " << zero);
    c.spec.zero.stage = zero;
    c.spec.zero.reduce_per_micro_batch = false;
    const StepEstimate once = estimate_step(c, costs, dgx_a100());
    c.spec.zero.reduce_per_micro_batch = true;
    const StepEstimate each = estimate_step(c, costs, dgx_a100());
    // Memory: the full stage inside the step, or per micro-batch the window of one micro-batch
    // (the tied wte and two blocks).  Between micro-batches the embedding's round (wpe and the
    // wte) is completed before the next micro-batch's head reopens the wte; were it not, two wte
    // buffers (+ wpe and the final LayerNorm) would be the peak with this vocabulary.
    CHECK(once.memory.gradients_in_step == Approx(once.memory.parameter_elements * 4));
    REQUIRE(2 * wte + wpe + ln_f > wte + 2 * B);
    CHECK(each.memory.gradients_in_step == Approx((wte + 2 * B) * 4));
    CHECK(each.memory.gradients - each.memory.gradients_in_step ==
          Approx(once.memory.gradients - once.memory.gradients_in_step));  // the same shards
    CHECK(describe(each.config).find("reduce-per-micro-batch") != std::string::npos);
  }
  c.spec.zero.stage = 2;
  c.spec.zero.reduce_per_micro_batch = false;
  const double once2 = estimate_step(c, costs, dgx_a100()).time.dp_comm;
  c.spec.zero.stage = 1;
  const double stage1 = estimate_step(c, costs, dgx_a100()).time.dp_comm;  // reduce-scatter + all-gather, once
  CHECK(once2 == Approx(stage1));
  c.spec.zero.stage = 2;
  c.spec.zero.reduce_per_micro_batch = true;
  const double each2 = estimate_step(c, costs, dgx_a100()).time.dp_comm;
  CHECK(each2 > once2);
  // Stage 2: one all-gather either way; the reduce-scatter r taken 4 times instead of once:
  // each2 − once2 = 3r, and once2 = r + all-gather.
  const double r = (each2 - once2) / 3;
  CHECK(r > 0);
  CHECK(once2 - r > 0);  // the all-gather
  c.spec.zero.stage = 1;
  CHECK_THROWS_WITH(estimate_step(c, costs, dgx_a100()), Catch::Contains("needs ZeRO stage 2 or 3; got zero=1"));
}

TEST_CASE("the step: ZeRO-3 gathers parameters in the engine's pass order, per pass or once per step",
          "[cost][step][zero]") {
  // The engine gathers what a pass reads and prefetches what the next pass of the stage's order
  // reads (docs/zero.md §7): the peak is the largest neighbouring pair.  Elements per rank of one
  // block (B), the wte, wpe and the final LayerNorm.
  StepConfig c = zero_step_config(3, 1, DType::f32);
  const LayerCosts costs = costs_of(c);
  const double B = costs.block_params, wte = costs.wte_params, wpe = costs.embedding_params - wte;
  const double ln_f = costs.head_params;
  REQUIRE(wte > B);  // this vocabulary's wte outweighs a block: two blocks are not the peak

  // No pipeline: F0 (wpe, wte) beside F1 (B); F8 (B) beside the head's forward (ln_f, wte); the
  // embedding's backward-input pass reads nothing.
  const double peak = wte + B + std::max(wpe, ln_f);
  CHECK(gathered_parameter_window(c, costs, 0) == Approx(peak));
  const MemorySplit one = step_memory(c, costs, dgx_a100());
  CHECK(one.parameters_gathered == Approx(peak * 4));
  CHECK(one.parameters == Approx(one.parameter_elements / 4 * 4 + peak * 4));  // the shards beside it
  c.spec.global_batch = 32;  // m = 4: B0 (nothing) beside the next F0 adds no larger pair
  c.set_micro_batch(2);  // two sequences per micro-batch, as zero_window_config
  CHECK(gathered_parameter_window(c, costs, 0) == Approx(peak));
  c.spec.zero.keep_parameters = true;  // kept for the step: every bucket the stage reads
  CHECK(gathered_parameter_window(c, costs, 0) == Approx(stage_parameters(c, costs, 0)));
  CHECK(describe(c).find("keep-params") != std::string::npos);
  CHECK(zero_label(c) == "3k");
  c.spec.zero.reduce_per_micro_batch = true;
  CHECK(zero_label(c) == "3mk");
  c.spec.zero.reduce_per_micro_batch = false;

  // Two 1F1B stages, m = 2.  Stage 0 (embedding, blocks 1–4) runs both forwards before a
  // backward: F4 of micro-batch 0 beside F0 of micro-batch 1.  Stage 1 (blocks 5–8, the head with
  // its own wte copy) alternates: F8 beside the head's forward.
  c.spec.zero.keep_parameters = false;
  c.spec.layout.pp = 2;
  c.spec.layout.dp = 2;
  c.spec.global_batch = 8;
  c.set_micro_batch(2);
  CHECK(gathered_parameter_window(c, costs, 0) == Approx(B + wpe + wte));
  CHECK(gathered_parameter_window(c, costs, 1) == Approx(B + ln_f + wte));
  c.spec.zero.keep_parameters = true;
  CHECK(gathered_parameter_window(c, costs, 1) == Approx(stage_parameters(c, costs, 1)));

  // Time: per pass, each micro-batch gathers the stage twice (exposed beyond its compute); kept,
  // once per step.  With the data-parallel ranks across nodes (16 > 8 GPUs a node) through one
  // NIC per node the gathers outweigh the compute of one 128-token sequence.
  c = zero_step_config(3, 8, DType::f32);
  c.spec.model.seq = 128;
  c.spec.layout.tp = 1;
  c.spec.layout.dp = 16;
  c.spec.layout.micro_batches = 8;
  c.spec.global_batch = 8 * 1 * c.spec.layout.dp;  // one sequence per micro-batch
  const LayerCosts flat = costs_of(c);
  Cluster one_nic = dgx_a100();
  one_nic.nics_per_node = 1;
  const StepEstimate per_pass = estimate_step(c, flat, one_nic);
  REQUIRE(per_pass.time.dp_comm > per_pass.time.compute);  // the gathers are not hidden
  c.spec.zero.keep_parameters = true;
  const StepEstimate kept = estimate_step(c, flat, one_nic);
  CHECK(kept.time.dp_comm < per_pass.time.dp_comm);
  CHECK(kept.memory.parameters > per_pass.memory.parameters);
  CHECK(kept.memory.parameters_gathered == Approx(kept.memory.parameter_elements * 4));
}

TEST_CASE("the step: ZeRO-3's gathers are priced call by call, each paying its ring's latency", "[cost][step][zero]") {
  // The engine all-gathers every bucket a pass reads, one call each (the byte plan replays it:
  // zero3_gather_calls).  Over dp 32 — four DGX A100 nodes — a ring all-gather is 31 steps of the
  // inter-node α whatever its bytes, so the same bytes in smaller buckets cost 31 α more per
  // extra call: the whole stage gathered once per pass would hide that.
  StepConfig c = zero_step_config(3, 4, DType::f32);
  c.spec.layout.tp = 1;
  c.spec.layout.dp = 32;
  c.spec.global_batch = 4 * 2 * c.spec.layout.dp;
  const Cluster cluster = dgx_a100();
  const Placement placement = place(c, cluster);
  REQUIRE(placement.dp.link == LinkClass::inter_node);
  auto calls_with_cap = [&](double mb) {
    StepConfig k = c;
    k.spec.zero.bucket_mb = mb;
    std::int64_t calls = 0;
    for (const GatherCall& g : zero3_gather_calls(StepCommConfig{.spec = k.spec}, 0)) {
      CHECK(g.group_size == 32);
      calls += g.count;
    }
    return std::pair{calls, zero3_gather_seconds(k, placement, cluster)};
  };
  const auto [big_calls, big] = calls_with_cap(25);
  const auto [small_calls, small] = calls_with_cap(1);
  // Every unit's buckets before its forward and (but the embedding's) before its backward-input
  // pass, once per micro-batch: at least 2m − 1 calls per unit.
  CHECK(big_calls >= 4 * (2 * 10 - 1));
  // 1 MiB buckets: a bucket per weight (a parameter is never split), several small ones together.
  REQUIRE(small_calls > big_calls);
  const double ring_latency = 31 * cluster.inter_node.alpha;
  // The padding of more buckets adds a few bytes: within 1 %.
  CHECK(small - big == Approx(static_cast<double>(small_calls - big_calls) * ring_latency).epsilon(0.01));
  // The step sees them: four micro-batches whose compute cannot hide the small buckets' latency.
  StepConfig k = c;
  k.spec.zero.bucket_mb = 1;
  const LayerCosts costs = costs_of(k);
  const StepEstimate step = estimate_step(k, costs, placement, cluster);
  const double compute_per_micro_batch = step.time.compute / 4;
  CHECK(step.time.dp_comm >= 4 * (small / 4 - compute_per_micro_batch));
}

namespace {

// An 8-layer GPT of hidden 4096 in bf16 on tp 8 in `mode`, dp replicas, micro-batch 1 of a
// global batch of 64.
StepConfig eight_layer_step(TpMode mode, int dp) {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);
  c.spec.model = ModelShape{8, 4096, 32, 2048, 51200};
  c.spec.global_batch = 64;
  c.spec.layout.mode = mode;
  c.spec.layout.tp = 8;
  c.spec.layout.dp = dp;
  c.set_micro_batch(1);
  return c;
}

}  // namespace

TEST_CASE("Megatron's overlap switches: TP collectives under their GEMMs, the parameter gather under a forward",
          "[cost][step][overlap]") {
  StepConfig c = eight_layer_step(TpMode::d1_sp, 4);
  c.spec.zero.stage = 1;
  const LayerCosts costs = layer_costs(c.spec.model, c.spec.layout.mode, 8, 1, 1, DType::bf16, dgx_a100());
  const StepEstimate off = estimate_step(c, costs, dgx_a100());
  // --tp-comm-overlap: per pass, only what outlasts the pass's GEMMs is exposed.
  StepConfig tp = c;
  tp.overlap.tp_comm = true;
  const StepEstimate on = estimate_step(tp, costs, dgx_a100());
  // Each unit (the 8 blocks, the embedding, the head) per pass: max(0, its TP time − its GEMM time),
  // and, for the part hidden, the 16 of the A100's 108 SMs Transformer Engine's kernels hold while
  // its reduce-scatters and re-gathers run (collective_sms.hpp).
  auto exposed = [](const UnitCosts& u) {
    double s = 0.0;
    for (const PassCost* p : {&u.forward, &u.backward_input, &u.backward_weight}) {
      const double hidden = std::min(p->comm_seconds, p->gemm_seconds);
      s += p->comm_seconds - hidden;
      if (p->comm_seconds > 0) s += hidden * p->comm_on_sms_seconds / p->comm_seconds * 16.0 / 108.0;
    }
    return s;
  };
  const double m = static_cast<double>(c.microbatches()), L = c.spec.model.layers;
  CHECK(on.time.tp_comm < off.time.tp_comm);
  CHECK(on.time.compute == Approx(off.time.compute).epsilon(1e-12));
  CHECK(on.time.tp_comm == Approx(m * (L * exposed(costs.block) + exposed(costs.embedding) + exposed(costs.head)) +
                                  L * costs.block_grad_sync_seconds)
                               .epsilon(1e-12));
  // It needs sequence parallelism: plain 1D is priced as before.
  StepConfig plain = c, plain_on = c;
  plain.spec.layout.mode = plain_on.spec.layout.mode = TpMode::d1;
  plain_on.overlap.tp_comm = true;
  CHECK(estimate_step(plain_on, dgx_a100()).step_seconds == estimate_step(plain, dgx_a100()).step_seconds);
  // --overlap-param-gather: ZeRO-1's gather of the updated parameters hidden under the first
  // forward, so the data-parallel time drops by at most the gather and never below zero.
  StepConfig gather = c;
  gather.overlap.param_gather = true;
  const StepEstimate g = estimate_step(gather, costs, dgx_a100());
  CHECK(g.time.dp_comm < off.time.dp_comm);
  CHECK(g.time.dp_comm >= 0.0);
  CHECK(g.traffic.dp_bytes == off.traffic.dp_bytes);  // the same bytes, moved under compute
  // It needs the gradient overlap, as Megatron's --overlap-param-gather needs --overlap-grad-reduce.
  gather.overlap.dp_gradients = false;
  CHECK_THROWS_WITH(estimate_step(gather, dgx_a100()), Catch::Contains("--overlap-grad-reduce"));
}

TEST_CASE("Megatron's always-on 1D overlap: a block's backward TP all-reduces under its weight-gradient GEMMs",
          "[cost][step][overlap]") {
  // A column-parallel layer's backward starts the input gradient's all-reduce and computes its
  // weight gradient meanwhile: per block and micro-batch only max(0, B's TP time − W's GEMM time)
  // stays exposed.  One stage, tp 8 over dp 4, bf16.
  StepConfig c = eight_layer_step(TpMode::d1, 4);
  c.spec.zero.stage = 1;
  const LayerCosts costs = layer_costs(c.spec.model, c.spec.layout.mode, 8, 1, 1, DType::bf16, dgx_a100());
  StepConfig waits = c;
  waits.overlap.tp_backward = false;  // mdtp's engine: each all-reduce waited for before dW
  const StepEstimate on = estimate_step(c, costs, dgx_a100()), off = estimate_step(waits, costs, dgx_a100());
  const PassCost& b = costs.block.backward_input;
  const double w_gemm = costs.block.backward_weight.gemm_seconds;
  REQUIRE(b.comm_seconds > 0.0);
  const double m = static_cast<double>(c.microbatches()), L = c.spec.model.layers;
  const double hidden = b.comm_seconds - std::max(0.0, b.comm_seconds - w_gemm);
  CHECK(hidden > 0.0);
  // NCCL's all-reduce inside the node holds 12 of the A100's 108 SMs while it runs beside the GEMMs
  // (6 channels of 40 GB/s for NVLink's 240, doubled: collective_sms.hpp).
  REQUIRE(nccl_channel_sms(on.placement.tp, cluster_time_model(dgx_a100())) == 12);
  CHECK(off.time.tp_comm - on.time.tp_comm == Approx(m * L * hidden * (1.0 - 12.0 / 108.0)).epsilon(1e-9));
  CHECK(on.time.compute == Approx(off.time.compute).epsilon(1e-12));
  // The zero-bubble schedules run the weight pass apart from the backward: nothing to hide under.
  StepConfig zb = c, zb_waits = waits;
  for (StepConfig* k : {&zb, &zb_waits}) {
    k->spec.layout.pp = 2;
    k->spec.layout.dp = 2;
    k->set_micro_batch(1);
    k->spec.layout.schedule = ScheduleKind::zb_h1;
  }
  CHECK(estimate_step(zb, dgx_a100()).step_seconds == estimate_step(zb_waits, dgx_a100()).step_seconds);
  // Only 1D has it: a 2D SUMMA step is the same either way.
  StepConfig two_d = eight_layer_step(TpMode::d2, 4), two_d_waits = two_d;
  two_d.spec.layout.tp = two_d_waits.spec.layout.tp = 4;
  two_d.set_micro_batch(2);  // SUMMA's two row blocks split a micro-batch's sequences
  two_d_waits.set_micro_batch(2);
  two_d_waits.overlap.tp_backward = false;
  CHECK(estimate_step(two_d, dgx_a100()).step_seconds == estimate_step(two_d_waits, dgx_a100()).step_seconds);
}

TEST_CASE("gradient accumulation with and without Megatron's fusion: the buffer read and written in the GEMM's "
          "epilogue, or dW read and the buffer read and written by a kernel of its own",
          "[cost][step]") {
  // One stage (pp 1): its blocks, the embedding and the head, bf16 values with f32 gradients.
  StepConfig fused = eight_layer_step(TpMode::d1, 2);
  StepConfig unfused = fused;
  unfused.gradient_accumulation_fusion = false;
  const LayerCosts costs = costs_of(fused);
  const StepEstimate a = estimate_step(fused, costs, dgx_a100()), b = estimate_step(unfused, costs, dgx_a100());
  const double L = fused.spec.model.layers, m = static_cast<double>(fused.microbatches());
  const double params = L * costs.block_params + costs.embedding_params + costs.head_params;
  const double stream = dgx_a100().hbm_bandwidth * dgx_a100().memory_efficiency;
  // Fused, each dW GEMM's epilogue reads and writes the f32 buffer (8 bytes per element) where
  // layer_costs priced writing dW in bf16 (2): 6 more per element and micro-batch, no kernel.
  const double fused_bytes = params * (2 * 4.0 - 2.0);
  const double plain = estimate_step(fused, costs, dgx_a100()).time.compute - m * fused_bytes / stream;
  // Unfused, the GEMM writes dW (2) and a kernel per tensor reads it and reads and writes the buffer.
  const double bytes = params * (2.0 + 2 * 4.0);  // dW in bf16 read; the f32 buffer read and written
  const double kernels = L * costs.block_param_tensors + 2;
  REQUIRE(costs.block_param_tensors == 12);  // GPT-2's block: 4 weights, 4 biases, 2 norms x (gain, bias)
  const double per_micro_batch = bytes / stream + kernels * dgx_a100().kernel_overhead;
  CHECK(b.time.compute - plain == Approx(m * per_micro_batch).epsilon(1e-9));
  CHECK(a.time.compute < b.time.compute);  // the fused epilogue moves 8 bytes per element, the kernel 10
  CHECK(b.step_seconds > a.step_seconds);
  CHECK(describe(unfused).find("unfused-grad-accumulation") != std::string::npos);
  CHECK(describe(fused).find("unfused") == std::string::npos);
}

TEST_CASE("the cross-entropy as Megatron's fp32 operations moves 32 - delta more bytes per logit forward, 8 backward",
          "[cost][step]") {
  // One stage (pp 1) holds the head: each micro-batch's logits pass through the unfused operations.
  StepConfig unfused = eight_layer_step(TpMode::d1, 2);
  StepConfig fused = unfused;
  fused.cross_entropy_fusion = true;
  REQUIRE_FALSE(unfused.cross_entropy_fusion);  // Megatron's default: --cross-entropy-loss-fusion is off
  const LayerCosts costs = costs_of(fused);
  // The logits of one micro-batch on a rank: its rows by its share of the vocabulary (1D: tp 8).
  const double rows = static_cast<double>(fused.micro_batch() * fused.spec.model.seq);
  const double vocab_local = std::ceil(static_cast<double>(fused.spec.model.vocab) / 8.0);
  REQUIRE(costs.head_logits == rows * vocab_local);
  const StepEstimate a = estimate_step(fused, costs, dgx_a100()), b = estimate_step(unfused, costs, dgx_a100());
  const double m = static_cast<double>(fused.microbatches()), delta = 2.0;  // bf16 logits
  const double rate = dgx_a100().hbm_bandwidth * dgx_a100().memory_efficiency;
  const double per_micro_batch = (32.0 - delta) * costs.head_logits / rate + 8.0 * costs.head_logits / rate +
                                 6 * dgx_a100().kernel_overhead;  // five more kernels forward, one backward
  CHECK(b.time.compute - a.time.compute == Approx(m * per_micro_batch).epsilon(1e-9));
  CHECK(describe(fused).find("fused-cross-entropy") != std::string::npos);
  CHECK(describe(unfused).find("cross-entropy") == std::string::npos);
}

TEST_CASE("--optimizer sgd keeps only master weights: 4 bytes per parameter under bf16, none in f32",
          "[cost][step][zero]") {
  // ZeRO-1 over dp 4 with bf16 values: AdamW's shard holds moments and masters (12 B per parameter),
  // mdtp's SGD the masters only (4 B) — in the memory and in the update's bytes.
  StepConfig adamw = eight_layer_step(TpMode::d1, 4);
  adamw.spec.zero.stage = 1;
  adamw.grad_nan_check = false;
  StepConfig sgd = adamw;
  sgd.spec.optimizer.kind = OptimizerKind::sgd;
  CHECK(adamw.optimizer_bytes_per_param() == 12.0);
  CHECK(sgd.optimizer_bytes_per_param() == 4.0);
  const LayerCosts costs = costs_of(adamw);
  const Cluster& cluster = dgx_a100();
  const StepEstimate a = estimate_step(adamw, costs, cluster), s = estimate_step(sgd, costs, cluster);
  const double shard = a.memory.parameter_elements / 4, stream = cluster.hbm_bandwidth * cluster.memory_efficiency;
  CHECK(a.memory.optimizer == Approx(shard * 12.0));
  CHECK(s.memory.optimizer == Approx(shard * 4.0));
  // The update streams 2g + 2K + delta per shard parameter: 2 x 8 bytes fewer without the moments.
  CHECK(a.time.optimizer - s.time.optimizer == Approx(shard * 16.0 / stream));
  CHECK(a.time.compute == s.time.compute);
  CHECK(describe(sgd).find(" sgd") != std::string::npos);
  CHECK(describe(adamw).find("sgd") == std::string::npos);
  // f32 values: no masters, so SGD keeps nothing; AdamW its two f32 moments.
  StepConfig sgd32 = sgd;
  sgd32.spec.precision = precision_for(DType::f32);
  CHECK(sgd32.optimizer_bytes_per_param() == 0.0);
  sgd32.spec.optimizer.kind = OptimizerKind::adamw;
  CHECK(sgd32.optimizer_bytes_per_param() == 8.0);
}

TEST_CASE("Megatron's gradient buffer once per step: zeroed, scaled by 1/dp and its norm checked for a NaN",
          "[cost][step][zero]") {
  // ZeRO-1 (the distributed optimizer) over dp 4, f32 gradients of bf16 parameters: the update
  // touches a quarter of them; Megatron's DDP touches the whole buffer three times more.
  StepConfig checked = eight_layer_step(TpMode::d1, 4);
  checked.spec.zero.stage = 1;
  REQUIRE(checked.grad_nan_check);  // Megatron-core's default: --check-for-nan-in-loss-and-grad
  StepConfig unchecked = checked;
  unchecked.grad_nan_check = false;
  const LayerCosts costs = costs_of(checked);
  const Cluster& cluster = dgx_a100();
  const StepEstimate a = estimate_step(checked, costs, cluster), b = estimate_step(unchecked, costs, cluster);
  const double params = a.memory.parameter_elements, g = 4.0, delta = 2.0, K = 12.0;
  const double buffer = params * g, stream = cluster.hbm_bandwidth * cluster.memory_efficiency;
  // Megatron's bucket: 4e7 elements at dp 4 (max(4e7, 1e6 dp)); one zero_() for the whole buffer.
  const double buckets = std::ceil(params / 4e7);
  REQUIRE(buckets >= 2);
  const double update = (params / 4) * (2 * g + 2 * K + delta) / stream + cluster.kernel_overhead;
  const double zero = buffer / stream + cluster.kernel_overhead;
  CHECK(b.time.optimizer == Approx(update + zero + 2 * buffer / stream + buckets * cluster.kernel_overhead));
  CHECK(a.time.optimizer == Approx(update + zero + 3 * buffer / stream + 2 * buckets * cluster.kernel_overhead));
  CHECK(a.time.compute == b.time.compute);
  CHECK(a.time.dp_comm == b.time.dp_comm);
  CHECK(describe(unchecked).find("no-grad-nan-check") != std::string::npos);
  CHECK(describe(checked).find("nan") == std::string::npos);

  // One replica: nothing to average (gradient_scaling_factor 1), the zeroing and the norm stay.
  StepConfig single = checked;
  single.spec.layout.dp = 1;
  single.spec.global_batch = 16;
  single.set_micro_batch(1);
  const StepEstimate s = estimate_step(single, costs, cluster);
  const double one_bucket = std::ceil(params / 4e7);
  CHECK(s.time.optimizer == Approx(params * (2 * g + 2 * K + delta) / stream + cluster.kernel_overhead + zero +
                                   buffer / stream + one_bucket * cluster.kernel_overhead));

  // Without the overlap the buffer is one bucket; ZeRO-2/3 (DeepSpeed's) and mdtp's own engine
  // keep no such buffer here: only the update is priced.
  StepConfig whole = checked;
  whole.overlap.dp_gradients = false;
  CHECK(estimate_step(whole, costs, cluster).time.optimizer ==
        Approx(update + zero + 3 * buffer / stream + 2 * cluster.kernel_overhead));
  StepConfig zero2 = checked;
  zero2.spec.zero.stage = 2;
  CHECK(estimate_step(zero2, costs, cluster).time.optimizer == Approx(update));
}

TEST_CASE("a PCIe cluster: tensor parallelism pays the PCIe-to-NVSwitch bandwidth ratio", "[cost][step][cluster]") {
  StepConfig c = eight_layer_step(TpMode::d1, 1);
  c.overlap.tp_backward = false;  // every TP collective on the critical path: the links' ratio shows whole
  const Cluster nvswitch = load_cluster(find_cluster("dgx-a100")), pcie = load_cluster(find_cluster("pcie-a100"));
  const StepEstimate a = estimate_step(c, nvswitch), b = estimate_step(c, pcie);
  // The same GPU die at a lower power limit: GEMMs at the PCIe card's microbenchmark rate (68.2 %
  // of peak against 73.15 %: each burst figure at its own reference shape, scaled by the same
  // sustained-to-burst ratio), the streaming kernels slower by the
  // HBM ratio (2,039 against 1,935 GB/s); together no more than the larger of the two.  The TP
  // all-reduces of a large activation are bandwidth bound:
  // their time scales as 1/(bandwidth x efficiency), 300e9 x 0.8 against 32e9 x 0.7, 10.7x, less
  // what the latencies (3 against 8 us) add to both.
  CHECK(b.time.compute >= a.time.compute);
  const double gemm_ratio = gemm_mainloop_rate(DType::f32, nvswitch) / gemm_mainloop_rate(DType::f32, pcie);
  CHECK(b.time.compute <= a.time.compute * std::max(2.039 / 1.935, gemm_ratio) * (1 + 1e-12));
  const double ratio = b.time.tp_comm / a.time.tp_comm;
  CHECK(ratio > 8.0);
  CHECK(ratio < (300e9 * 0.8) / (32e9 * 0.7) * 1.05);
}

TEST_CASE("the step: a ZeRO-3 prefetch hides under the one pass it starts in, not under the micro-batch",
          "[cost][step][zero]") {
  // The engine prefetches the next unit pass's buckets while a pass runs (zero/zero_engine.cpp):
  // what is left when the pass ends, the next one waits for.  Without a pipeline nothing else
  // hides it, so the step's gather time is, pass by pass, what each waits for at its acquire plus
  // what its predecessor's prefetch outlasted it by.  Over 16 data-parallel ranks through one NIC
  // per node a block's gather outlasts its forward pass, though not its backward pass: summed over
  // the micro-batch (the rule before this one) the gathers hid; they do not.
  StepConfig c = zero_step_config(3, 4, DType::f32);
  c.spec.model.vocab = 1024;  // a small table: the blocks' gathers are the ones in question
  c.spec.layout.tp = 1;
  c.spec.layout.dp = 16;
  c.spec.global_batch = 4 * 2 * c.spec.layout.dp;
  Cluster one_nic = dgx_a100();
  one_nic.nics_per_node = 1;
  one_nic.inter_node.bandwidth = 20e9;  // one NIC a little slower than HDR's 25 GB/s
  const LayerCosts costs = costs_of(c);
  const Placement placement = place(c, one_nic);
  const Zero3Timeline timeline = zero3_gather_timeline(c, placement, one_nic);
  REQUIRE(timeline.passes.size() == 1);
  const std::vector<Zero3Pass>& passes = timeline.passes.front();
  const int head = static_cast<int>(c.spec.model.layers) + 1;
  auto pass_seconds = [&](const Zero3Pass& p) {
    const UnitCosts& u = p.unit == 0 ? costs.embedding : p.unit == head ? costs.head : costs.block;
    return p.direction > 0 ? u.forward.seconds() : u.backward_input.seconds() + u.backward_weight.seconds();
  };
  double expected = 0.0, gathers = 0.0, compute = 0.0;
  for (std::size_t i = 0; i < passes.size(); ++i) {
    expected += passes[i].waited;
    if (i > 0) expected += std::max(0.0, passes[i - 1].ahead - pass_seconds(passes[i - 1]));
    gathers += passes[i].waited + passes[i].ahead;
    compute += pass_seconds(passes[i]);
  }
  // The first pass waits for its own gathers: nothing started them earlier.
  CHECK(passes.front().waited > 0.0);
  CHECK(gathers == Approx(zero3_gather_seconds(c, placement, one_nic)));
  // Some block's forward pass is shorter than the gather it prefetches, every block's backward pass longer, and all
  // the gathers shorter than all the compute: the micro-batch's sum would have hidden everything
  // but the first gather; pass by pass, more waits.
  bool forward_outlasted = false, backward_outlasted = false;
  for (std::size_t i = 0; i + 1 < passes.size(); ++i) {
    if (passes[i].unit == 0 || passes[i].unit == head || passes[i + 1].unit == head) continue;  // blocks only
    const bool outlasted = passes[i].ahead > pass_seconds(passes[i]);
    (passes[i].direction > 0 ? forward_outlasted : backward_outlasted) |= outlasted;
  }
  CHECK(forward_outlasted);
  CHECK_FALSE(backward_outlasted);
  REQUIRE(gathers < compute);
  CHECK(expected > passes.front().waited);
  // The step's data-parallel time: these waits, plus the gradients' reduce-scatter once per step
  // (under the last backward: at most all of it).
  const StepEstimate e = estimate_step(c, costs, placement, one_nic);
  const double params = stage_parameters(c, costs, 0);
  const double reduction =
      predict_on_link(CollectiveOp::reduce_scatter, 16, static_cast<std::int64_t>(params), c.grad_dtype(), placement.dp,
                      cluster_time_model(one_nic))
          .seconds;
  CHECK(e.time.dp_comm >= expected);
  CHECK(e.time.dp_comm <= expected + reduction * 1.0001);
}

TEST_CASE("--engine-kernels prices each kernel the engine launches: its bytes through HBM and one kernel's overhead",
          "[cost][step]") {
  StepConfig fused = eight_layer_step(TpMode::d1, 2);
  StepConfig engine = fused;
  engine.engine_kernels = true;
  const LayerCosts a = costs_of(fused);
  const LayerCosts b = costs_of(engine);
  const double rate = dgx_a100().hbm_bandwidth * dgx_a100().memory_efficiency, overhead = dgx_a100().kernel_overhead;
  // The engine's list (engine_kernels.hpp): per norm three kernels forward and two backward, a bias
  // add per Linear (four: c_attn, c_proj, fc1, fc2), GeLU, two residual adds and the attention core.
  const auto count = [](const std::vector<KernelCall>& list, const std::string& kind) {
    return std::count_if(list.begin(), list.end(), [&](const KernelCall& k) { return k.kind == kind; });
  };
  const UnitKernels& k = b.block_kernels;
  CHECK(k.forward.size() == 2 * 3 + 4 + 1 + 2 + 1);
  CHECK(k.backward_input.size() == 2 * 2 + 1 + 2 + 1);
  CHECK(k.backward_weight.size() == 4);
  CHECK(count(k.forward, "add_row_vector") == 4);
  CHECK(count(k.backward_weight, "column_sums") == 4);
  // Priced one by one, the attention core with its products; the GEMMs and the core the same both ways.
  const auto priced = [&](const std::vector<KernelCall>& list) {
    double s = 0;
    for (const KernelCall& call : list)
      if (call.kind.rfind("attention_", 0) != 0) s += call.bytes / rate + overhead;
    return s;
  };
  CHECK(b.block.forward.stream_seconds - a.block.attention_core.stream_seconds ==
        Approx(priced(k.forward)).epsilon(1e-12));
  CHECK(b.block.backward_weight.stream_seconds == Approx(priced(k.backward_weight)).epsilon(1e-12));
  CHECK(b.block.forward.gemm_seconds == a.block.forward.gemm_seconds);
  CHECK(b.head.forward.stream_seconds == Approx(priced(b.head_kernels.forward)).epsilon(1e-12));
  CHECK(b.embedding.backward_weight.stream_seconds == Approx(priced(b.embedding_kernels.backward_weight)).epsilon(1e-12));
  // More kernels, unfused: the engine's passes take longer than Megatron's fused ones.
  CHECK(b.block.forward.stream_seconds > a.block.forward.stream_seconds);
  const StepEstimate fe = estimate_step(fused, a, dgx_a100()), ee = estimate_step(engine, b, dgx_a100());
  CHECK(ee.time.compute > fe.time.compute);
  CHECK(describe(engine).find("engine-kernels") != std::string::npos);
  CHECK(describe(fused).find("engine-kernels") == std::string::npos);
}

// A job of one GPU waits for no other: its tensor cores keep the microbenchmark's alone rate. A job
// of two or more runs at the pace of the slowest GPU it synchronises with (Cluster::synchronous_pace).
TEST_CASE("the synchronous pace: a one-GPU step at the alone rate, a larger one at the slowest GPU's",
          "[cost][step]") {
  Cluster alone = dgx_a100();
  alone.synchronous_pace = 1.0;
  alone.rate_sigma = 0.0;  // every job of two or more at synchronous_pace (the job size: the next case)
  Cluster paced = alone;
  paced.synchronous_pace = 0.9;
  CHECK(for_job(paced, 1).synchronous_pace == 1.0);
  CHECK(for_job(paced, 2).synchronous_pace == 0.9);
  StepConfig one = eight_layer_step(TpMode::none, 1);
  one.spec.layout.tp = 1;
  REQUIRE(one.gpus() == 1);
  CHECK(estimate_step(one, paced).step_seconds == estimate_step(one, alone).step_seconds);
  const StepConfig eight = eight_layer_step(TpMode::d1, 1);
  const StepEstimate slow = estimate_step(eight, paced), fast = estimate_step(eight, alone);
  CHECK(slow.step_seconds > fast.step_seconds);
  // Only the tensor-core work slows: the streaming kernels take what they took.
  CHECK(slow.compute.stream_seconds == Approx(fast.compute.stream_seconds).epsilon(1e-12));
  CHECK(slow.compute.gemm_seconds > 1.05 * fast.compute.gemm_seconds);
  CHECK(slow.compute.gemm_seconds < fast.compute.gemm_seconds / 0.9 + 1e-12);
}

// The slowest of n GPUs whose rates are normal with relative spread σ runs at 1 − σ·E_n of their
// mean, E_n the expected maximum of n standard normal draws (straggler_pace.hpp).
TEST_CASE("the straggler's pace: a job waits for the slowest of its GPUs, slower the more it has",
          "[cost][step]") {
  // E_n in closed form where it has one (n = 2, 3), and tabulated values beyond (Harter 1961:
  // 1.42360 for 8, 3.24144 for 1000).
  CHECK(expected_normal_maximum(1) == 0.0);
  CHECK(expected_normal_maximum(2) == Approx(1.0 / std::sqrt(std::numbers::pi)).epsilon(1e-9));
  CHECK(expected_normal_maximum(3) == Approx(1.5 / std::sqrt(std::numbers::pi)).epsilon(1e-9));
  CHECK(expected_normal_maximum(8) == Approx(1.42360).epsilon(1e-5));
  CHECK(expected_normal_maximum(1000) == Approx(3.24144).epsilon(1e-5));
  // The presets' σ from the measured node: its expected spread 2·σ·E_8 is the 4.5 % measured.
  const Cluster a100 = dgx_a100();
  CHECK(2 * a100.rate_sigma * expected_normal_maximum(8) == Approx(0.045).epsilon(0.002));
  // A node's worth of GPUs at the file's synchronous_pace; fewer faster, more slower, one alone.
  REQUIRE(a100.gpus_per_node == 8);
  CHECK(for_job(a100, 8).synchronous_pace == Approx(a100.synchronous_pace).epsilon(1e-12));
  CHECK(for_job(a100, 1).synchronous_pace == 1.0);
  double previous = 1.0;
  for (int gpus : {2, 4, 8, 64, 512, 4096}) {
    const double pace = for_job(a100, gpus).synchronous_pace;
    INFO(gpus << " GPUs: pace " << pace);
    CHECK(pace < previous);
    const double expected = a100.synchronous_pace * (1 - a100.rate_sigma * expected_normal_maximum(gpus)) /
                            (1 - a100.rate_sigma * expected_normal_maximum(8));
    CHECK(pace == Approx(expected).epsilon(1e-12));
    previous = pace;
  }
  CHECK(for_job(a100, 4096).synchronous_pace == Approx(0.937).epsilon(0.001));
  // The step slows with the job, its tensor-core work by the pace's ratio.
  StepConfig small = eight_layer_step(TpMode::d1, 1), large = small;
  large.spec.layout.dp = 64;
  large.spec.global_batch *= 64;
  const StepEstimate a = estimate_step(small, a100), b = estimate_step(large, a100);
  CHECK(b.compute.gemm_seconds > a.compute.gemm_seconds);
  CHECK(b.compute.stream_seconds == Approx(a.compute.stream_seconds).epsilon(1e-12));
  CHECK_THROWS_WITH(slowest_gpu_pace(0.97, 0.5, 8, 1000), Catch::Contains("positive rate"));
}

// Between pipeline stages, 1D without sequence parallelism: Megatron-LM (until 2023) and mdtp's
// engine send 1/t of the activation from each TP rank and all-gather it on the next stage;
// Megatron-core (and --no-scatter-gather-tensors-in-pipeline) sends all of it from every rank.
TEST_CASE("pipeline sends: the scatter/gather, or the whole activation from every TP rank", "[cost][step]") {
  StepConfig c = eight_layer_step(TpMode::d1, 1);
  c.spec.layout.pp = 2;
  c.spec.layout.schedule = ScheduleKind::one_f_one_b;
  c.set_micro_batch(1);
  const StepEstimate scattered = estimate_step(c, dgx_a100());
  StepConfig whole_config = c;
  whole_config.p2p_scatter_gather = false;
  const StepEstimate whole = estimate_step(whole_config, dgx_a100());
  // Each of the 64 micro-batches sends and receives its [s, h] activation forward and its gradient
  // backward (4 transfers), 2048 x 4096 x 2 bytes each, over tp = 8 or whole: 7/8 of it more.
  // (The tied embedding's all-reduce between the first and last stage, also pipeline bytes, stays.)
  const double activation = 2048.0 * 4096 * 2;
  CHECK(whole.traffic.pp_bytes - scattered.traffic.pp_bytes == Approx(64 * 4 * activation * 7 / 8).epsilon(1e-12));
  CHECK(whole.time.pp_comm > scattered.time.pp_comm);
  CHECK(whole.time.compute == scattered.time.compute);
  CHECK(describe(whole_config).find("whole-p2p-sends") != std::string::npos);
  // Under sequence parallelism each rank's activation is its shard already: nothing changes.
  c.spec.layout.mode = whole_config.spec.layout.mode = TpMode::d1_sp;
  CHECK(estimate_step(whole_config, dgx_a100()).step_seconds == estimate_step(c, dgx_a100()).step_seconds);
  CHECK(describe(whole_config).find("whole-p2p-sends") == std::string::npos);
}
