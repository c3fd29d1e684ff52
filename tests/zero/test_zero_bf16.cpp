// Mixed precision (bf16 parameters and activations, f32 gradients, f32 master weights and moments)
// through the ZeRO engine, in every case of zero_cases_for_world:
//  - after every step, on every rank, every bf16 parameter is its f32 master rounded to nearest
//    even, bit for bit, at every stage (stage 3's parameters read while their unit's buckets are
//    gathered), with and without offload;
//  - every stage equals the unsharded optimizer: masters and moments bit-identical over three
//    AdamW steps where ZeRO takes the unsharded optimizer's own sums (as in test_zero_parity),
//    else within 1e-5 (f32 sums in another order);
//  - the memory held per category equals the bucket plan's model (f32 masters and moments, f32
//    gradients, bf16 values);
//  - a bf16 run is not the f32 run;
//  - identical injected f32 gradients give bit-identical masters in every mode and ZeRO stage
//    (with offload), against mode none on one rank.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>

#include "core/convert.hpp"
#include "mesh/mesh.hpp"
#include "plan/bucket_memory.hpp"
#include "zero_harness.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {


// The values a bf16 tensor takes for these doubles (each rounded once, to nearest even).
std::vector<double> rounded_to_bf16(const std::vector<double>& v) {
  std::vector<std::uint16_t> bits(v.size());
  convert_host(DType::f64, v.data(), DType::bf16, bits.data(), v.size());
  std::vector<double> out(v.size());
  convert_host(DType::bf16, bits.data(), DType::f64, out.data(), v.size());
  return out;
}

// This rank's TP shard of every parameter's bf16 value: the model's tensors at stages 0-2; at
// stage 3, read while the engine has gathered each unit's buckets (as a forward pass would).
ParamMap bf16_values(ZeroRun& r, int stage) {
  ParamMap out;
  auto read = [&](const std::vector<ModelParam>& params) {
    for (const ModelParam& p : params) out[p.name()] = r.base.backend->to_f64(p.param->value);
  };
  if (stage < 3) {
    read(r.model->parameters());
    return out;
  }
  const int units = static_cast<int>(r.model->config().layers) + 2;
  for (int u = 0; u < units; ++u) {  // through the model's hooks, as a forward pass gathers them
    r.model->hooks()->before_forward(u, 0);
    read(r.model->unit_parameters(u));
    r.model->hooks()->after_forward(u, 0);
  }
  return out;
}

// Every element of every parameter's value equals its master rounded (on every rank).
bool values_are_rounded_masters(ZeroRun& r, int stage) {
  const ParamMap masters = r.local(ZeroTensor::value), values = bf16_values(r, stage);
  bool ok = values.size() == masters.size();
  for (const auto& [name, m] : masters) {
    const auto it = values.find(name);
    ok = ok && it != values.end() && it->second == rounded_to_bf16(m);
  }
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

struct Run {
  ParamMap masters, exp_avg, exp_avg_sq;
  bool rounded_every_step = true;
};

Run run(const GptRun& base, const ParamMap& start, const ZeroConfig& zero, int steps) {
  ZeroRun r(base, start, zero, test_adamw());
  Run out;
  out.rounded_every_step = values_are_rounded_masters(r, zero.stage);  // the masters start as the values
  for (int s = 0; s < steps; ++s) {
    r.step(step_batch(base, s));
    out.rounded_every_step = values_are_rounded_masters(r, zero.stage) && out.rounded_every_step;
  }
  out.masters = r.local(ZeroTensor::value);
  out.exp_avg = r.local(ZeroTensor::exp_avg);
  out.exp_avg_sq = r.local(ZeroTensor::exp_avg_sq);
  // Memory held against the bucket plan (stages 1-3: the engine's buckets).
  if (zero.stage > 0) {
    const MemoryTracker& t = base.backend->allocator().tracker();
    const ZeroHeldBytes held = zero_held_bytes(r.engine->plan(), zero.stage, zero.offload, true);
    CHECK(t.current(MemCategory::master_weights) == held.master_weights);
    CHECK(t.current(MemCategory::optimizer_state) == held.optimizer_state);
  }
  return out;
}

}  // namespace

