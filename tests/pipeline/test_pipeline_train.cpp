// The pipelined trainer against the unpipelined one, in f64, through mdtp::train: for a case
// (mode, tp, pp, schedule, m, chunks, split) on the world, the reference is the same mode, tp and
// dp with pp = 1 — the same engine with one stage, the same m (gradient accumulation), the same
// data rows per replica — run on world ranks 0 … tp·dp − 1 while the others wait.  Both runs write the first step's gradients (--dump-grads) and the
// parameters after three AdamW steps (--save), full tensors, which every rank reads back:
//   - the first step's loss bit-identical, every gradient ≤ 1e-13 (‖Δ‖∞/‖ref‖∞), its gradient norm ≤ 1e-13
//     (the tied wte counted once over the two stages that hold a copy);
//   - m = 1 without clipping: every parameter after three AdamW steps bit-identical, the tied wte
//     included, when no input token repeats within a micro-batch.  When one does, the embedding
//     adds its rows for that token into wte's gradient in another association than one rank that
//     also holds the head (head term first, then the rows, against rows first and the head's
//     copy added by the `embedding` all-reduce): wte's first gradient differs by rounding, and
//     through it every parameter after the second step — ≤ 1e-10 then ([repeated-tokens] cases,
//     the bound of every run whose sums differ in order): the attention's key bias has a gradient
//     that is zero in exact arithmetic (softmax is invariant to a shift of a query's scores), so
//     its gradient is rounding noise, which AdamW divides by √v + eps and turns into steps of
//     ~lr·noise/eps; how far that noise differs between the two runs depends on the CPU's GEMM
//     kernels (8.4e-13 measured on an AVX-512 EPYC (Zen 4), under 1e-13 on an AVX2 one (Zen 3));
//   - m > 1 with clipping: ≤ 1e-10.
// Tag [ci] runs a representative spread at this world size (every schedule, every mode, pp 2/3/4,
// tp×pp×dp = 2×2×2, uneven splits, 3D × pp 2 at 16 ranks); [full] the whole matrix.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <algorithm>
#include <thread>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/gpt_harness.hpp"
#include "io/h5_file.hpp"
#include "io/token_data.hpp"
#include "run/root_task.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct PipeCase {
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, pp = 2;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int m = 1, chunks = 1, group_size = 0;
  std::vector<int> layers;  // blocks per virtual stage; empty: even
  int n_layer = 0;          // 0: the split's sum, else 2·pp·chunks
  bool repeats = false;     // input tokens may repeat within a micro-batch

  bool clip() const { return m > 1; }
  // Sequences per micro-batch: attention needs whole sequences on every rank, so the modes that
  // split the rows (2D over q, 2.5D over d·q, 3D over q², with q = 2 here) need that many.
  std::int64_t micro_batch() const {
    switch (mode) {
      case TpMode::d2: return 2;
      case TpMode::d2p5: return 2 * depth;
      case TpMode::d3: return 4;
      default: return 1;
    }
  }
  int n_layers() const {
    if (!layers.empty()) return std::accumulate(layers.begin(), layers.end(), 0);
    return n_layer > 0 ? n_layer : 2 * pp * chunks;
  }
  std::string label(int world) const {
    std::string s = fmt::format("{} tp={}", tp_mode_name(mode), tp);
    if (mode == TpMode::d2p5) s += fmt::format(" d={}", depth);
    s += fmt::format(" pp={} dp={} {} m={}", pp, world / (tp * pp), schedule_name(schedule), m);
    if (chunks > 1) s += fmt::format(" v={}", chunks);
    if (group_size > 0) s += fmt::format(" N={}", group_size);
    if (!layers.empty()) s += fmt::format(" layers={}", fmt::join(layers, ","));
    s += fmt::format(" L={}", n_layers());
    if (repeats) s += " repeated-tokens";
    return s + (clip() ? " clip" : " no-clip");
  }
};

