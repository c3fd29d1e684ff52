// The planner (every returned configuration valid, fitting and ranked; one that does not fit is
// left out), the validation against the shipped tables of measured runs, and table files.
#include <catch2/catch.hpp>
#include <set>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "core/error.hpp"
#include "cost/kernel_time.hpp"
#include "cost/measured_tables.hpp"
#include "cost/model_flops.hpp"
#include "cost/planner.hpp"
#include "cost/step_report.hpp"
#include "dgx_a100.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using mdtp::testing::dgx_a100;

namespace {

PlanRequest small_request() {
  PlanRequest r;
  r.base.spec.model = ModelShape{8, 1024, 16, 512, 8192};
  r.base.spec.global_batch = 32;
  r.base.spec.precision = precision_for(DType::bf16);  // the step model's usual case: bf16 with dropout
  r.base.spec.dropout = 0.1;
  r.gpus = 16;
  return r;
}

}  // namespace

TEST_CASE("the planner returns only valid configurations that fit, quickest first", "[cost][planner]") {
  const PlanRequest r = small_request();
  const PlanResult result = plan(r, dgx_a100());
  REQUIRE(!result.ranked.empty());
  CHECK(result.considered == static_cast<std::int64_t>(result.ranked.size()) + result.too_big);
  bool saw_2d = false, saw_3d = false, saw_pipeline = false, saw_zero3 = false, saw_per_micro_batch = false;
  bool saw_zero2_pipeline = false, saw_zero3_pipeline = false;
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const StepEstimate& e = result.ranked[i];
    INFO(describe(e.config));
    CHECK_NOTHROW(validate(e.config));
    CHECK(e.config.gpus() == r.gpus);
    CHECK(e.fits);
    CHECK(e.memory.total() <= dgx_a100().hbm_bytes);
    CHECK(e.config.microbatches() * e.config.micro_batch() * e.config.spec.layout.dp == r.base.spec.global_batch);
    if (i > 0) CHECK(result.ranked[i - 1].step_seconds <= e.step_seconds);
    saw_2d |= e.config.spec.layout.mode == TpMode::d2;
    saw_3d |= e.config.spec.layout.mode == TpMode::d3;
    saw_pipeline |= e.config.spec.layout.pp > 1;
    saw_zero3 |= e.config.spec.zero.stage == 3;
    saw_per_micro_batch |= e.config.spec.zero.reduce_per_micro_batch;
    // ZeRO-2/3 under a pipeline, as the engine runs them; never keep-params (ZeRO-2's memory and more).
    saw_zero2_pipeline |= e.config.spec.zero.stage == 2 && e.config.spec.layout.pp > 1;
    saw_zero3_pipeline |= e.config.spec.zero.stage == 3 && e.config.spec.layout.pp > 1;
    CHECK_FALSE(e.config.spec.zero.keep_parameters);
    // ZeRO-2 reducing once with several micro-batches is stage 1's traffic with more memory: not
    // listed; reducing per micro-batch only where there are several.
    if (e.config.spec.zero.stage == 2 && e.config.microbatches() > 1) CHECK(e.config.spec.zero.reduce_per_micro_batch);
    if (e.config.spec.zero.reduce_per_micro_batch) CHECK((e.config.spec.zero.stage >= 2 && e.config.microbatches() > 1));
  }
  CHECK(saw_2d);
  CHECK(saw_3d);
  CHECK(saw_pipeline);
  CHECK(saw_zero3);
  CHECK(saw_per_micro_batch);
  CHECK(saw_zero2_pipeline);
  CHECK(saw_zero3_pipeline);
}

TEST_CASE("the planner prices every configuration from the asked StepConfig, its switches kept", "[cost][planner]") {
  PlanRequest r = small_request();
  r.modes = {TpMode::d1};
  r.base.engine_kernels = true;
  r.base.grad_nan_check = false;
  r.base.cross_entropy_fusion = true;
  r.base.gradient_accumulation_fusion = false;
  r.base.overlap.tp_backward = false;
  r.base.spec.precision.grad_reduce = DType::bf16;
  const PlanResult result = plan(r, dgx_a100());
  REQUIRE(!result.ranked.empty());
  for (const StepEstimate& e : result.ranked) {
    INFO(describe(e.config));
    CHECK(e.config.engine_kernels);
    CHECK_FALSE(e.config.grad_nan_check);
    CHECK(e.config.cross_entropy_fusion);
    CHECK_FALSE(e.config.gradient_accumulation_fusion);
    CHECK_FALSE(e.config.overlap.tp_backward);
    CHECK(e.config.grad_dtype() == DType::bf16);
    // Priced as `mdtp cost` prices the same configuration: the planner's shared layer costs and
    // placements are the configuration's own.
    CHECK(e.step_seconds == Approx(estimate_step(e.config, dgx_a100()).step_seconds).epsilon(1e-12));
  }
  // The switches move the ranking's times: the same search with StepConfig's defaults differs.
  PlanRequest plain = small_request();
  plain.modes = {TpMode::d1};
  const PlanResult defaults = plan(plain, dgx_a100());
  CHECK(defaults.ranked.front().step_seconds != result.ranked.front().step_seconds);
}

