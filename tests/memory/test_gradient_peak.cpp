// ZeRO-2/3's full gradient buckets inside a step: the allocator's `gradients` counter, over the
// steps of `mdtp train`, peaks at the bucket plan's held shards plus full_gradient_peak over the
// stage's events — for one micro-batch (buckets freed while backward runs: below the full buckets),
// several micro-batches, a TP mode, pipelines under 1f1b and zb-h1, offload; stages 0–1 hold their
// gradients whole.  The peak function against a replay written out by hand, and the events
// against the schedule.
#include <catch2/catch.hpp>

#include <iostream>

#include "support/gpt_harness.hpp"
#include "plan/gradient_peak.hpp"
#include "plan/gradient_rounds.hpp"
#include "plan/bucket_memory.hpp"
#include "support/train_fixtures.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct GradientCase {
  TrainShape shape;
  bool offload = false;
  bool per_micro_batch = false;  // ZeroConfig::reduce_per_micro_batch
};

std::vector<GradientCase> gradient_cases(int world) {
  switch (world) {
    case 2:
      return {{{"zero2 dp2", TpMode::none, 1, 1, 1, 2}},
              {{"zero3 dp2", TpMode::none, 1, 1, 1, 3}},
              {{"zero2 dp2 m3", TpMode::none, 1, 1, 3, 2}},
              {{"zero2 offload dp2", TpMode::none, 1, 1, 1, 2}, true},
              {{"zero2 dp2 m3 per micro-batch", TpMode::none, 1, 1, 3, 2}, false, true},
              {{"zero3 dp2 m3 per micro-batch", TpMode::none, 1, 1, 3, 3}, false, true},
              {{"zero1 dp2", TpMode::none, 1, 1, 1, 1}},
              {{"zero0 dp2", TpMode::none, 1, 1, 1, 0}}};
    case 4:
      return {{{"zero2 1d tp2 dp2", TpMode::d1, 2, 1, 1, 2}},
              {{"zero3 pp2 1f1b dp2 m2", TpMode::none, 1, 2, 2, 3}},
              {{"zero2 pp2 zb-h1 dp2 m2", TpMode::none, 1, 2, 2, 2, ScheduleKind::zb_h1}},
              {{"zero2 pp2 zb-h1 dp2 m2 per micro-batch", TpMode::none, 1, 2, 2, 2, ScheduleKind::zb_h1}, false, true},
              {{"zero3 pp2 1f1b dp2 m2 per micro-batch", TpMode::none, 1, 2, 2, 3}, false, true}};
    case 8:
      return {{{"zero2 2d tp4 dp2", TpMode::d2, 4, 1, 1, 2}}, {{"zero3 dp8", TpMode::none, 1, 1, 1, 3}}};
    default: return {};
  }
}

std::int64_t bytes_in(const std::vector<std::pair<MemCategory, std::int64_t>>& list, MemCategory c) {
  for (const auto& [category, bytes] : list)
    if (category == c) return bytes;
  return -1;
}

}  // namespace

