// `mdtp train --zero S` (mdtp::train with TrainConfig::zero) against stage 0 on the same mesh, in
// f64: every reduced gradient of the first step (--dump-grads) within 1e-13, and the parameters
// after three AdamW steps — bit-identical at dp = 2 without clipping where every reduced element
// is a two-term sum (AdamW is element-wise), else within 1e-10 (the norm and TP partial sums are
// summed over shards in another order).  Under TP modes, with offload and keep-params, and under a two-stage pipeline
// (1f1b, zb-h1, zb-h2, the V-shaped zb-v and dualpipev, and dualpipe with its two copies).  Also: bytes held per category after the run equal the bucket plan's model on
// every rank, and a checkpoint written at stage 3 with dp = 4 resumes at stage 0 on one rank and
// at stage 2 with pp = 2, continuing within 1e-9 of the uninterrupted run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <iostream>

#include "support/gpt_harness.hpp"
#include "io/h5_file.hpp"
#include "file_error.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct ZeroCase {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, pp = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int micro_batches = 1;
};

// Cases whose dp = world / (tp · pp) is at least 2.
std::vector<ZeroCase> zero_train_cases(int world) {
  switch (world) {
    case 2: return {{"none dp2", TpMode::none, 1, 1, 1, ScheduleKind::one_f_one_b, 2}};
    case 4:
      return {{"1d tp2 dp2", TpMode::d1, 2, 1, 1, ScheduleKind::one_f_one_b, 1},
              {"none pp2 zb-h1 dp2", TpMode::none, 1, 1, 2, ScheduleKind::zb_h1, 2},
              {"none pp2 zb-v dp2", TpMode::none, 1, 1, 2, ScheduleKind::zb_v, 2},
              {"none pp2 dualpipe dp2", TpMode::none, 1, 1, 2, ScheduleKind::dualpipe, 4}};
    case 8:
      return {{"2d tp4 dp2", TpMode::d2, 4, 1, 1, ScheduleKind::one_f_one_b, 1},
              {"1d-sp tp2 pp2 1f1b dp2", TpMode::d1_sp, 2, 1, 2, ScheduleKind::one_f_one_b, 2},
              {"1d tp2 pp2 dualpipev dp2", TpMode::d1, 2, 1, 2, ScheduleKind::dualpipev, 4},
              {"none pp2 zb-h2 dp4", TpMode::none, 1, 1, 2, ScheduleKind::zb_h2, 3}};
    default: return {};
  }
}

TrainConfig config_for(const ZeroCase& c, int world) {
  TrainConfig t;
  t.spec.layout.mode = c.mode;
  t.spec.layout.tp = c.tp;
  t.spec.layout.depth = c.depth;
  t.spec.layout.pp = c.pp;
  t.spec.layout.schedule = c.schedule;
  t.spec.layout.stage_mapping = stage_mapping_of(c.schedule);
  t.spec.layout.chunks = std::max(1, fixed_chunks(c.schedule));
  t.spec.layout.micro_batches = c.micro_batches;
  // Vocabulary from the shipped corpus; a V-shaped schedule needs a block per virtual stage.
  t.spec.model = ModelShape{is_v_shaped(c.schedule) || is_mirrored(c.schedule) ? 2 * c.pp : 2, 32, 4, 16, 0};
  // lcm(4, m) · dp sequences: dp · m divides it (m = 3 included).
  t.spec.global_batch = std::lcm(4, c.micro_batches) * world / (c.tp * c.pp);
  t.steps = 3;
  t.spec.optimizer.lr = 2e-2;
  t.spec.precision = precision_for(DType::f64);
  t.spec.seed = 99;
  return t;
}