TEST_CASE("the interleaved schedule's micro-batch group N: held micro-batches grow with it, cost and plan alike",
          "[cost][planner]") {
  // 8 blocks on pp 2 with v 2, m 8 micro-batches: Megatron-Core's warm-up on stage 0 runs
  // 2(p - 1) + (v - 1)N forwards before its first backward, so N = 4 and 8 hold more than N = p.
  PlanRequest r = small_request();
  r.modes = {TpMode::d1};
  r.fixed.tp = 2;
  r.fixed.pp = 2;
  r.fixed.micro_batch_size = 1;
  r.fixed.chunks = 2;
  r.fixed.schedule = ScheduleKind::interleaved;
  r.zero_stages = {1};
  r.recomputes = {Recompute::none};
  double previous = 0.0;
  for (int n : {0, 4, 8}) {
    if (n > 0) r.fixed.group_size = n;
    const PlanResult result = plan(r, dgx_a100());
    if (n > 0) {  // N alone fixes the schedule: only the interleaved one is searched
      PlanRequest any_schedule = r;
      any_schedule.fixed.schedule.reset();
      CHECK(plan(any_schedule, dgx_a100()).ranked.size() == 1);
    }
    REQUIRE(result.ranked.size() == 1);
    const StepEstimate& e = result.ranked.front();
    INFO(describe(e.config));
    CHECK(e.config.spec.layout.schedule == ScheduleKind::interleaved);
    CHECK(e.config.spec.layout.group_size == n);
    CHECK((describe(e.config).find(" N=") != std::string::npos) == (n > 0));
    CHECK(e.memory.in_flight == peak_in_flight(e.config.pipeline()).front());
    CHECK(e.memory.activations == Approx(estimate_step(e.config, dgx_a100()).memory.activations).epsilon(1e-12));
    CHECK(e.memory.activations > previous);
    previous = e.memory.activations;
  }
}

TEST_CASE("ZeRO offload asked for: the planner ranks only offloaded stages 1-3, each as the step model prices it",
          "[cost][planner][offload]") {
  PlanRequest r = small_request();
  r.base.spec.zero.offload = true;
  const PlanResult result = plan(r, dgx_a100());
  REQUIRE(!result.ranked.empty());
  std::set<int> stages;
  for (const StepEstimate& e : result.ranked) {
    INFO(describe(e.config));
    CHECK(e.config.spec.zero.offload);
    CHECK(e.config.spec.zero.stage >= 1);
    CHECK(e.memory.optimizer == 0.0);
    CHECK(e.memory.host > 0.0);
    stages.insert(e.config.spec.zero.stage);
    const StepEstimate again = estimate_step(e.config, dgx_a100());
    CHECK(again.step_seconds == Approx(e.step_seconds).epsilon(1e-12));
  }
  CHECK(stages == std::set<int>{1, 2, 3});
  // One GPU: nothing to shard, but the host update is still what was asked (stage 1 stands for all).
  r.gpus = 1;
  r.base.spec.global_batch = 4;
  const PlanResult one = plan(r, dgx_a100());
  REQUIRE(!one.ranked.empty());
  for (const StepEstimate& e : one.ranked) CHECK((e.config.spec.zero.stage == 1 && e.config.spec.zero.offload));
  // A cluster that does not describe its host is refused before the search, in one line.
  Cluster no_host = dgx_a100();
  no_host.host.reset();
  CHECK_THROWS_WITH(plan(r, no_host), Catch::Contains("gives no host"));
  r.base.engine_kernels = true;
  CHECK_THROWS_WITH(plan(r, dgx_a100()), Catch::Contains("zero.offload with --engine-kernels"));
}

TEST_CASE("a configuration that does not fit in memory is left out", "[cost][planner]") {
  Cluster small = dgx_a100();
  PlanRequest r = small_request();
  // Without recomputation, pure data parallelism holds the whole model and every activation.
  StepConfig c = r.base;
  c.spec.layout.dp = 16;
  c.set_micro_batch(2);
  const StepEstimate big = estimate_step(c, small);
  // A GPU just too small for it (the rest of the machine unchanged).
  small.hbm_bytes = big.memory.total() - 1;
  REQUIRE_FALSE(estimate_step(c, small).fits);
  const PlanResult result = plan(r, small);
  CHECK(result.too_big > 0);
  for (const auto& e : result.ranked) {
    CHECK(e.memory.total() <= small.hbm_bytes);
    const RunSpec& s = e.config.spec;
    const bool same = s.layout.mode == c.spec.layout.mode && s.layout.tp == 1 && s.layout.pp == 1 &&
                      e.config.micro_batch() == 2 && s.zero.stage == 0 && s.recompute == Recompute::none;
    CHECK_FALSE(same);
  }
}