TEST_CASE("bf16 with f32 masters: every parameter is its rounded master after every step, at every ZeRO stage",
          "[zero][bf16]") {
  for (const ModeCase& c : zero_cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label()) {
      GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp), MPI_COMM_WORLD, DType::bf16);
      const ParamMap start = random_parameters(base, 7);
      const bool exact = same_sums(base);
      const Run ref = run(base, start, ZeroConfig{}, 3);
      CHECK(ref.rounded_every_step);
      for (int stage = 1; stage <= 3; ++stage)
        for (bool offload : {false, true}) {
          if (offload && stage == 1) continue;
          ZeroConfig zero;
          zero.stage = stage;
          zero.offload = offload;
          zero.bucket_mb = 0.01;
          const Run got = run(base, start, zero, 3);
          const double masters = max_relative_error_all(got.masters, ref.masters);
          const double moments = std::max(max_relative_error_all(got.exp_avg, ref.exp_avg),
                                          max_relative_error_all(got.exp_avg_sq, ref.exp_avg_sq));
          const bool identical = bit_identical_all(got.masters, ref.masters) &&
                                 bit_identical_all(got.exp_avg, ref.exp_avg) &&
                                 bit_identical_all(got.exp_avg_sq, ref.exp_avg_sq);
          if (world_rank() == 0)
            std::cout << "[zero bf16] " << c.label() << " stage " << stage << (offload ? " offload" : "")
                      << ": masters " << masters << ", moments " << moments << ", bit-identical " << identical
                      << ", values = rounded masters after every step " << got.rounded_every_step << "\n";
          INFO("stage " << stage << " offload " << offload);
          CHECK(got.rounded_every_step);
          if (exact) CHECK(identical);
          CHECK(masters <= 1e-5);
          CHECK(moments <= 1e-5);
        }
    }
  }
}

TEST_CASE("a bf16 run is not the f32 run, and stays close to it", "[zero][bf16]") {
  const ModeCase c = zero_cases_for_world(world_size()).front();
  const std::int64_t batch = kReplicaBatch * (c.config.world / c.config.tp);
  GptRun f32(c, zero_model(), batch, MPI_COMM_WORLD, DType::f32), bf16(c, zero_model(), batch, MPI_COMM_WORLD, DType::bf16);
  // The same starting point, exact in bf16 (rounded once), for both.
  ParamMap start = random_parameters(f32, 7);
  for (auto& [name, v] : start) v = rounded_to_bf16(v);
  const Run a = run(f32, start, ZeroConfig{}, 3), b = run(bf16, start, ZeroConfig{}, 3);
  const double distance = max_relative_error_all(b.masters, a.masters);
  if (world_rank() == 0) std::cout << "[zero bf16] bf16 against f32 after 3 steps: " << distance << "\n";
  CHECK(!bit_identical_all(b.masters, a.masters));
  CHECK(distance > 0.0);
  CHECK(distance <= 5e-2);
}

// Seen before the update (for every precision): a non-finite gradient norm applies nothing, on
// every rank, and the reduced gradients stay readable for the diagnosis.
TEST_CASE("a non-finite gradient norm applies no update, and the gradients stay readable", "[zero][bf16][faults]") {
  const ModeCase c = zero_cases_for_world(world_size()).front();
  GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp), MPI_COMM_WORLD, DType::bf16);
  const ParamMap start = random_parameters(base, 7);
  for (int stage : {0, 1}) {
    ZeroConfig zero;
    zero.stage = stage;
    ZeroRun r(base, start, zero, test_adamw());
    r.accumulate({step_batch(base, 0)});
    const ParamMap before = r.local(ZeroTensor::value);
    // One gradient element made infinite on every rank (at stage 1 it lands in one rank's shard).
    Tensor& g = r.model->parameters().front().param->grad;
    Tensor first = g.reshaped({g.numel()}).row_slice(0, 1);
    base.backend->fill(first, INFINITY);
    const double norm = r.engine->step();
    INFO("stage " << stage);
    CHECK(!std::isfinite(norm));
    CHECK(bit_identical_all(r.local(ZeroTensor::value), before));
    CHECK(r.engine->step_count() == 0);
    CHECK_NOTHROW(r.local(ZeroTensor::grad));
  }
}

