#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "comm/run_clock.hpp"
#include "train/comm_audit.hpp"
#include "train/fault_guard.hpp"
#include "train/loss_scaler.hpp"
#include "train/memory_audit.hpp"
#include "train/pipeline_report.hpp"
#include "train/results_writer.hpp"
#include "train/train_rig.hpp"
#include "train/train_setup.hpp"
#include "spec/names.hpp"

// train() is the step loop and nothing else: the set-up is TrainRig's, and what is held against a
// model or decides whether the loop goes on lives in an observer of its own — CommAudit (ledger vs
// the whole-step plan), the memory audit, FaultGuard (non-finite steps, stop signals),
// PipelineReport (the timeline) and the results writer.
namespace mdtp {
namespace {

using Clock = RunClock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Table step_table() {
  Table t;
  t.integer("step").real("loss").real("grad_norm").real("seconds").real("tokens_per_s").real("loss_scale");
  return t;
}

// The replica's rows of the step, cut into the schedule's micro-batches.
struct StepTokens {
  std::vector<TokenRows> rows;
  std::vector<MicroBatch> micro_batches;
};

StepTokens step_tokens(const TokenData& data, std::int64_t position, int replica, const TrainPlan& plan) {
  StepTokens t;
  const std::int64_t per_replica = plan.micro_batch * plan.schedule.micro_batches;
  for (int i = 0; i < plan.schedule.micro_batches; ++i)
    t.rows.push_back(batch_rows(data, position, replica * per_replica + i * plan.micro_batch, plan.micro_batch));
  for (int i = 0; i < plan.schedule.micro_batches; ++i)
    t.micro_batches.push_back(MicroBatch{t.rows[static_cast<std::size_t>(i)].inputs,
                                         t.rows[static_cast<std::size_t>(i)].targets, i});
  return t;
}

// The step's mean loss: reduced once on the stage that runs the last virtual stage (p − 1, or 0
// under a V-shaped schedule; over the logits' row split and the replicas), then sent to every
// stage so that every rank reports it (phase "loss").  Under DualPipe both ends of the pipeline
// end routes, each for half the micro-batches: their per-micro-batch sums are first summed over
// pp (each slot has one non-zero term, so exactly) and added in micro-batch order, as a single
// stage adds them, so the loss is the unpipelined run's to the bit; stage 0 then reduces it.
double step_loss(GptModel& model, const Mesh& mesh, const StageStepResult& result, const Schedule& schedule) {
  PhaseScope scope(mesh.ledger(), phase::loss);
  Communicator& pp = mesh.comm(group::pp);
  const std::vector<int> loss_stages = schedule.loss_stages();
  const int root = loss_stages.front();
  const Backend& backend = model.mode().context().backend;
  double local = result.loss_sum;
  if (loss_stages.size() > 1) {
    Tensor sums = backend.from_f64(result.loss_by_micro_batch, {static_cast<std::int64_t>(schedule.micro_batches)},
                                   DType::f64, MemCategory::other);
    pp.all_reduce(sums);
    local = 0.0;
    for (double s : backend.to_f64(sums)) local += s;
  }
  Tensor loss = backend.zeros({1}, DType::f64, MemCategory::other);
  if (pp.rank() == root) backend.assign_f64(loss, {model.reduce_loss(local, schedule.micro_batches)});
  if (pp.size() > 1) pp.broadcast(loss, root);
  return backend.to_f64(loss)[0];
}

// What the loop carries from step to step, and the observers it reports to.
struct StepLoop {
  const TrainConfig& config;
  const TrainPlan& plan;
  TrainRig& rig;
  TrainResult& result;
  Table& steps;
  CommAudit& comm;
  PipelineReport& pipeline;
  FaultGuard& faults;
  LossScaler& scaler;
  std::ostream* progress;
  int replica = 0;