// Nothing in the model is fitted to this table (the GEMM rate is a microbenchmark's at the settled
// clock, the rest data sheets): the test holds it to the prediction goal for runs the model never
// saw — mean |error| within 10 %, every row within 25 % — and, beyond the goal (its rows are ten
// different models, not configurations of one), to the order across them: Spearman ≥ 0.8, every pair
// measured more than 10 % apart predicted in that order, and the trend.
TEST_CASE("Narayanan et al. 2021 with nothing fitted: mean within 10 %, worst within 25 %, the measured order kept, the trend right",
          "[cost][planner][validation]") {
  const MeasuredTable narayanan = measured_table("narayanan-2021");
  const Validation v = validate(narayanan, dgx_a100());
  REQUIRE(v.rows.size() == 10);
  for (const auto& r : v.rows) {
    INFO(r.row.billions << "B: measured " << r.row.tflops_per_gpu << ", predicted " << r.predicted);
    CHECK(std::abs(r.error) <= 0.25);
  }
  CHECK(v.mean_abs_error <= 0.10);
  CHECK(v.across.spearman >= 0.8);
  CHECK(v.across.distinct_pairs > 10);
  CHECK(v.across.distinct_pairs_ordered == v.across.distinct_pairs);
  CHECK(v.models.size() == 10);  // every row a different model
  CHECK_FALSE(order_held(v));
  CHECK(goal_misses(v).empty());
  // The trend: the three largest models (310B-1T: the largest GEMMs, the smallest share of
  // tensor-parallel all-reduces) above every smaller one, as measured (155-163 against 135-148).
  for (const auto& big : v.rows)
    for (const auto& small : v.rows)
      if (big.row.billions >= 310 && small.row.billions < 310) {
        INFO(big.row.billions << "B predicted " << big.predicted << ", " << small.row.billions << "B "
                              << small.predicted);
        CHECK(big.predicted > small.predicted);
      }
  // Each run as the paper's launch script set it (run_table_1.sh: the rows' setups), the rest by the
  // rule: weight gradients accumulated by their own kernel (Megatron-LM of 2021).
  const std::vector<MeasuredRun>& rows = narayanan.rows;
  CHECK(narayanan.config(rows[0]).micro_batch() == 16);
  CHECK(narayanan.config(rows[0]).overlap.dp_gradients);  // PyTorch's DDP: the all-reduce under the backward
  CHECK(narayanan.config(rows[3]).micro_batch() == 8);
  CHECK(narayanan.config(rows[4]).spec.layout.schedule == ScheduleKind::one_f_one_b);  // 39.1B: not interleaved
  CHECK_FALSE(narayanan.config(rows[4]).overlap.dp_gradients);                         // Megatron's local DDP
  CHECK(narayanan.config(rows[5]).spec.layout.chunks == 3);  // 15 layers per stage, 5 per virtual stage
  CHECK(narayanan.config(rows[8]).spec.layout.chunks == 3);  // 105 layers on 35 stages, one per virtual stage
  CHECK(narayanan.config(rows[8]).micro_batch() == 1);
  CHECK(narayanan.config(rows[9]).spec.layout.schedule == ScheduleKind::one_f_one_b);  // 1T: not interleaved
  CHECK(narayanan.config(rows[0]).spec.layout.pp == 1);
  CHECK(narayanan.config(rows[3]).spec.layout.mode == TpMode::d1);  // no sequence parallelism in 2021
  CHECK(narayanan.config(rows[0]).spec.recompute == Recompute::full);
  CHECK(narayanan.config(rows[0]).dtype() == DType::f16);
  CHECK_FALSE(narayanan.config(rows[0]).gradient_accumulation_fusion);
  CHECK(narayanan.setup_source.find("run_table_1.sh") != std::string::npos);
}

// The same goal on the sequence-parallel A100 rows (four models of one to 64 pipeline stages, no data
// parallelism), and their pairs kept in order across the models.
TEST_CASE("Korthikanti et al. 2022 with nothing fitted: mean within 10 %, worst within 25 %, the pairs in order",
          "[cost][planner][validation]") {
  const Validation v = validate(measured_table("korthikanti-2022"), dgx_a100());
  REQUIRE(v.rows.size() == 4);
  for (const auto& r : v.rows) {
    INFO(r.row.billions << "B: measured " << r.row.tflops_per_gpu << ", predicted " << r.predicted);
    CHECK(std::abs(r.error) <= 0.25);
  }
  CHECK(v.mean_abs_error <= 0.10);
  CHECK(v.across.distinct_pairs_ordered == v.across.distinct_pairs);
  CHECK(goal_misses(v).empty());
}

// The H100 table, with the overlaps as Megatron runs them (collective_sms.hpp, chunked_overlap.hpp,
// the overlapped pipeline sends' latency on the schedule's critical path: pipeline_bubble.hpp):
// every row within 25 %, the mean within its bound of 10 % by 0.1 point (docs/performance-model.md,
// "The H100 table"). The model's compute is 12-19 % fast on every row whose step is nearly all
// compute (1.7B, 7.1B, 119B, 462B; the strong scaling's 96 GPUs); the data-parallel time of the 32B
// row and of the interleaved ones partly offsets it. Its rows are nine models, so the order
// condition does not apply, and their order across the table is reported, not held.
TEST_CASE("the Megatron-LM H100 table with nothing fitted: worst within 25 %, mean within 10 %",
          "[cost][planner][validation]") {
  const Validation v = validate(measured_table("megatron-h100"), load_cluster(find_cluster("dgx-h100")));
  REQUIRE(v.rows.size() == 9);
  for (const auto& r : v.rows) {
    INFO(r.row.billions << "B: measured " << r.row.tflops_per_gpu << ", predicted " << r.predicted);
    CHECK(std::abs(r.error) <= 0.25);
  }
  CHECK(v.mean_abs_error <= 0.10);
  CHECK(v.models.size() == 9);
  CHECK_FALSE(order_held(v));
  CHECK(goal_misses(v).empty());
  CHECK(v.across.runs == 9);
  CHECK(v.across.distinct_pairs > 0);
}