// The tensor-parallel configurations a stage of `ranks` ranks can hold (tp·dp = ranks).
struct ModeTp {
  TpMode mode;
  int tp, depth;
};
std::vector<ModeTp> modes_dividing(int ranks) {
  const std::vector<ModeTp> all = {{TpMode::none, 1, 1}, {TpMode::d1, 2, 1},   {TpMode::d1_sp, 2, 1},
                                   {TpMode::d2, 4, 1},   {TpMode::d2p5, 4, 1}, {TpMode::d2p5, 8, 2},
                                   {TpMode::d3, 8, 1}};
  std::vector<ModeTp> out;
  for (const ModeTp& t : all)
    if (ranks % t.tp == 0) out.push_back(t);
  return out;
}

// Every schedule, with m = 1 (bit-identical, no clipping) where the schedule allows it, and m > 1
// with clipping (interleaved and the zero-bubble family need m >= p, DualPipe(V) m >= 2p).
std::vector<PipeCase> schedules_for(const ModeTp& t, int pp) {
  auto c = [&](ScheduleKind s, int m, int chunks = 1) {
    PipeCase x;
    x.mode = t.mode, x.tp = t.tp, x.depth = t.depth, x.pp = pp, x.schedule = s, x.m = m, x.chunks = chunks;
    return x;
  };
  std::vector<PipeCase> out = {
      c(ScheduleKind::gpipe, 1),          c(ScheduleKind::gpipe, pp + 1),       c(ScheduleKind::one_f_one_b, 1),
      c(ScheduleKind::one_f_one_b, 2 * pp), c(ScheduleKind::interleaved, pp, 2), c(ScheduleKind::zb_h1, pp + 1),
      c(ScheduleKind::zb_h2, 2 * pp - 1), c(ScheduleKind::zb_v, pp, 2),         c(ScheduleKind::dualpipev, 2 * pp, 2)};
  if (pp % 2 == 0) out.push_back(c(ScheduleKind::dualpipe, 2 * pp, 2));  // stage r pairs with p − 1 − r
  return out;
}

std::vector<PipeCase> full_matrix(int world) {
  std::vector<PipeCase> out;
  for (int pp : {2, 3, 4}) {
    if (world % pp != 0) continue;
    for (const ModeTp& t : modes_dividing(world / pp))
      for (const PipeCase& c : schedules_for(t, pp)) out.push_back(c);
  }
  return out;
}

PipeCase make(TpMode mode, int tp, int depth, int pp, ScheduleKind s, int m, int chunks = 1, std::vector<int> layers = {},
              int group_size = 0) {
  PipeCase c;
  c.mode = mode, c.tp = tp, c.depth = depth, c.pp = pp, c.schedule = s, c.m = m, c.chunks = chunks;
  c.layers = std::move(layers);
  c.group_size = group_size;
  return c;
}

PipeCase repeated(PipeCase c) {
  c.repeats = true;
  return c;
}

