// ZeRO-3's gathered temporaries: the allocator's `parameters` counter inside every unit's pass
// (after the engine gathered the pass's buckets and started the next pass's) peaks at the bucket
// plan's held shards plus gathered_parameter_peak over the stage's pass order — with and without
// keep-for-step, under a TP mode and a pipeline; below stage 3 it is the held parameters.  The
// peak function against the union of the buckets read, built here with sets.
#include <catch2/catch.hpp>

#include <iostream>
#include <set>

#include "support/gpt_harness.hpp"
#include "plan/gathered_parameters.hpp"
#include "support/train_fixtures.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct GatherCase {
  TrainShape shape;
  bool keep = false;  // ZeroConfig::keep_parameters
};

std::vector<GatherCase> gather_cases(int world) {
  switch (world) {
    case 2:
      return {{{"zero3 dp2", TpMode::none, 1, 1, 1, 3}},
              {{"zero3 keep dp2", TpMode::none, 1, 1, 1, 3}, true},
              {{"zero1 dp2", TpMode::none, 1, 1, 1, 1}}};
    case 4:
      return {{{"zero3 1d tp2 dp2", TpMode::d1, 2, 1, 1, 3}},
              {{"zero3 pp2 zb-h1 dp2", TpMode::none, 1, 2, 2, 3, ScheduleKind::zb_h1}}};
    default: return {};
  }
}

}  // namespace

TEST_CASE("inside a pass the parameters counter equals the held shards plus the gathered buckets",
          "[memory][zero]") {
  const int world = world_size();
  for (const GatherCase& c : gather_cases(world)) {
    DYNAMIC_SECTION(c.shape.label) {
      TrainConfig t = small_train_config(c.shape, world);
      t.spec.zero.keep_parameters = c.keep;
      const TrainResult r = train(t, MPI_COMM_WORLD);
      const TrainResult::KeptActivations& k = r.kept_activations;
      INFO("parameters inside a pass: measured " << k.parameters_in_pass << " B, model " << k.parameters_in_pass_model);
      CHECK(k.parameters_in_pass > 0);
      CHECK(k.parameters_in_pass == k.parameters_in_pass_model);
      CHECK(k.equal_on_every_rank);
      std::int64_t held = -1;
      for (const auto& [category, bytes] : r.memory_model)
        if (category == MemCategory::parameters) held = bytes;
      if (c.shape.zero < 3) CHECK(k.parameters_in_pass == held);
      else CHECK(k.parameters_in_pass > held);
      if (world_rank() == 0)
        std::cout << "[gathered parameters] " << c.shape.label << ": " << k.parameters_in_pass << " B inside a pass, "
                  << held << " B held between steps\n";
    }
  }
}

TEST_CASE("the gathered peak is the largest union of the buckets of a pass and the next", "[memory][zero]") {
  const std::vector<std::vector<std::size_t>> reads{{0}, {1}, {1, 2}, {3}, {0, 3}};
  const std::vector<std::int64_t> bytes{10, 20, 40, 80};
  for (const bool keep : {false, true}) {
    std::int64_t expected = 0;
    std::set<std::size_t> so_far;
    for (std::size_t i = 0; i < reads.size(); ++i) {
      std::set<std::size_t> live = keep ? so_far : std::set<std::size_t>{};
      for (std::size_t j = i; j < std::min(reads.size(), i + 2); ++j) live.insert(reads[j].begin(), reads[j].end());
      std::int64_t sum = 0;
      for (std::size_t b : live) sum += bytes[b];
      expected = std::max(expected, sum);
      so_far = live;
    }
    INFO("keep " << keep);
    CHECK(gathered_parameter_peak(reads, bytes, keep) == expected);
  }
  CHECK_THROWS_WITH(gathered_parameter_peak({{4}}, bytes, false), Catch::Contains("bucket 4"));
}