// The README's strong scaling of one model (177B, batch 1,152) from 96 to 4,608 H100s, read off its
// figure: eight configurations of one model, so the goal's order condition applies, and it is held
// (Spearman 1.0, the 3 pairs measured more than 10 % apart in order). The errors are not: at 96 GPUs,
// all compute, the model is 20 % fast, and its loss with scale (the bubble of the assumed v = 2 above
// all) is steeper than measured; the mean, 12.5 %, is the table's one miss (docs/performance-model.md).
TEST_CASE("the Megatron-LM H100 strong scaling: one model's eight configurations kept in order, worst within 25 %",
          "[cost][planner][validation]") {
  const Validation v = validate(measured_table("megatron-h100-strong"), load_cluster(find_cluster("dgx-h100")));
  REQUIRE(v.rows.size() == 8);
  for (const auto& r : v.rows) {
    INFO(r.row.gpus << " GPUs: measured " << r.row.tflops_per_gpu << ", predicted " << r.predicted);
    CHECK(std::abs(r.error) <= 0.25);
  }
  // Measured and predicted both fall with scale, row by row.
  for (std::size_t i = 1; i < v.rows.size(); ++i) {
    CHECK(v.rows[i].row.tflops_per_gpu < v.rows[i - 1].row.tflops_per_gpu);
    CHECK(v.rows[i].predicted < v.rows[i - 1].predicted);
  }
  REQUIRE(v.models.size() == 1);
  CHECK(v.models[0].order.runs == 8);
  CHECK(v.models[0].order.spearman >= 0.8);
  CHECK(v.models[0].order.distinct_pairs == 3);
  CHECK(v.models[0].order.distinct_pairs_ordered == 3);
  CHECK(order_held(v));
  CHECK(v.mean_abs_error <= 0.13);
  CHECK(goal_misses(v) == std::vector<std::string>{"mean |error| 12.5% > 10%"});
}

TEST_CASE("the prediction goal: each miss named with its figure; the order held within a model from five "
          "configurations",
          "[cost][validation]") {
  Validation v;
  v.rows.resize(9);
  v.mean_abs_error = 0.05;
  v.max_error = 0.08;
  v.across = RankOrder{9, -0.5, 10, 2};  // the order across models: reported, never a miss
  v.models.push_back({24, 2048, 16, RankOrder{4, 0.2, 3, 3}});  // four configurations: not held
  v.models.push_back({30, 4096, 32, RankOrder{5, 0.9, 4, 4}});
  CHECK(order_held(v));
  CHECK(goal_misses(v).empty());
  v.models.back().order.spearman = 0.2;
  CHECK(goal_misses(v) == std::vector<std::string>{"l=30 h=4096 a=32: Spearman 0.20 < 0.8"});
  v.mean_abs_error = 0.151;
  v.max_error = 0.30;
  v.models.back().order.distinct_pairs_ordered = 2;
  CHECK(goal_misses(v) == std::vector<std::string>{"mean |error| 15.1% > 10%", "worst |error| 30.0% > 25%",
                                                   "l=30 h=4096 a=32: Spearman 0.20 < 0.8",
                                                   "l=30 h=4096 a=32: 2 of 4 pairs in order"});
  v.models.back().order.runs = 4;  // the same figures over four configurations: only the errors held
  CHECK(goal_misses(v) == std::vector<std::string>{"mean |error| 15.1% > 10%", "worst |error| 30.0% > 25%"});
  CHECK_FALSE(order_held(v));
}

TEST_CASE("pairs measured more than 10 % apart: counted once each, ordered when the prediction agrees",
          "[cost][validation]") {
  // 100 and 120 are apart, 100 and 105 are not, 105 and 120 are (120 > 115.5).
  const PairOrder right = distinct_pair_order({100, 105, 120}, {1, 3, 2});
  CHECK(right.pairs == 2);
  CHECK(right.ordered == 1);  // 120 above 100 predicted so; 120 above 105 predicted below it
  CHECK(distinct_pair_order({100, 120}, {5, 5}).ordered == 0);  // a tie is not an order
  CHECK(distinct_pair_order({100, 110}, {1, 2}).pairs == 0);     // exactly 10 % is not more
  CHECK_THROWS_WITH(distinct_pair_order({1, 2}, {1}), Catch::Contains("2 and 1"));
}