// What CI runs: every schedule, every mode, pp 2/3/4, dp > 1, the 2×2×2 case, uneven splits (one
// with an empty first stage, one interleaved), the interleaved schedule with a short last group,
// and 3D (q = 2) × pp 2 at 16 ranks.
std::vector<PipeCase> ci_selection(int world) {
  using S = ScheduleKind;
  switch (world) {
    case 4:
      return {make(TpMode::d1, 2, 1, 2, S::one_f_one_b, 1),                     // scatter/gather, bit-identical
              make(TpMode::none, 1, 1, 4, S::zb_h1, 4),                         // pp 4, ZB-H1
              make(TpMode::none, 1, 1, 2, S::interleaved, 5, 2, {}, 3),         // N = 3, last group of 2
              make(TpMode::d1_sp, 2, 1, 2, S::gpipe, 2),                        // 1d-sp
              make(TpMode::none, 1, 1, 4, S::one_f_one_b, 1, 1, {1, 3, 3, 1}),  // uneven, bit-identical
              make(TpMode::none, 1, 1, 2, S::interleaved, 2, 2, {1, 3, 2, 2}),  // uneven interleaved
              repeated(make(TpMode::d1, 2, 1, 2, S::gpipe, 1)),                 // wte ≤ 1e-13
              make(TpMode::none, 1, 1, 2, S::zb_v, 2, 2),                       // ZB-V, dp 2
              make(TpMode::d1, 2, 1, 2, S::dualpipev, 4, 2),                    // DualPipeV, 1d
              make(TpMode::none, 1, 1, 4, S::zb_h2, 7),                         // ZB-H2, pp 4
              make(TpMode::none, 1, 1, 2, S::zb_v, 2, 2, {0, 3, 2, 1}),         // V, uneven, embedding alone
              make(TpMode::none, 1, 1, 4, S::dualpipe, 8, 2),                   // DualPipe, two copies
              make(TpMode::d1, 2, 1, 2, S::dualpipe, 4, 2, {1, 3})};            // DualPipe 1d, uneven
    case 6:
      return {make(TpMode::none, 1, 1, 3, S::interleaved, 3, 2),          // pp 3 wrap-around, dp 2
              make(TpMode::d1_sp, 2, 1, 3, S::zb_h1, 3),                  // pp 3 ZB-H1
              make(TpMode::d1, 2, 1, 3, S::gpipe, 1, 1, {0, 4, 2}),       // an embedding-only first stage
              make(TpMode::d1_sp, 2, 1, 3, S::zb_v, 3, 2),                // ZB-V pp 3, 1d-sp
              make(TpMode::none, 1, 1, 3, S::dualpipev, 6, 2)};           // DualPipeV pp 3, dp 2
    case 8:
      return {make(TpMode::d1, 2, 1, 2, S::one_f_one_b, 2),  // tp × pp × dp = 2 × 2 × 2
              make(TpMode::d1, 2, 1, 2, S::gpipe, 1),        // 2 × 2 × 2, bit-identical
              make(TpMode::d2, 4, 1, 2, S::interleaved, 2, 2),
              make(TpMode::d2p5, 4, 1, 2, S::zb_h1, 2),
              make(TpMode::d1, 2, 1, 4, S::zb_h1, 4),
              make(TpMode::d2, 4, 1, 2, S::zb_v, 2, 2),
              make(TpMode::d2p5, 4, 1, 2, S::dualpipev, 4, 2),
              make(TpMode::d1, 2, 1, 2, S::zb_h2, 3),
              make(TpMode::d2, 4, 1, 2, S::dualpipe, 4, 2),
              make(TpMode::none, 1, 1, 2, S::dualpipe, 6, 2)};  // dp 4
    case 16:
      return {make(TpMode::d3, 8, 1, 2, S::one_f_one_b, 2),  // 3D q = 2 × pp 2
              make(TpMode::d2p5, 8, 2, 2, S::gpipe, 1),      // 2.5D q = 2, d = 2 × pp 2
              make(TpMode::d2, 4, 1, 4, S::interleaved, 4, 2),
              make(TpMode::d3, 8, 1, 2, S::zb_v, 2, 2),
              make(TpMode::d2p5, 8, 2, 2, S::dualpipev, 4, 2),
              make(TpMode::d3, 8, 1, 2, S::dualpipe, 4, 2)};
    default: return {};
  }
}

// Random tokens, written once: 3 steps' worth of the largest batch any case uses.  With
// `distinct`, no input token repeats within an aligned block of 4 rows (a micro-batch is 1, 2 or
// 4 aligned rows): then the tied wte's gradient is summed in the same order with and without a
// pipeline (see the header), and m = 1 without clipping is bit-identical in every tensor.
std::string token_file(const ModelShape& model, bool distinct) {
  const std::string path = shared_dir() + (distinct ? "/tokens-distinct.h5" : "/tokens.h5");
  run::run_on_root(MPI_COMM_WORLD, [&] {
    if (std::filesystem::exists(path)) return;
    const std::int64_t rows = 4 * 16 * 8 * 3;  // micro-batch × dp × m × steps, at most
    TokenBatch b = random_batch(model, rows, 31);
    if (distinct) {
      std::mt19937 gen(47);
      std::vector<std::int32_t> vocab(static_cast<std::size_t>(model.vocab));
      std::iota(vocab.begin(), vocab.end(), 0);
      const std::int64_t block = 4 * model.seq;  // tokens of 4 rows, at most the vocabulary
      REQUIRE(block <= model.vocab);
      for (std::int64_t r = 0; r < rows; r += 4) {
        std::shuffle(vocab.begin(), vocab.end(), gen);
        std::copy_n(vocab.begin(), block, b.inputs.begin() + r * model.seq);
      }
    }
    write_token_file(path, TokenData{rows, model.seq, b.inputs, b.targets, model.vocab, path});
  });
  return path;
}