TEST_CASE("inside a step the gradients counter equals the held shards plus the full buckets held at once",
          "[memory][zero]") {
  const int world = world_size();
  for (const GradientCase& c : gradient_cases(world)) {
    DYNAMIC_SECTION(c.shape.label) {
      const TrainShape& shape = c.shape;
      TrainConfig t = small_train_config(shape, world);
      t.spec.zero.offload = c.offload;
      t.spec.zero.reduce_per_micro_batch = c.per_micro_batch;
      const TrainResult r = train(t, MPI_COMM_WORLD);
      const std::int64_t held = bytes_in(r.memory_model, MemCategory::gradients);
      INFO("gradients inside a step: measured " << r.gradients_in_step.measured << " B, model "
                                                << r.gradients_in_step.model << " B, held between steps " << held);
      CHECK(r.gradients_in_step.measured == r.gradients_in_step.model);
      CHECK(r.kept_activations.equal_on_every_rank);
      // Between steps, the shards (stages 2–3) or the whole gradients (0–1), as before.
      CHECK(bytes_in(r.memory_held, MemCategory::gradients) == held);
      if (shape.zero < 2) {
        CHECK(r.gradients_in_step.model == held);
      } else {
        CHECK(r.gradients_in_step.model > held);
        // One micro-batch on one stage: units complete one by one and their buckets are freed
        // while backward runs, so fewer than all full buckets are ever held together.
        // The full buckets are dp shards each (offload adds a host copy of the shard to `held`).
        // Reducing every micro-batch, each micro-batch's buckets are freed as its backward runs.
        if (shape.pp == 1 && (shape.micro_batches == 1 || c.per_micro_batch)) {
          const std::int64_t shards = c.offload ? held / 2 : held, dp = world / (shape.tp * shape.pp);
          CHECK(r.gradients_in_step.model - held < shards * dp);
        }
      }
      if (world_rank() == 0)
        std::cout << "[gradient peak] " << shape.label << ": " << r.gradients_in_step.measured
                  << " B inside a step (model " << r.gradients_in_step.model << " B), " << held
                  << " B held between steps\n";
    }
  }
}

TEST_CASE("the full gradient peak replays opens at backward-input passes and frees one completion later",
          "[memory][zero]") {
  // Units 3, 2, 1, 0 (a head, two blocks, an embedding); bucket b written by the unit below, and
  // bucket 4 by units 3 and 0, as a tied embedding's is.
  const std::vector<std::vector<int>> writers{{3}, {3}, {2}, {1}, {0, 3}};
  const std::vector<std::int64_t> bytes{10, 20, 40, 80, 160};
  // Unit by unit: B3 opens 0, 1, 4 (190); ready 3 starts 0 and 1.  B2 opens 2 (230); ready 2
  // starts 2 and frees 0, 1 (200).  B1 opens 3 (280); ready 1 starts 3, frees 2 (240).  B0 opens
  // nothing new; ready 0 starts 4, frees 3.  Peak 280 of the 310 bytes.
  const std::vector<GradientEvent> unit_by_unit{{3, false}, {3, true}, {2, false}, {2, true},
                                                {1, false}, {1, true}, {0, false}, {0, true}};
  CHECK(full_gradient_peak(unit_by_unit, writers, bytes) == 280);
  // Every backward-input pass first (a split backward): all five buckets are open together.
  const std::vector<GradientEvent> split{{3, false}, {2, false}, {1, false}, {0, false},
                                         {3, true},  {2, true},  {1, true},  {0, true}};
  CHECK(full_gradient_peak(split, writers, bytes) == 310);
  // No weight pass: nothing completes, nothing is freed.
  CHECK(full_gradient_peak({{3, false}, {2, false}}, writers, bytes) == 10 + 20 + 160 + 40);
  CHECK_THROWS_WITH(full_gradient_peak(unit_by_unit, writers, {1, 2}), Catch::Contains("5 writer lists for 2 buckets"));
  CHECK_THROWS_WITH(full_gradient_peak({{3, true}}, writers, bytes), Catch::Contains("starts before any unit"));
  // Reducing every micro-batch, two micro-batches unit by unit: the first repeats the replay above;
  // its last report starts the tied bucket 4 (160), still in flight when the second micro-batch's
  // B3 is about to reopen it, so that round completes first (0) and B3 opens 0, 1 and a fresh 4
  // (190): the second micro-batch repeats the first, peak 280, never two copies of bucket 4.
  std::vector<GradientEvent> two = unit_by_unit;
  two.insert(two.end(), unit_by_unit.begin(), unit_by_unit.end());
  CHECK(full_gradient_peak(two, writers, bytes) == 280);
  // A reopen that finds no round of its own in flight waits for nothing: B2 opening bucket 2 right
  // after ready 3 started 0 and 1 leaves them in flight (10 + 20 + 160 + 40).
  CHECK(full_gradient_peak({{3, false}, {3, true}, {2, false}}, writers, bytes) == 10 + 20 + 160 + 40);
  // Reporting once per step instead, the same passes keep every bucket for the step.
  const std::vector<GradientEvent> once{{3, false}, {2, false}, {1, false}, {0, false}, {3, false}, {3, true},
                                        {2, false}, {2, true},  {1, false}, {1, true},  {0, false}, {0, true}};
  CHECK(full_gradient_peak(once, writers, bytes) == 310);
}