TEST_CASE("Spearman's rank correlation: order, reversal and ties", "[cost][validation]") {
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1.0).epsilon(1e-15));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0).epsilon(1e-15));
  // Ranks of {1, 2, 2, 3} are 1, 2.5, 2.5, 4; against 1..4 Pearson of the ranks is 0.9487 (= 3/√10).
  CHECK(spearman({1, 2, 2, 3}, {1, 2, 3, 4}) == Approx(3.0 / std::sqrt(10.0)).epsilon(1e-12));
  CHECK(spearman({5}, {7}) == 0.0);
}

TEST_CASE("every shipped measured table: its rows as published and its one rule", "[cost][validation]") {
  const std::vector<MeasuredTable>& tables = measured_tables();
  REQUIRE(tables.size() == 4);  // ordered by key
  CHECK(tables[0].key == "korthikanti-2022");
  CHECK(tables[1].key == "megatron-h100");
  CHECK(tables[2].key == "megatron-h100-strong");
  CHECK(tables[3].key == "narayanan-2021");
  CHECK(measured_table("megatron-h100").rows.size() == 9);
  CHECK(measured_table("megatron-h100-strong").rows.size() == 8);
  CHECK(measured_table("korthikanti-2022").rows.size() == 4);
  CHECK_THROWS_WITH(measured_table("mlperf"),
                    Catch::Contains("korthikanti-2022, megatron-h100, megatron-h100-strong, narayanan-2021"));
  // The printed % of peak is the printed TFLOP/s over the data-sheet peak (312 A100, 989 H100),
  // rounded: a check on copying the rows.
  for (const MeasuredTable& t : tables) {
    const double peak = t.cluster == "dgx-h100" ? 989.0 : 312.0;
    for (const MeasuredRun& r : t.rows) {
      INFO(t.key << " " << r.billions << "B");
      CHECK(std::abs(100 * r.tflops_per_gpu / peak - r.percent_of_peak) <= 0.5 + 1e-9);
      CHECK(r.gpus % (r.tp * r.pp) == 0);
    }
  }
  // Every row's parameter count, from the model its rule gives (the shape, the vocabulary, the head
  // tied or not), is the published one to the last digit shown (rounded or cut): a check on the
  // rule's model, which found the Megatron-LM rows untied (tied, 1.7B would be 1.49B).
  for (const MeasuredTable& t : tables)
    for (const MeasuredRun& r : t.rows) {
      const double billions = parameter_count(t.config(r).spec.model) / 1e9;
      const double digit = r.billions == std::floor(r.billions) ? 1.0 : 0.1;
      INFO(t.key << " " << r.billions << "B: the model has " << billions << "B");
      CHECK(std::abs(billions - r.billions) < digit);
    }
  CHECK_FALSE(measured_table("megatron-h100").rule.step.spec.model.tied_head);
  CHECK(measured_table("narayanan-2021").rule.step.spec.model.tied_head);
  CHECK(measured_table("korthikanti-2022").rule.step.spec.model.tied_head);
  // Megatron's H100 rows: dp 48 throughout; sequence parallelism wherever tp > 1; the distributed
  // optimizer (ZeRO-1); no recomputation with a streaming attention kernel; overlaps on.
  const MeasuredTable megatron = measured_table("megatron-h100");
  for (const MeasuredRun& r : megatron.rows) {
    const StepConfig c = megatron.config(r);
    CHECK(c.spec.layout.dp == 48);
    CHECK(c.spec.layout.mode == (r.tp > 1 ? TpMode::d1_sp : TpMode::d1));
    CHECK(c.spec.zero.stage == 1);
    CHECK(c.effective_recompute() == Recompute::none);
    CHECK(c.micro_batch() == 1);
    CHECK((c.overlap.dp_gradients && c.overlap.pp_p2p && c.overlap.tp_comm && c.overlap.param_gather));
    CHECK(c.gradient_accumulation_fusion);
  }
  // The strong scaling's rows: the weak-scaling table's rule and its 177B layout (tp 8, pp 6) at every
  // scale, so dp = GPUs / 48, 24 to 576 micro-batches; its 2,304-GPU point, read off the figure, is
  // within 0.5 % of what the weak-scaling table prints for the same model, batch and GPUs.
  const MeasuredTable strong = measured_table("megatron-h100-strong");
  for (const MeasuredRun& r : strong.rows) {
    const StepConfig c = strong.config(r);
    CHECK(c.spec.layout.dp == r.gpus / 48);
    CHECK(c.spec.layout.mode == TpMode::d1_sp);
    CHECK(c.spec.layout.chunks == 2);
    CHECK(r.batch == 1152);
    CHECK((c.overlap.dp_gradients && c.overlap.pp_p2p && c.overlap.tp_comm && c.overlap.param_gather));
  }
  const auto weak_177b = std::find_if(megatron.rows.begin(), megatron.rows.end(),
                                      [](const MeasuredRun& r) { return r.layers == 96 && r.hidden == 12288; });
  const auto strong_2304 = std::find_if(strong.rows.begin(), strong.rows.end(),
                                        [](const MeasuredRun& r) { return r.gpus == 2304; });
  REQUIRE((weak_177b != megatron.rows.end() && strong_2304 != strong.rows.end()));
  CHECK(weak_177b->gpus == 2304);
  CHECK(std::abs(strong_2304->tflops_per_gpu / weak_177b->tflops_per_gpu - 1) < 0.005);
  // Korthikanti et al.'s rows: data-parallel size one (no gradient reduction at all: the rows hold
  // compute, TP and the pipeline), sequence parallelism with selective recomputation, Megatron-LM of
  // 2022's fused weight-gradient accumulation and asynchronous backward TP collective.
  const MeasuredTable korthikanti = measured_table("korthikanti-2022");
  for (const MeasuredRun& r : korthikanti.rows) {
    const StepConfig c = korthikanti.config(r);
    CHECK(c.spec.layout.dp == 1);
    CHECK(c.spec.layout.mode == TpMode::d1_sp);
    CHECK(c.effective_recompute() == Recompute::selective);
    CHECK(c.attention_keeps_probabilities);
    CHECK(c.gradient_accumulation_fusion);
    CHECK((c.overlap.tp_backward && !c.overlap.tp_comm && !c.overlap.pp_p2p));
    // The paper's end-to-end iteration times (its Table 5) over the model FLOPs give the MFU the
    // README printed, to within its rounding and the times' three digits.
    const double seconds = r.layers == 48 ? 1.10 : r.layers == 96 ? 13.75 : r.layers == 105 ? 37.83 : 71.49;
    const double mfu = korthikanti.step_flops(c) / (seconds * r.gpus * 312e12) * 100;
    INFO(r.billions << "B: MFU from the paper's time " << mfu << " %");
    CHECK(std::abs(mfu - r.percent_of_peak) < 0.2);
  }
  // Every table validates end to end on its own hardware: every prediction below the peak.
  for (const MeasuredTable& t : tables) {
    const Cluster cluster = load_cluster(find_cluster(t.cluster));
    const Validation v = validate(t, cluster);
    REQUIRE(v.rows.size() == t.rows.size());
    for (const ValidationRow& r : v.rows) CHECK((r.predicted > 0 && r.predicted < (t.cluster == "dgx-h100" ? 989 : 312)));
    CHECK(v.table == &t);
    std::cout << "[validation] " << t.key << ": mean |error| " << 100 * v.mean_abs_error << " %, worst "
              << 100 * v.max_error << " %, Spearman " << v.across.spearman << "\n";
  }
}