// A tiny GPT every mode splits (H and heads by q = 2, b·T = 4 rows by q² = 4 and by d·q = 4).
constexpr ModelShape kShape{0, 24, 4, 4, 19};

TrainConfig config_of(const PipeCase& c, int dp, int pp, const std::string& files) {
  TrainConfig t;
  t.spec.layout.mode = c.mode;
  t.spec.layout.tp = c.tp;
  t.spec.layout.depth = c.depth;
  t.spec.model = kShape;
  t.spec.model.layers = c.n_layers();
  t.spec.layout.pp = pp;
  t.spec.layout.micro_batches = c.m;
  if (pp > 1) {
    t.spec.layout.schedule = c.schedule;
    t.spec.layout.stage_mapping = stage_mapping_of(c.schedule);
    t.spec.layout.chunks = c.chunks;
    t.spec.layout.pp_layers = c.layers;
    t.spec.layout.group_size = c.group_size;
  }
  t.spec.global_batch = dp * c.m * c.micro_batch();
  t.steps = 3;
  t.spec.optimizer.kind = OptimizerKind::adamw;
  t.spec.optimizer.lr = 1e-2;
  t.spec.optimizer.grad_clip = c.clip() ? 0.05 : 0.0;
  t.spec.precision = precision_for(DType::f64);
  t.data = token_file(t.spec.model, !c.repeats);
  t.dump_grads = files + "-grads.h5";
  t.save = files + "-params.h5";
  return t;
}