// Exact where the arithmetic is the same: the update is element-wise (AdamW without clipping), so
// given the same f32 gradients every mode and ZeRO stage must produce the same f32 masters, bit for
// bit — whatever the mesh, the shard boundaries, the offload.  The gradients are injected after
// finish_gradients (the engine's load_full of ZeroTensor::grad), replacing the computed ones, which
// differ in their last bits between modes (sums in another order).  Mode none on one replica is the
// reference every case is held against; each case's first step also still computes its own
// gradients (the passes run), so the injection is what makes them equal.
namespace {

// A deterministic f32 gradient for element k of a parameter at a step: spread over several
// binades, signs mixed, never zero.
std::vector<double> injected_gradient(const std::string& name, std::int64_t numel, int step) {
  const double h = static_cast<double>(std::hash<std::string>{}(name) % 1000) * 1e-3;
  std::vector<double> g(static_cast<std::size_t>(numel));
  for (std::int64_t k = 0; k < numel; ++k) {
    const double v = std::sin(0.731 * static_cast<double>(k) + 1.37 * step + 6.28 * h) *
                     std::ldexp(1.0, -static_cast<int>((k * 7 + step) % 12));
    g[static_cast<std::size_t>(k)] = static_cast<double>(static_cast<float>(v == 0.0 ? 1e-3 : v));
  }
  return g;
}

// Three AdamW steps with injected gradients; the full f32 masters after them (on every rank).
ParamMap masters_after_injected_steps(const GptRun& base, const ParamMap& start, const ZeroConfig& zero) {
  ZeroRun r(base, start, zero, test_adamw());
  for (int s = 0; s < 3; ++s) {
    r.accumulate({step_batch(base, s)});
    for (std::size_t i = 0; i < r.engine->parameters().size(); ++i) {
      const ModelParam& p = r.engine->parameters()[i];
      r.engine->load_full(i, ZeroTensor::grad, injected_gradient(p.name(), shape_numel(p.checkpoint_shape()), s));
    }
    r.engine->step();
  }
  return r.gather(ZeroTensor::value);
}

}  // namespace

TEST_CASE("bf16: identical injected f32 gradients give bit-identical masters in every mode and ZeRO stage",
          "[zero][bf16]") {
  const int world = world_size();
  // The reference: mode none, one replica, the unsharded optimizer, on world rank 0's own mesh.
  ParamMap reference;
  {
    MPI_Comm alone = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() == 0 ? 0 : MPI_UNDEFINED, 0, &alone);
    if (alone != MPI_COMM_NULL) {
      GptRun serial(mode_case("none", 1, 1), zero_model(), kReplicaBatch, alone, DType::bf16);
      reference = masters_after_injected_steps(serial, random_parameters(serial, 7), ZeroConfig{});
      MPI_Comm_free(&alone);
    }
    // Every rank gets the reference (names in map order, the same everywhere).
    std::vector<double> flat;
    for (const auto& [name, v] : reference) flat.insert(flat.end(), v.begin(), v.end());
    long long n = static_cast<long long>(flat.size());
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    flat.resize(static_cast<std::size_t>(n));
    MPI_Bcast(flat.data(), static_cast<int>(n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    // The names and sizes, from a model every rank builds (collective over the world).
    GptRun shapes(mode_case("none", world, 1), zero_model(), kReplicaBatch * world, MPI_COMM_WORLD, DType::bf16);
    const ParamMap names = random_parameters(shapes, 7);
    if (world_rank() != 0) {
      std::size_t at = 0;
      for (const auto& [name, v] : names) {
        reference[name].assign(flat.begin() + static_cast<std::ptrdiff_t>(at),
                               flat.begin() + static_cast<std::ptrdiff_t>(at + v.size()));
        at += v.size();
      }
    }
  }
  std::vector<ModeCase> cases = zero_cases_for_world(world);
  if (world > 1) cases.push_back(mode_case("none", world, 1));
  for (const ModeCase& c : cases) {
    DYNAMIC_SECTION(c.label()) {
      GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp), MPI_COMM_WORLD, DType::bf16);
      const ParamMap start = random_parameters(base, 7);
      for (int stage = 0; stage <= 3; ++stage)
        for (bool offload : {false, true}) {
          if (offload && stage < 2) continue;
          ZeroConfig zero;
          zero.stage = stage;
          zero.offload = offload;
          zero.bucket_mb = 0.01;
          const ParamMap got = masters_after_injected_steps(base, start, zero);
          INFO("stage " << stage << " offload " << offload);
          REQUIRE(got.size() == reference.size());
          CHECK(bit_identical(got, reference));
          CHECK(max_relative_error(got, reference) == 0.0);
        }
    }
  }
}