TEST_CASE("the data-sheet bound: a configuration on its hardware at the data sheet, no run faster",
          "[cost][validation]") {
  const Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  const Cluster sheet = at_data_sheet(h100);
  // A large GEMM at the tensor cores' peak, with no tiles, waves or launch cost; a GEMV at the HBM
  // bandwidth (it reads the whole matrix once); a streaming kernel likewise.
  const double n = 4096;
  CHECK(gemm_kernel_seconds(4096, 4096, 4096, DType::bf16, sheet) == Approx(2 * n * n * n / 989e12).epsilon(1e-12));
  CHECK(gemm_kernel_seconds(1, 8192, 8192, DType::bf16, sheet) ==
        Approx(2.0 * (8192 + 8192.0 * 8192 + 8192) / 3.35e12).epsilon(1e-12));
  CHECK(stream_seconds(1e9, sheet, 7) == Approx(1e9 / 3.35e12).epsilon(1e-12));
  CHECK(gemm_kernel_seconds(4096, 4096, 4096, DType::bf16, h100) > 1.3 * gemm_kernel_seconds(4096, 4096, 4096,
                                                                                            DType::bf16, sheet));
  // Every link at its line rate with no latency; NVLink SHARP at the NVLink's own rate.
  for (const ClusterLink* link : {&sheet.intra_node, &sheet.inter_node, &*sheet.pcie}) {
    CHECK(link->params().alpha == 0.0);
    CHECK(link->params().beta == Approx(1.0 / link->bandwidth).epsilon(1e-15));
  }
  REQUIRE(sheet.nvls);
  CHECK(sheet.nvls->params.bandwidth == 450e9);
  CHECK(sheet.host->stream_bandwidth() == sheet.host->memory_bandwidth);
  // Every shipped row: the bound above the prediction (the same step, every rate raised), and the
  // measurement below the bound: each table's rule describes runs its hardware could have run.
  for (const MeasuredTable& t : measured_tables()) {
    const Validation v = validate(t, load_cluster(find_cluster(t.cluster)));
    for (const ValidationRow& r : v.rows) {
      INFO(t.key << " " << r.row.billions << "B: measured " << r.row.tflops_per_gpu << ", predicted " << r.predicted
                 << ", bound " << r.bound);
      CHECK(r.bound > r.predicted);
      CHECK(r.row.tflops_per_gpu < r.bound);
    }
  }
}

namespace {

// A shipped table's text with one substring replaced, parsed as if read from "edited.json".
MeasuredTable parse_edited_table(const std::string& from, const std::string& to) {
  std::ifstream in(measured_table("narayanan-2021").path);
  std::string text(std::istreambuf_iterator<char>(in), {});
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  return parse_measured_table(text, "edited.json");
}

}  // namespace