// ‖a − b‖∞ / ‖b‖∞ (0 for two zero tensors).
double relative_inf(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Every dataset at the top of a checkpoint or gradient dump (the optimizer state aside).
std::map<std::string, std::vector<double>> tensors(const std::string& path) {
  const H5File f = H5File::open_read(path, "test file");
  std::map<std::string, std::vector<double>> out;
  for (const std::string& key : f.children("/"))
    if (key != "optim") out[key] = f.read_real(key);
  return out;
}

const std::string kWte = "transformer.wte.weight";

// Waits for every rank without spinning: ranks that wait while others compute would otherwise
// take their cores on an oversubscribed machine.
void polite_barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void run_case(const PipeCase& c, int index) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  REQUIRE(world % (c.tp * c.pp) == 0);
  const int dp = world / (c.tp * c.pp), stage_ranks = c.tp * dp;
  // The reference: the same mode, tp and dp without a pipeline, on world ranks 0 … tp·dp − 1 (a
  // sub-communicator whose ranks are numbered as in the world: the checkpoint gather maps
  // communicator members to mesh ranks through world numbers); the others wait.
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < stage_ranks ? 0 : MPI_UNDEFINED, rank, &sub);
  const std::string base = fmt::format("{}/case{}", shared_dir(), index);
  const TrainConfig ref_config = config_of(c, dp, 1, base + "-ref");
  TrainResult ref;
  if (sub != MPI_COMM_NULL) {
    ref = train(ref_config, sub);
    MPI_Comm_free(&sub);
  }
  polite_barrier();
  // Every rank needs the reference's per-step loss and gradient norm.
  std::vector<double> curve(6, 0.0);
  if (rank == 0)
    for (std::size_t s = 0; s < 3 && s < ref.steps.size(); ++s) curve[2 * s] = ref.steps[s].loss, curve[2 * s + 1] = ref.steps[s].grad_norm;
  MPI_Bcast(curve.data(), 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  ref.steps.resize(3);
  for (std::size_t s = 0; s < 3; ++s) ref.steps[s].loss = curve[2 * s], ref.steps[s].grad_norm = curve[2 * s + 1];

  const TrainConfig pipe_config = config_of(c, dp, c.pp, base + "-pp");
  const TrainResult pipe = train(pipe_config, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);  // every file written (rank 0 of each run writes) before any is read

  REQUIRE(pipe.steps.size() == 3);
  REQUIRE(ref.steps.size() == 3);
  const double loss_err = std::abs(pipe.steps[0].loss - ref.steps[0].loss) / std::abs(ref.steps[0].loss);
  const double norm_err = std::abs(pipe.steps[0].grad_norm - ref.steps[0].grad_norm) / ref.steps[0].grad_norm;
  // The first step's loss is the same sum in the same order (each micro-batch's local sum added in
  // micro-batch order, then reduced over C and dp): equal to the bit, DualPipe's two ends included.
  CHECK(loss_err == 0.0);
  CHECK(norm_err <= 1e-13);
  double later_loss_err = 0.0;
  for (std::size_t s = 1; s < 3; ++s)
    later_loss_err = std::max(later_loss_err, std::abs(pipe.steps[s].loss - ref.steps[s].loss) / std::abs(ref.steps[s].loss));
  CHECK(later_loss_err <= 1e-10);

  const auto ref_grads = tensors(ref_config.dump_grads), pipe_grads = tensors(pipe_config.dump_grads);
  const auto ref_params = tensors(ref_config.save), pipe_params = tensors(pipe_config.save);
  REQUIRE(ref_grads.size() == pipe_grads.size());
  REQUIRE(ref_params.size() == pipe_params.size());
  REQUIRE(ref_params.count(kWte) == 1);
  double grad_err = 0.0, param_err = 0.0, wte_err = 0.0;
  int identical = 0;
  for (const auto& [key, g] : ref_grads) {
    INFO(key);
    REQUIRE(pipe_grads.count(key) == 1);
    const double e = relative_inf(pipe_grads.at(key), g);
    CHECK(e <= 1e-13);
    grad_err = std::max(grad_err, e);
  }
  for (const auto& [key, p] : ref_params) {
    INFO(key);
    REQUIRE(pipe_params.count(key) == 1);
    const double e = relative_inf(pipe_params.at(key), p);
    if (key == kWte) wte_err = e;
    else param_err = std::max(param_err, e);
    identical += pipe_params.at(key) == p ? 1 : 0;
    CHECK(e <= (c.clip() || c.repeats ? 1e-10 : 1e-13));
  }
  // m = 1, no clipping, no token repeated within a micro-batch: the same operations in the same
  // order, so every tensor is bit-identical, the tied wte included.
  if (!c.clip() && !c.repeats) CHECK(identical == static_cast<int>(ref_params.size()));
  if (rank == 0)
    std::cout << fmt::format(
        "[pipeline] {}: loss {:.3g}, grad norm {:.3g}, gradients {:.3g} (max over tensors); after 3 steps: "
        "parameters {:.3g}, wte {:.3g}, {}/{} tensors bit-identical\n",
        c.label(world), loss_err, norm_err, grad_err, param_err, wte_err, identical, ref_params.size());
}

void run_cases(const std::vector<PipeCase>& cases) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (cases.empty()) {
    SUCCEED("no case at this world size");
    return;
  }
  for (std::size_t i = 0; i < cases.size(); ++i)
    DYNAMIC_SECTION(cases[i].label(world)) { run_case(cases[i], static_cast<int>(i)); }
}

}  // namespace

TEST_CASE("pipelined training equals the unpipelined run: a spread of schedules, modes and splits", "[ci]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  run_cases(ci_selection(world));
}

TEST_CASE("pipelined training equals the unpipelined run: every schedule, mode and pp of this world", "[full][.]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  run_cases(full_matrix(world));
}