  void advance() {
    result.state.step += 1;
    result.state.data_position = (result.state.data_position + plan.spec.global_batch) % plan.data.rows;
  }
};

// One step: forward and backward over the schedule, the gradients reduced, the loss; then, unless
// the fault guard skips or stops it, the update.  False: training stops after it.
bool run_step(StepLoop& loop, bool first) {
  TrainRig& rig = loop.rig;
  TrainingState& state = loop.result.state;
  const int m = loop.plan.schedule.micro_batches;
  const StepTokens batch = step_tokens(loop.plan.data, state.data_position, loop.replica, loop.plan);
  rig.ledger().clear();
  rig.ledger().set_step(state.step + 1);  // named by the collective watchdog
  const auto t0 = Clock::now();
  rig.engine().begin_step();
  // The backward pass is seeded with the loss gradient times the loss scale (1 outside f16).
  const double scale = loop.scaler.scale();
  const StageStepResult run = rig.executor().run_step(batch.micro_batches, rig.model().loss_scale(m) * scale);
  rig.engine().finish_gradients();
  // Synthetic values (a simulated cluster's tensors hold nothing, docs/simulate.md): the loss is
  // still reduced (its collectives are the step's), but it means nothing and nothing checks values.
  const bool synthetic = rig.backend().synthetic_values();
  const double reduced_loss = step_loss(rig.model(), rig.mesh(), run, loop.plan.schedule);
  const double loss = synthetic ? std::nan("") : reduced_loss;
  switch (synthetic ? FaultGuard::LossVerdict::update
                    : loop.faults.check_loss(loss, state.step + 1, rig, loop.result, loop.progress)) {
    case FaultGuard::LossVerdict::stop: return false;
    case FaultGuard::LossVerdict::skip:  // counted (step numbers stay unique), not applied
      loop.advance();
      loop.steps.row()(state.step)(loss)(std::nan(""))(0.0)(0.0)(scale);
      return !loop.faults.stop_signalled(rig, loop.result);
    case FaultGuard::LossVerdict::update: break;
  }
  const auto t1 = Clock::now();
  if (first && !loop.config.dump_grads.empty()) {
    rig.ledger().set_enabled(false);
    dump_gradients(loop.config.dump_grads, rig.model(), rig.engine(), state.step + 1, loss, rig.world(), scale);
    rig.ledger().set_enabled(true);
  }
  const auto t2 = Clock::now();
  const double engine_norm = rig.engine().step(scale);
  const double norm = synthetic ? std::nan("") : engine_norm;
  const auto t3 = Clock::now();
  loop.advance();
  // f16's dynamic scaling: a non-finite norm is an overflow the scale answers for (the engine
  // applied nothing); the scale backs off or grows as the scaler says.
  const bool overflow = loop.scaler.dynamic() && !std::isfinite(engine_norm);
  loop.scaler.update(overflow);
  state.loss_scaler = loop.scaler.state();
  if (overflow) loop.result.overflow_steps += 1;
  // The slowest rank's step time, the gradient dump excluded.
  StepRecord r{state.step, loss, norm, world_max({seconds((t1 - t0) + (t3 - t2))}, rig.mesh(), rig.backend())[0], 0,
               scale, overflow};
  r.tokens_per_second = static_cast<double>(loop.plan.spec.global_batch * loop.plan.spec.model.seq) / r.seconds;
  loop.result.steps.push_back(r);
  loop.steps.row()(r.step)(r.loss)(r.grad_norm)(r.seconds)(r.tokens_per_second)(r.loss_scale);
  loop.comm.after_step(r.step, first, rig, loop.result);
  loop.pipeline.add_step(r.step, run);
  if (loop.progress)
    *loop.progress << fmt::format("step {:5d}  loss {:.6f}  grad-norm {:.4f}  {:8.1f} ms  {:10.0f} tok/s{}\n", r.step,
                                  r.loss, r.grad_norm, r.seconds * 1e3, r.tokens_per_second,
                                  !loop.scaler.dynamic() ? std::string()
                                  : overflow ? fmt::format("  overflow: skipped, loss scale {:g} -> {:g}", scale,
                                                           loop.scaler.scale())
                                             : fmt::format("  loss scale {:g}", scale))
                   << (first ? loop.comm.first_step_lines() : std::string()) << std::flush;
  if (overflow || synthetic) return !loop.faults.stop_signalled(rig, loop.result);
  return !loop.faults.stop_after_update(norm, state.step, rig, loop.result, loop.progress);
}

}  // namespace

TrainResult train(const TrainConfig& tc, MPI_Comm world, std::ostream* progress) {
  int world_size = 1;
  MPI_Comm_size(world, &world_size);
  const TrainPlan plan = plan_training(tc, world_size);  // local and identical on every rank

  // ---- Collective from here on.
  TrainRig rig(tc, plan, world);
  TrainResult result;
  result.setup_model_seconds = rig.setup_model_seconds();
  result.setup_optimizer_seconds = rig.setup_optimizer_seconds();
  result.spec = plan.spec;
  result.partition = plan.partition.describe();
  result.state.rng_state = plan.spec.seed;
  if (!tc.init_from.empty()) result.state = load_checkpoint(tc.init_from, rig.model(), rig.engine(), world);
  result.state.data_position %= plan.data.rows;

  Table steps = step_table();
  CommAudit comm(plan);
  PipelineReport pipeline(plan.schedule, rig.mesh(), world);
  FaultGuard faults(tc);
  LossScaler scaler(plan.spec.precision.params, plan.spec.precision.loss_scaling);
  if (result.state.has_loss_scaler) scaler.restore(result.state.loss_scaler);
  result.state.loss_scaler = scaler.state();
  StepLoop loop{tc, plan, rig, result, steps, comm, pipeline, faults, scaler, progress, rig.mesh().comm(group::dp).rank()};
  rig.backend().allocator().tracker().start_window();  // the steps' own peaks
  if (tc.on_steps) tc.on_steps(true);
  for (std::int64_t s = 0; s < tc.steps; ++s)
    if (!run_step(loop, s == 0)) break;
  if (tc.on_steps) tc.on_steps(false);

  Table memory = audit_memory(result, rig, plan);
  // No checkpoint of a state a non-finite step stopped.
  if (!tc.save.empty() && !faults.stopped_on_nonfinite())
    save_checkpoint(tc.save, rig.model(), rig.engine(), result.state, world);
  if (!tc.out.empty())
    write_train_results(tc, plan, rig, result, {faults.stopped_by(result), result.skipped_nonfinite, result.overflow_steps}, comm,
                        {{"steps", steps}, {"ledger", comm.table()}, {"pipeline", pipeline.pipeline()},
                         {"timeline", pipeline.timeline()}, {"memory", memory}});
  faults.raise_if_nonfinite();
  return result;
}

double TrainResult::median_later_step_seconds() const {
  if (steps.size() < 2) return 0.0;
  std::vector<double> later;
  for (std::size_t s = 1; s < steps.size(); ++s) later.push_back(steps[s].seconds);
  const auto middle = later.begin() + static_cast<std::ptrdiff_t>(later.size() / 2);
  std::nth_element(later.begin(), middle, later.end());
  return *middle;
}

}  // namespace mdtp
