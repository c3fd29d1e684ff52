#include "train/train_rig.hpp"

#include <chrono>

#include "comm/run_clock.hpp"
#include "modes/registry.hpp"
#include "plan/unit_passes.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

double seconds_between(RunClock::time_point a, RunClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// This stage's chunks as the model takes them.
std::vector<UnitRange> stage_chunks(const StagePartition& partition, int stage) {
  std::vector<UnitRange> out;
  for (const UnitSpan& u : partition.stage_units(stage)) out.push_back(UnitRange{u.first, u.last});
  return out;
}

}  // namespace

TrainRig::TrainRig(const TrainConfig& tc, const TrainPlan& plan, MPI_Comm world) : world_(world) {
  // A bad MDTP_SYNC_TIMING is refused here, before any collective.
  ledger_.set_sync_timing(tc.sync_timing || sync_timing_from_environment());
  backend_ = tc.device.make_backend ? tc.device.make_backend(world) : make_host_backend();
  mesh_ = std::make_unique<Mesh>(plan.mesh, world, ledger_,
                                 tc.device.make_comm_factory ? tc.device.make_comm_factory(*backend_, world)
                                                             : CommFactory{});
  mode_ = make_tp_mode(plan.spec.layout.mode,
                       TpContext{*mesh_, *backend_, plan.spec.precision.params, plan.spec.seed, {}, plan.zero.stage == 3,
                                 plan.spec.precision.grad_reduce});
  kernels_ = tc.device.make_kernels ? tc.device.make_kernels(*backend_) : make_host_gpt_kernels(*backend_);
  stage_ = mesh_->comm(group::pp).rank();
  const auto start = RunClock::now();
  model_ = std::make_unique<GptModel>(*mode_, plan.spec.model, plan.micro_batch, stage_chunks(plan.partition, stage_), group::dp,
                                      kernels_.get());
  // DualPipe: this stage's two positions are also held by its mirror stage p − 1 − r.
  if (plan.schedule.parameter_copies() > 1) model_->sum_copies_over(group::mirror);
  model_->set_recompute(plan.spec.recompute);
  model_->track_kept_activations(true);  // the kept peak, sampled at pass ends (docs/memory.md)
  const auto model_built = RunClock::now();
  executor_ = std::make_unique<PipelineExecutor>(*model_, *mesh_, plan.schedule, stage_);
  // Sharded over dp at ZeRO stages 1–3 (stage 0: every replica holds everything).
  engine_ = std::make_unique<ZeroEngine>(plan.zero, plan.spec.optimizer, *model_, *mesh_, *backend_);
  engine_->set_pass_order(stage_unit_passes(plan.schedule, plan.partition, stage_));  // ZeRO-3's prefetch order
  // The slowest rank's figures, so a collective: no rank can still be building, as each has its engine.
  setup_seconds_ = world_max({seconds_between(start, model_built),
                              seconds_between(model_built, RunClock::now())},
                             *mesh_, *backend_);
}

std::vector<double> world_max(const std::vector<double>& values, const Mesh& mesh, const Backend& backend) {
  CommLedger& ledger = mesh.ledger();
  ledger.set_enabled(false);
  Tensor t = backend.from_f64(values, {static_cast<std::int64_t>(values.size())}, DType::f64, MemCategory::other);
  mesh.comm(group::world).all_reduce(t, ReduceOp::max);
  ledger.set_enabled(true);
  return backend.to_f64(t);
}

}  // namespace mdtp
