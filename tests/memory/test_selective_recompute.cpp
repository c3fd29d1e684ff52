// `mdtp train --recompute selective` against `--recompute none` on the same mesh, in f64: the loss
// curve, every reduced gradient of the first step and the parameters after three steps
// bit-identical (the attention core's probabilities are recomputed by the same kernel from the same
// Q, K, V), the same collectives (selective recomputation communicates nothing), and fewer kept
// activations.
#include <catch2/catch.hpp>

#include <iostream>

#include "io/h5_file.hpp"
#include "support/gpt_harness.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct SelectiveCase {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, pp = 1, micro_batches = 1;
};

std::vector<SelectiveCase> selective_cases(int world) {
  switch (world) {
    case 2: return {{"none dp2", TpMode::none}, {"1d tp2", TpMode::d1, 2}};
    case 4: return {{"2d tp4", TpMode::d2, 4}, {"none pp2 1f1b dp2", TpMode::none, 1, 2, 2}};
    case 8: return {{"1d-sp tp2 pp2 1f1b dp2", TpMode::d1_sp, 2, 2, 2}};
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

}  // namespace

TEST_CASE("selective recomputation gives bit-identical training with the same communication", "[memory][recompute]") {
  const int world = world_size();
  for (const SelectiveCase& c : selective_cases(world)) {
    DYNAMIC_SECTION(c.label) {
      TrainConfig t;
      t.spec.layout.mode = c.mode;
      t.spec.layout.tp = c.tp;
      t.spec.layout.pp = c.pp;
      t.spec.layout.micro_batches = c.micro_batches;
      t.spec.model = ModelShape{4, 32, 4, 16, 0};
      t.spec.global_batch = 2 * world / (c.tp * c.pp) * c.micro_batches;
      t.steps = 3;
      t.spec.optimizer.lr = 2e-2;
      t.spec.optimizer.grad_clip = 0.5;
      t.spec.precision = precision_for(DType::f64);
      std::vector<TrainResult> runs;
      for (const Recompute policy : {Recompute::none, Recompute::selective}) {
        TrainConfig r = t;
        r.spec.recompute = policy;
        const std::string tag = c.label + "-" + recompute_name(policy);
        r.dump_grads = shared_path(tag + "-grads.h5");
        r.save = shared_path(tag + "-params.h5");
        runs.push_back(train(r, MPI_COMM_WORLD));
        MPI_Barrier(MPI_COMM_WORLD);
      }
      REQUIRE(runs[0].steps.size() == 3);
      REQUIRE(runs[1].steps.size() == 3);
      for (std::size_t s = 0; s < runs[0].steps.size(); ++s) CHECK(runs[1].steps[s].loss == runs[0].steps[s].loss);
      CHECK(files_equal(shared_path(c.label + "-selective-grads.h5"), shared_path(c.label + "-none-grads.h5")));
      CHECK(files_equal(shared_path(c.label + "-selective-params.h5"), shared_path(c.label + "-none-params.h5")));
      // The same collectives, call for call and byte for byte (no `recompute` phase).
      REQUIRE(runs[0].ledger.size() == runs[1].ledger.size());
      for (auto a = runs[0].ledger.begin(), b = runs[1].ledger.begin(); a != runs[0].ledger.end(); ++a, ++b) {
        CHECK(a->first == b->first);
        CHECK(a->second.calls == b->second.calls);
        CHECK(a->second.logical_bytes == b->second.logical_bytes);
      }
      const std::int64_t kept = runs[0].kept_activations.measured, selective = runs[1].kept_activations.measured;
      CHECK(selective <= kept);
      CHECK(runs[1].kept_activations.measured == runs[1].kept_activations.model);
      if (world_rank() == 0)
        std::cout << "[selective recompute] " << c.label << ": kept peak none " << kept << " B, selective "
                  << selective << " B (rank 0)\n";
    }
  }
}
