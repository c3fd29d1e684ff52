// `mdtp train --recompute full` against `--recompute none` on the same mesh, in f64: the loss
// curve and every reduced gradient of the first step bit-identical (the re-run forward fills each
// block's state exactly as the first one did), the parameters after three steps bit-identical,
// and the peak of kept activations lower.  Under TP modes, a pipeline (zb-h1: B and W split) and
// ZeRO-3 (the recomputed forward runs on the parameters gathered for the backward-input pass).
#include <catch2/catch.hpp>

#include <iostream>

#include "support/gpt_harness.hpp"
#include "io/h5_file.hpp"
#include "support/train_fixtures.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

std::vector<TrainShape> recompute_cases(int world) {
  switch (world) {
    case 2: return {{"none dp2", TpMode::none, 1, 1, 2, 0}};
    case 4:
      return {{"2d tp4", TpMode::d2, 4, 1, 1, 0},
              {"none pp2 zb-h1 dp2 zero3", TpMode::none, 1, 2, 2, 3, ScheduleKind::zb_h1}};
    case 8: return {{"1d tp2 pp2 1f1b dp2", TpMode::d1, 2, 2, 4, 0}, {"3d tp8", TpMode::d3, 8, 1, 1, 0}};
    default: return {};
  }
}

bool files_equal(const std::string& a, const std::string& b) {
  const H5File fa = H5File::open_read(a, "test"), fb = H5File::open_read(b, "test");
  if (fa.children("/") != fb.children("/")) return false;
  for (const std::string& key : fb.children("/"))
    if (key != "optim" && fa.read_real(key) != fb.read_real(key)) return false;
  return true;
}

std::int64_t peak_activations(const TrainResult& r) {
  for (const auto& [category, bytes] : r.memory_peak)
    if (category == MemCategory::activations) return bytes;
  return -1;
}

}  // namespace

TEST_CASE("full recomputation gives bit-identical training and keeps fewer activations", "[train][recompute]") {
  const int world = world_size();
  for (const TrainShape& c : recompute_cases(world)) {
    DYNAMIC_SECTION(c.label) {
      TrainConfig t = small_train_config(c, world, 4);
      t.steps = 3;
      t.spec.optimizer.lr = 2e-2;
      t.spec.optimizer.grad_clip = 0.5;
      t.spec.precision = precision_for(DType::f64);
      std::vector<TrainResult> runs;
      for (const Recompute policy : {Recompute::none, Recompute::full}) {
        TrainConfig r = t;
        r.spec.recompute = policy;
        const std::string tag = c.label + "-" + recompute_name(policy);
        r.dump_grads = shared_path(tag + "-grads.h5");
        r.save = shared_path(tag + "-params.h5");
        runs.push_back(train(r, MPI_COMM_WORLD));
        MPI_Barrier(MPI_COMM_WORLD);
      }
      for (std::size_t s = 0; s < runs[0].steps.size(); ++s) CHECK(runs[1].steps[s].loss == runs[0].steps[s].loss);
      CHECK(files_equal(shared_path(c.label + "-full-grads.h5"), shared_path(c.label + "-none-grads.h5")));
      CHECK(files_equal(shared_path(c.label + "-full-params.h5"), shared_path(c.label + "-none-params.h5")));
      const std::int64_t kept = peak_activations(runs[0]), recomputed = peak_activations(runs[1]);
      INFO("peak activation bytes: none " << kept << ", full " << recomputed);
      CHECK(recomputed < kept);
      if (world_rank() == 0)
        std::cout << "[train recompute] " << c.label << ": peak activations none " << kept << " B, full " << recomputed
                  << " B (rank 0)\n";
    }
  }
}