TEST_CASE("a bucket's round starts once every writer has reported once more", "[memory][zero]") {
  // Bucket 0 written by unit 2 alone, bucket 1 by units 2 and 0 (a tied wte).
  GradientRounds rounds({{2}, {2, 0}});
  CHECK(rounds.report(2) == std::vector<std::size_t>{0});
  CHECK(rounds.report(2) == std::vector<std::size_t>{0});  // unit 2 again: bucket 1 still waits for unit 0
  CHECK(rounds.report(0) == std::vector<std::size_t>{1});  // one report of unit 0 for two of unit 2
  CHECK(rounds.report(0) == std::vector<std::size_t>{1});
  CHECK(rounds.report(0).empty());  // unit 0 ahead of unit 2 now
  CHECK(rounds.report(1).empty());  // writes nothing
  CHECK(rounds.rounds(0) == 2);
  CHECK(rounds.rounds(1) == 2);
  CHECK(rounds.report(2) == std::vector<std::size_t>{0, 1});
  CHECK(rounds.writes(0, 1));
  CHECK_FALSE(rounds.writes(0, 0));
  rounds.reset();
  CHECK(rounds.rounds(0) == 0);
  CHECK(rounds.report(0).empty());
}

TEST_CASE("gradient events follow the stage's action list", "[memory][zero]") {
  // One stage, one micro-batch: a fused backward, unit by unit.
  {
    const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 1, 1);
    const StagePartition partition(2, 1, 1);  // units 0 … 3
    const std::vector<GradientEvent> expected{{3, false}, {3, true}, {2, false}, {2, true},
                                              {1, false}, {1, true}, {0, false}, {0, true}};
    CHECK(stage_gradient_events(s, partition, 0) == expected);
  }
  // Two micro-batches: the first backward opens, only the last one completes.
  {
    const Schedule s = make_schedule(ScheduleKind::gpipe, 1, 2);
    const StagePartition partition(1, 1, 1);  // units 0 … 2
    const std::vector<GradientEvent> expected{{2, false}, {1, false}, {0, false}, {2, false}, {2, true},
                                              {1, false}, {1, true},  {0, false}, {0, true}};
    CHECK(stage_gradient_events(s, partition, 0) == expected);
    // Reporting per micro-batch: every weight pass reports.
    const std::vector<GradientEvent> per_micro_batch{{2, false}, {2, true}, {1, false}, {1, true},
                                                     {0, false}, {0, true}, {2, false}, {2, true},
                                                     {1, false}, {1, true}, {0, false}, {0, true}};
    CHECK(stage_gradient_events(s, partition, 0, true) == per_micro_batch);
  }
  // A later stage of a pipeline sends its input gradient before its weight passes; under ZB-H1
  // the weight passes are actions of their own: per chunk, B opens for every micro-batch, and the
  // step's last W (or BW) completes.
  for (const ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
    const int p = 2, m = 3;
    const Schedule s = make_schedule(kind, p, m);
    const StagePartition partition(2, p, 1);
    const std::vector<GradientEvent> events = stage_gradient_events(s, partition, 1);
    const UnitSpan span = partition.stage_units(1)[0];
    const int units = span.last - span.first + 1;
    int opens = 0, readies = 0;
    for (const GradientEvent& e : events) (e.ready ? readies : opens) += 1;
    INFO(schedule_name(kind));
    CHECK(opens == m * units);
    CHECK(readies == units);
    // Every unit's completion comes after its last backward-input pass.
    for (int u = span.first; u <= span.last; ++u) {
      std::size_t last_open = 0, ready_at = 0;
      for (std::size_t i = 0; i < events.size(); ++i) {
        if (events[i].unit != u) continue;
        (events[i].ready ? ready_at : last_open) = i;
      }
      CHECK(ready_at > last_open);
    }
  }
}