// validate groups a table's rows by model (layers, hidden, heads), each group's order from its own
// rows: one model of the 2021 table measured on four cluster sizes (its other rows kept) is one
// model of four configurations, whose order is computed over those four alone.
TEST_CASE("validate: a model measured in several configurations is grouped, its order its own",
          "[cost][validation]") {
  const MeasuredTable edited = parse_edited_table(
      "[1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44,",
      "[1.7, 24, 2304, 24, 1, 1, 8, 512, 140, 45], [1.7, 24, 2304, 24, 1, 1, 16, 512, 139, 45], "
      "[1.7, 24, 2304, 24, 2, 1, 64, 512, 120, 38], [1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44,");
  const Validation v = validate(edited, dgx_a100());
  REQUIRE(v.rows.size() == 13);
  REQUIRE(v.models.size() == 10);
  const ModelOrder& first = v.models.front();
  CHECK(model_name(first) == "l=24 h=2304 a=24");
  CHECK(first.order.runs == 4);
  std::vector<double> measured, predicted;
  for (const ValidationRow& r : v.rows)
    if (r.row.layers == 24 && r.row.hidden == 2304) {
      measured.push_back(r.row.tflops_per_gpu);
      predicted.push_back(r.predicted);
    }
  REQUIRE(measured.size() == 4);
  const RankOrder expected = rank_order(measured, predicted);
  CHECK(first.order.spearman == expected.spearman);
  CHECK(first.order.distinct_pairs == expected.distinct_pairs);  // 120 against 137, 139 and 140
  CHECK(first.order.distinct_pairs == 3);
  for (std::size_t i = 1; i < v.models.size(); ++i) CHECK(v.models[i].order.runs == 1);
  CHECK(v.across.runs == 13);
  CHECK_FALSE(order_held(v));  // four configurations: below the goal's five
  const PredictionGoal from_four{0.10, 0.25, 0.8, 4};
  CHECK(order_held(v, from_four));
}

TEST_CASE("a row measured above its data-sheet bound is named: its rule is not what it ran", "[cost][validation]") {
  // The 1.7B row of the 2021 table claimed at 250 TFLOP/s, above what its configuration can reach on
  // an A100 at the data sheet (198: the tensor cores' 312 less its recomputation and its other work).
  const MeasuredTable edited = parse_edited_table("[1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44,",
                                                  "[1.7, 24, 2304, 24, 1, 1, 32, 512, 250, 80,");
  const Validation v = validate(edited, dgx_a100());
  REQUIRE(v.rows.front().row.tflops_per_gpu == 250);
  CHECK(v.rows.front().bound < 250);
  CHECK(v.rows.front().bound > v.rows.front().predicted);
  for (std::size_t i = 1; i < v.rows.size(); ++i) CHECK(v.rows[i].row.tflops_per_gpu < v.rows[i].bound);
  const std::string text = validation_text(v, dgx_a100());
  CHECK_THAT(text, Catch::Contains("; above it, not run as the rule has it: 1.7B\n"));
  const MeasuredTable narayanan = measured_table("narayanan-2021");  // Validation points at its table
  CHECK_THAT(validation_text(validate(narayanan, dgx_a100()), dgx_a100()), !Catch::Contains("above it"));
}

