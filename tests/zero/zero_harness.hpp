#pragma once
// Shared pieces of the ZeRO tests: the (mode, mesh) cases per world size, a GPT model driven by a
// ZeroEngine from a given starting state, and comparisons of full parameter maps.
#include <memory>
#include <string>
#include <vector>

#include "support/gpt_harness.hpp"
#include "zero/zero_engine.hpp"

namespace mdtp::testing {

// Every (mode, mesh) the ZeRO tests run at this world size: tp = 1 with dp = world, and the TP
// modes that fit with dp = 2 or 4 (dp = 1 where only the mode fits: 2.5D with d = 2, 3D).
std::vector<ModeCase> zero_cases_for_world(int world);
// Two-stage pipelines (pp = 2) at this world size: tp = 1 at 2 and 4 ranks, 1D tp = 2 at 8.
std::vector<ModeCase> zero_pipeline_cases_for_world(int world);

// A tiny model every case can split, and the sequences per replica of one micro-batch.
ModelShape zero_model();
inline constexpr std::int64_t kReplicaBatch = 4;

// The step's global batch (kReplicaBatch sequences per replica).
TokenBatch step_batch(const GptRun& base, int step);

// A model on `base`'s mesh and mode, set to `start` (full logical tensors), driven by an engine.
struct ZeroRun {
  // `chunks`: the units this rank's model holds (empty: all, one chunk).
  ZeroRun(const GptRun& base, const ParamMap& start, const ZeroConfig& zero, const OptimizerSpec& optimizer,
          std::vector<UnitRange> chunks = {});
  const GptRun& base;
  std::unique_ptr<GptModel> model;
  std::unique_ptr<ZeroEngine> engine;
  // begin_step, forward and backward on this replica's rows of `batch`, finish_gradients, step;
  // returns the gradient norm.
  double step(const TokenBatch& batch);
  // The same with several micro-batches through the model's chunk (forward then fused backward
  // each, last_of_step on the last), as a pipeline of one stage runs them.
  double step(const std::vector<TokenBatch>& micro_batches);
  // That step up to finish_gradients: the reduced gradients are readable (local(ZeroTensor::grad))
  // until the engine's step().
  void accumulate(const std::vector<TokenBatch>& micro_batches);
  // Every parameter's full value or moment (collective).
  ParamMap gather(ZeroTensor what = ZeroTensor::value);
  // This rank's TP shard of every parameter's value or moment (collective over dp only).
  ParamMap local(ZeroTensor what = ZeroTensor::value);
};

// ‖got − ref‖∞ / ‖ref‖∞ over all parameters together.
double max_relative_error(const ParamMap& got, const ParamMap& ref);
// True when every element of every parameter is the same double.
bool bit_identical(const ParamMap& got, const ParamMap& ref);
// The same over every rank's local maps (each rank passes its TP shards): collective over the world.
double max_relative_error_all(const ParamMap& got, const ParamMap& ref);
bool bit_identical_all(const ParamMap& got, const ParamMap& ref);

// Whether ZeRO takes the unsharded optimizer's own sums on this mesh: dp <= 2 (a two-rank sum is
// the same in either order) and no partial-sum group of more than one rank.
bool same_sums(const GptRun& base);

// AdamW with a larger learning rate than the default, so ten steps move every parameter.
OptimizerSpec test_adamw(double grad_clip = 0.0);

}  // namespace mdtp::testing