void run(TrainConfig t, const std::string& tag, MPI_Comm comm = MPI_COMM_WORLD) {
  t.save = shared_path(tag + "-params.h5");
  t.dump_grads = shared_path(tag + "-grads.h5");
  train(t, comm);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE("mdtp train at every ZeRO stage equals stage 0 on the same mesh", "[train][zero]") {
  const int world = world_size();
  for (const ZeroCase& c : zero_train_cases(world)) {
    for (const bool clip : {false, true}) {
      DYNAMIC_SECTION(c.label << (clip ? " clip" : "")) {
        TrainConfig base = config_for(c, world);
        base.spec.optimizer.grad_clip = clip ? 0.3 : 0.0;
        base.spec.zero.bucket_mb = 0.004;  // several buckets per unit
        const std::string ref_tag = c.label + (clip ? "-clip" : "") + "-z0";
        run(base, ref_tag);
        const int dp = world / (c.tp * c.pp);
        struct Variant {
          int stage;
          bool offload, keep;
          bool per_micro_batch = false;
        };
        // Every stage; offload, keep-params and reducing per micro-batch once each; with clipping
        // the two sharded-gradient stages, and stage 2 reducing per micro-batch.
        const std::vector<Variant> variants =
            clip ? std::vector<Variant>{{2, false, false}, {3, true, false}, {2, false, false, true}}
                 : std::vector<Variant>{{1, false, false}, {2, false, false}, {3, false, false},
                                        {1, true, false},  {3, false, true},  {3, false, false, true}};
        for (const Variant& v : variants) {
          TrainConfig t = base;
          t.spec.zero.stage = v.stage;
          t.spec.zero.offload = v.offload;
          t.spec.zero.keep_parameters = v.keep;
          t.spec.zero.reduce_per_micro_batch = v.per_micro_batch;
          const std::string tag = ref_tag + "-z" + std::to_string(v.stage) + (v.offload ? "o" : "") +
                                  (v.keep ? "k" : "") + (v.per_micro_batch ? "m" : "");
          run(t, tag);
          const double grads = file_error(shared_path(tag + "-grads.h5"), shared_path(ref_tag + "-grads.h5"));
          const double params = file_error(shared_path(tag + "-params.h5"), shared_path(ref_tag + "-params.h5"));
          INFO("stage " << v.stage << " offload " << v.offload << " keep " << v.keep << " per micro-batch "
                        << v.per_micro_batch << ": gradients " << grads
                        << ", parameters after 3 steps " << params);
          CHECK(grads <= 1e-13);
          // dp = 2, no clipping, no pipeline (the tied wte's copies add terms), and a mode that leaves no gradient partial over a
          // TP group: every reduced element is then a two-term sum and AdamW is element-wise, so
          // nothing depends on the order of a sum.  (2D/2.5D/3D and 1D-SP sum LayerNorm and bias
          // gradients over TP groups too, which stage 0 fuses with the dp sum and ZeRO does on the
          // shards: another order.)
          // (Reducing per micro-batch sums the micro-batches after the dp sum, not before.)
          const bool two_term = dp == 2 && !clip && c.pp == 1 && (c.mode == TpMode::none || c.mode == TpMode::d1) &&
                                !(v.per_micro_batch && c.micro_batches > 1);
          if (two_term) CHECK(params == 0.0);
          else CHECK(params <= 1e-10);
          if (world_rank() == 0)
            std::cout << "[train zero] " << c.label << (clip ? " clip" : "") << " stage " << v.stage
                      << (v.offload ? " offload" : "") << (v.keep ? " keep" : "")
                      << (v.per_micro_batch ? " per micro-batch" : "") << ": gradients " << grads
                      << ", parameters " << params << "\n";
        }
      }
    }
  }
}

TEST_CASE("mdtp train holds per category what the bucket plan says, on every rank", "[train][zero][memory]") {
  const int world = world_size();
  for (const ZeroCase& c : zero_train_cases(world))
    for (int stage = 0; stage <= 3; ++stage)
      for (const bool offload : {false, true}) {
        if (offload && stage < 2) continue;
        DYNAMIC_SECTION(c.label << " stage " << stage << (offload ? " offload" : "")) {
          TrainConfig t = config_for(c, world);
          t.steps = 1;
          t.spec.zero.stage = stage;
          t.spec.zero.offload = offload;
          t.spec.zero.bucket_mb = 0.004;
          const TrainResult r = train(t, MPI_COMM_WORLD);
          REQUIRE(r.memory_held.size() == r.memory_model.size());
          int modelled = 0;
          for (std::size_t i = 0; i < r.memory_held.size(); ++i) {
            if (r.memory_model[i].second < 0) continue;
            ++modelled;
            INFO(mem_category_name(r.memory_held[i].first));
            CHECK(r.memory_held[i].second == r.memory_model[i].second);
          }
          CHECK(modelled == 4);
        }
      }
}

TEST_CASE("a checkpoint written at stage 3 with dp 4 resumes at stage 0 on one rank and at stage 2 with pp 2",
          "[train][zero][checkpoint]") {
  if (world_size() != 4) return;
  TrainConfig t;
  t.spec.model = ModelShape{2, 32, 4, 16, 0};
  t.spec.global_batch = 8;
  t.spec.precision = precision_for(DType::f64);
  t.spec.optimizer.lr = 2e-2;
  t.spec.optimizer.grad_clip = 0.5;
  t.spec.seed = 7;
  t.spec.zero.bucket_mb = 0.004;

  TrainConfig whole = t;  // the uninterrupted run: four steps, stage 0, dp 4
  whole.steps = 4;
  const TrainResult reference = train(whole, MPI_COMM_WORLD);

  TrainConfig first = t;  // two steps at stage 3, dp 4, then a checkpoint
  first.steps = 2;
  first.spec.zero.stage = 3;
  first.save = shared_path("stage3-dp4.h5");
  train(first, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);

  auto check_resumed = [&](const TrainResult& r, const char* label) {
    REQUIRE(r.steps.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      const double err = std::abs(r.steps[i].loss - reference.steps[i + 2].loss) / std::abs(reference.steps[i + 2].loss);
      INFO(label << ": step " << r.steps[i].step << " loss " << r.steps[i].loss << " vs " << reference.steps[i + 2].loss);
      CHECK(r.steps[i].step == reference.steps[i + 2].step);
      CHECK(err <= 1e-9);
    }
  };

  // Stage 0 with dp 1: world rank 0 alone.
  MPI_Comm alone = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() == 0 ? 0 : MPI_UNDEFINED, 0, &alone);
  if (alone != MPI_COMM_NULL) {
    TrainConfig resume = t;
    resume.steps = 2;
    resume.init_from = first.save;
    check_resumed(train(resume, alone), "stage 0, dp 1");
    MPI_Comm_free(&alone);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // Stage 2 with pp 2 (dp 2), two micro-batches under 1f1b.
  TrainConfig resume = t;
  resume.steps = 2;
  resume.spec.layout.pp = 2;
  resume.spec.layout.micro_batches = 2;
  resume.spec.zero.stage = 2;
  resume.init_from = first.save;
  check_resumed(train(resume, MPI_COMM_WORLD), "stage 2, pp 2");
}