TEST_CASE("a table file of measured runs: a user's own validates like a shipped one; a broken one is refused in one line",
          "[cost][validation]") {
  // Two rows of the shipped A100 table with their rule, as a user would write their own.
  const std::string path = "test_measured_table_user.json";
  {
    std::ofstream out(path);
    out << R"({"key": "my-runs", "title": "two runs", "citation": "this test", "cluster": "dgx-a100",
      "flops": "narayanan",
      "rule": {"text": "as Narayanan's", "seq": 2048, "vocab": 51200, "sequence_parallel": false,
               "dtype": "f16", "grad_dtype": "f16", "zero": 0, "recompute": "full", "dropout": 0.1,
               "streaming_attention": false, "gradient_accumulation_fusion": false, "grad_nan_check": false,
               "overlap": {"dp_gradients": false, "pp_p2p": false, "tp_comm": false, "param_gather": false,
                           "tp_backward": false}},
      "columns": ["params_billions", "heads", "hidden", "layers", "tp", "pp", "gpus", "batch", "tflops_per_gpu",
                  "percent_of_peak"],
      "setup_source": "run_table_1.sh",
      "rows": [[18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43, {"micro_batch": 8, "dp_overlap": true}],
               [1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, {"micro_batch": 1, "chunks": 1}]]})";
  }
  const MeasuredTable mine = measured_table(path);
  CHECK(mine.key == "my-runs");
  const Validation v = validate(mine, dgx_a100());
  const Validation shipped = validate(measured_table("narayanan-2021"), dgx_a100());
  REQUIRE(v.rows.size() == 2);
  CHECK(v.rows[0].predicted == shipped.rows[3].predicted);  // the same rule: the same predictions
  CHECK(v.rows[1].predicted == shipped.rows[9].predicted);
  std::remove(path.c_str());

  CHECK_THROWS_WITH(measured_table("no/such/table.json"), Catch::Contains("cannot be opened"));
  CHECK_THROWS_WITH(parse_edited_table("\"seq\": 2048", "\"seq\": 0"),
                    Catch::Contains("edited.json") && Catch::Contains("'rule.seq' must be a whole number in [1,"));
  CHECK_THROWS_WITH(parse_edited_table("\"recompute\": \"full\"", "\"recompute\": \"most\""),
                    Catch::Contains("'rule.recompute'") && Catch::Contains("most"));
  CHECK_THROWS_WITH(parse_edited_table("\"flops\": \"narayanan\"", "\"flops\": \"hardware\""),
                    Catch::Contains("'flops' must be \"narayanan\""));
  CHECK_THROWS_WITH(parse_edited_table("\"tp_comm\": false", "\"tp_comm\": 0"),
                    Catch::Contains("'rule.overlap.tp_comm' must be true or false"));
  CHECK_THROWS_WITH(parse_edited_table("[1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44,", "[1.7, 24, 2304, 24, 1, 1, 32,"),
                    Catch::Contains("'rows[0]' must list 10 values"));
  CHECK_THROWS_WITH(parse_edited_table("[1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44,",
                                       "[1.7, 24, 2304, 24, 3, 1, 32, 512, 137, 44,"),
                    Catch::Contains("32 GPUs are not a whole number of tp x pp = 3 x 1"));
  // A run's setup (the row's optional last element): its fields named, each checked against the row.
  CHECK_THROWS_WITH(parse_edited_table("{\"micro_batch\": 16, \"dp_overlap\": true}", "{\"mbs\": 16}"),
                    Catch::Contains("'rows[0][10].mbs' is not a setup field; expected micro_batch, chunks or "
                                    "dp_overlap"));
  CHECK_THROWS_WITH(parse_edited_table("{\"micro_batch\": 16, \"dp_overlap\": true}", "{\"micro_batch\": 3}"),
                    Catch::Contains("rows[0]: micro_batch 3 must divide each replica's share of the batch (512 "
                                    "sequences over dp 32)"));
  CHECK_THROWS_WITH(parse_edited_table("{\"micro_batch\": 16, \"dp_overlap\": true}", "{\"chunks\": 2}"),
                    Catch::Contains("rows[0]: chunks 2 must be 1 without a pipeline"));
  CHECK_THROWS_WITH(parse_edited_table("{\"micro_batch\": 1, \"chunks\": 3}", "{\"chunks\": 2}"),
                    Catch::Contains("rows[8]: chunks 2 must be 1 without a pipeline and divide the 105 layers into "
                                    "pp x chunks = 35 x 2"));
  CHECK_THROWS_WITH(parse_edited_table("{\"micro_batch\": 16, \"dp_overlap\": true}", "{\"dp_overlap\": 1}"),
                    Catch::Contains("'rows[0][10].dp_overlap' must be true or false"));
  CHECK_THROWS_WITH(parse_edited_table("\"setup_source\"", "\"source_of_setups\""),
                    Catch::Contains("field 'setup_source' is missing"));
  // The pipeline's scatter/gather: on unless the rule says otherwise (Megatron-LM of 2021).
  CHECK(measured_table("narayanan-2021").config(measured_table("narayanan-2021").rows[9]).p2p_scatter_gather);
  const MeasuredTable whole = parse_edited_table("\"cross_entropy_fusion\": false,",
                                                 "\"cross_entropy_fusion\": false, \"p2p_scatter_gather\": false,");
  CHECK_FALSE(whole.config(whole.rows[9]).p2p_scatter_gather);
  CHECK_THROWS_WITH(parse_edited_table("\"cross_entropy_fusion\": false,", "\"p2p_scatter_gather\": 0,"),
                    Catch::Contains("'rule.p2p_scatter_gather' must be true or false"));
  // Megatron-core's NaN check of each gradient bucket: off where the rule says so (the 2021 and
  // 2022 tables: Megatron-LM had none), StepConfig's default (on) where the file leaves it out.
  const MeasuredTable& narayanan = measured_table("narayanan-2021");
  CHECK_FALSE(narayanan.config(narayanan.rows[0]).grad_nan_check);
  CHECK(measured_table("megatron-h100").config(measured_table("megatron-h100").rows[0]).grad_nan_check);
  const MeasuredTable checked = parse_edited_table("\"grad_nan_check\": false,", "");
  CHECK(checked.config(checked.rows[0]).grad_nan_check);
  CHECK_THROWS_WITH(parse_edited_table("\"grad_nan_check\": false,", "\"grad_nan_check\": \"no\","),
                    Catch::Contains("'rule.grad_nan_check' must be true or false"));
  CHECK_THROWS_WITH(parse_edited_table("\"params_billions\",", "\"billions\","),
                    Catch::Contains("field 'columns' must be"));
  CHECK_THROWS_WITH(parse_measured_table("[1, 2]", "list.json"), Catch::Contains("the top level must be an object"));
  try {
    parse_edited_table("\"cluster\": \"dgx-a100\"", "\"cluster\": 7");
    FAIL("accepted a number for the cluster");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "measured table edited.json: field 'cluster' must be a string; got 7");
  }
}
