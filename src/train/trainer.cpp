#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/ledger_stats.hpp"
#include "cost/zero.hpp"
#include "io/results_file.hpp"
#include "mesh/mesh.hpp"
#include "model/activation_timeline.hpp"
#include "modes/registry.hpp"
#include "pipeline/executor.hpp"
#include "plan/activation_peak.hpp"
#include "plan/bucket_memory.hpp"
#include "plan/gathered_parameters.hpp"
#include "plan/gradient_peak.hpp"
#include "plan/kept_activations.hpp"
#include "plan/unit_passes.hpp"
#include "run/provenance.hpp"
#include "run/root_task.hpp"
#include "run/stop_request.hpp"
#include "train/nonfinite_check.hpp"
#include "zero/nonfinite.hpp"
#include "train/pipeline_report.hpp"
#include "train/step_comm_config.hpp"
#include "train/train_setup.hpp"

namespace mdtp {
namespace {

Table step_table() {
  Table t;
  t.integer("step").real("loss").real("grad_norm").real("seconds").real("tokens_per_s");
  return t;
}

// Bytes per category on every rank after the last step: what the allocator holds and what the
// ZeRO engine's bucket plan says it holds (plan/bucket_memory.hpp; -1 where the plan is silent);
// then the activation-memory rows (activations_kept, activations_at_pass_ends, parameters_in_pass:
// peaks over the run beside their models, docs/memory.md).
Table memory_table() {
  Table t;
  t.integer("rank").integer("stage").text("category").integer("held_bytes").integer("peak_bytes").integer(
      "model_bytes");
  return t;
}

std::int64_t modelled(const ZeroHeldBytes& model, MemCategory c) {
  switch (c) {
    case MemCategory::parameters: return model.parameters;
    case MemCategory::gradients: return model.gradients;
    case MemCategory::optimizer_state: return model.optimizer_state;
    case MemCategory::master_weights: return model.master_weights;
    default: return -1;
  }
}

// One row of the memory table on this rank: a category (or an activation measure) with its
// held, peak and modelled bytes (-1: not modelled).
struct MemoryRow {
  std::string name;
  std::int64_t held = 0, peak = 0, model = -1;
  bool peak_modelled = false;  // the model is of the peak, and must equal it on every rank
};

std::vector<MemoryRow> memory_rows(const TrainResult& result, const Backend& backend) {
  std::vector<MemoryRow> rows;
  for (std::size_t i = 0; i < result.memory_held.size(); ++i)
    rows.push_back({mem_category_name(result.memory_held[i].first), result.memory_held[i].second,
                    backend.allocator().tracker().peak(result.memory_held[i].first), result.memory_model[i].second});
  // ---- activation memory (docs/memory.md): the kept contexts' peak over the pass ends with its
  // model, and the allocator's `activations` counter at those points (it adds the boundary
  // tensors in flight, so it is reported beside, not modelled).
  const TrainResult::KeptActivations& k = result.kept_activations;
  rows.push_back({"activations_kept", 0, k.measured, k.model, true});
  rows.push_back({"activations_at_pass_ends", 0, k.allocator_at_pass_ends, -1});
  rows.push_back({"parameters_in_pass", 0, k.parameters_in_pass, k.parameters_in_pass_model, true});
  rows.push_back({"activations_in_step", 0, k.in_step, k.in_step_model, k.in_step_model >= 0});
  // ---- end activation memory
  rows.push_back({"gradients_in_step", 0, result.gradients_in_step.measured, result.gradients_in_step.model, true});
  return rows;
}

// Every rank's rows gathered to every rank (outside the ledger: this is reporting, not training
// traffic); one table row per (world rank, row).  Returns whether the rows whose model is a peak
// (activations_kept, parameters_in_pass, gradients_in_step) equal it on every rank.
bool add_memory_rows(Table& table, const TrainResult& result, int stage, const Mesh& mesh, const Backend& backend) {
  const std::vector<MemoryRow> rows = memory_rows(result, backend);
  std::vector<double> mine;
  for (const MemoryRow& r : rows)
    mine.insert(mine.end(), {static_cast<double>(stage), static_cast<double>(r.held), static_cast<double>(r.peak),
                             static_cast<double>(r.model)});
  CommLedger& ledger = mesh.ledger();
  ledger.set_enabled(false);
  Communicator& world = mesh.comm("world");
  Tensor local = backend.from_f64(mine, {static_cast<std::int64_t>(mine.size())}, DType::f64, MemCategory::other);
  Tensor all = backend.zeros({static_cast<std::int64_t>(mine.size()) * world.size()}, DType::f64, MemCategory::other);
  world.all_gather(local, all);
  ledger.set_enabled(true);
  const std::vector<double> v = backend.to_f64(all);
  const std::size_t per_rank = mine.size();
  bool kept_equal = true;
  for (int r = 0; r < world.size(); ++r)
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double* row = &v[static_cast<std::size_t>(r) * per_rank + 4 * i];
      if (rows[i].peak_modelled && row[2] != row[3]) kept_equal = false;
      table.row()(std::int64_t{r})(static_cast<std::int64_t>(row[0]))(rows[i].name)(static_cast<std::int64_t>(row[1]))(
          static_cast<std::int64_t>(row[2]))(static_cast<std::int64_t>(row[3]));
    }
  return kept_equal;
}

// ---- activation memory: what a recomputation policy keeps (mdtp's attention kernels keep the
// probabilities: selective recomputation drops them).
KeepPolicy keep_policy(ActivationRecompute policy) {
  KeepPolicy keep;
  keep.block_input_only = policy == ActivationRecompute::full;
  keep.attention_probabilities = policy == ActivationRecompute::none;
  return keep;
}

// The kept-activation peak of this stage's schedule from the model's local shapes.
std::int64_t modelled_kept_peak(const GptModel& model, const TrainPlan& plan, int stage, ActivationRecompute policy) {
  std::vector<UnitKeptBytes> units;
  for (const UnitActivationBytes& u :
       unit_activation_bytes(model.activation_shapes(), plan.model.n_layer, keep_policy(policy)))
    units.push_back({u.after_forward, u.after_input});
  return kept_activations(plan.schedule, plan.partition, stage, units).peak;
}

// The allocator's `activations` peak inside a step without a pipeline: one micro-batch's passes
// replayed from the layers (model/activation_timeline.hpp) over the schedule; -1 with a pipeline.
std::int64_t modelled_activations_in_step(const GptModel& model, const TrainPlan& plan, ActivationRecompute policy) {
  if (plan.schedule.stages != 1 || plan.schedule.chunks != 1) return -1;
  const MicroBatchActivationPeaks p =
      micro_batch_activation_peaks(model.activation_shapes(), plan.model.n_layer, keep_policy(policy));
  return activation_peak(plan.schedule, {p.forward_peak, p.after_forward, p.input_peak, p.after_input, p.fused_peak});
}

// Each bucket's full (padded) bytes, in bucket order: what a gathered or full gradient bucket holds.
std::vector<std::int64_t> bucket_bytes(const BucketPlan& plan) {
  std::vector<std::int64_t> bytes;
  for (const Bucket& b : plan.buckets) bytes.push_back(b.bytes());
  return bytes;
}

// The `parameters` counter inside a pass: what the bucket plan says is held, plus ZeRO-3's gathered
// buckets (those the pass reads and those of the next pass, in the order the engine prefetches).
std::int64_t modelled_parameters_in_pass(const ZeroEngine& engine, const TrainPlan& plan, int stage,
                                         const ZeroConfig& zero) {
  const std::int64_t held = zero_held_bytes(engine.plan(), zero.stage, zero.offload, engine.has_moments()).parameters;
  if (zero.stage < 3) return held;
  std::vector<std::vector<std::size_t>> reads;
  for (const UnitPass& p : stage_unit_passes(plan.schedule, plan.partition, stage))
    reads.push_back(p.direction > 0 ? engine.layout().forward_reads(p.unit) : engine.layout().backward_reads(p.unit));
  return held + gathered_parameter_peak(reads, bucket_bytes(engine.plan()), zero.keep_parameters_for_step);
}
// ---- end activation memory

// The `gradients` counter's peak inside a step: what the bucket plan says is held, plus, at stages
// 2–3, the full gradient buckets held at once (plan/gradient_peak.hpp); stages 0–1 hold their
// gradients whole throughout.
std::int64_t modelled_gradients_in_step(const ZeroEngine& engine, const TrainPlan& plan, int stage,
                                        const ZeroConfig& zero) {
  const std::int64_t held = zero_held_bytes(engine.plan(), zero.stage, zero.offload, engine.has_moments()).gradients;
  if (zero.stage < 2) return held;
  return held + full_gradient_peak(stage_gradient_events(plan.schedule, plan.partition, stage,
                                                         zero.reduce_per_micro_batch),
                                   engine.layout().writers(), bucket_bytes(engine.plan()));
}

// This stage's chunks as the model takes them.
std::vector<UnitRange> stage_chunks(const StagePartition& partition, int stage) {
  std::vector<UnitRange> out;
  for (const UnitSpan& u : partition.stage_units(stage)) out.push_back(UnitRange{u.first, u.last});
  return out;
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

// The step's mean loss: reduced once on the last stage (over the logits' row split and the
// replicas), then sent to every stage so that every rank reports it (phase "loss").
double step_loss(GptModel& model, const Mesh& mesh, const StageStepResult& result, int micro_batches) {
  PhaseScope phase(mesh.ledger(), "loss");
  Communicator& pp = mesh.comm("pp");
  const int last = pp.size() - 1;
  const Backend& backend = model.mode().context().backend;
  Tensor loss = backend.zeros({1}, DType::f64, MemCategory::other);
  if (pp.rank() == last) backend.assign_f64(loss, {model.reduce_loss(result.loss_sum, micro_batches)});
  if (pp.size() > 1) pp.broadcast(loss, last);
  return backend.to_f64(loss)[0];
}

// The slowest rank's values, element by element, in one collective outside the ledger.
std::vector<double> world_max(const std::vector<double>& values, const Mesh& mesh, const Backend& backend) {
  CommLedger& ledger = mesh.ledger();
  ledger.set_enabled(false);
  Tensor t = backend.from_f64(values, {static_cast<std::int64_t>(values.size())}, DType::f64, MemCategory::other);
  mesh.comm("world").all_reduce(t, ReduceOp::max);
  ledger.set_enabled(true);
  return backend.to_f64(t);
}

Attributes training_attributes(const TrainConfig& tc, const TrainPlan& plan) {
  const GptConfig& m = plan.model;
  const std::string layers = fmt::format("{}", fmt::join(plan.partition.blocks(), ","));
  return {{"tp", std::int64_t{tc.tp}},
          {"tp_depth", std::int64_t{tc.tp_depth}},
          {"dp", std::int64_t{plan.dp}},
          {"pp", std::int64_t{tc.pp}},
          {"schedule", std::string(schedule_name(plan.schedule.kind))},
          {"micro_batches", std::int64_t{plan.schedule.micro_batches}},
          {"micro_batch", plan.micro_batch},
          {"chunks", std::int64_t{plan.schedule.chunks}},
          {"group_size", std::int64_t{plan.schedule.group_size}},
          {"pp_layers", layers},
          {"stage_units", plan.partition.describe()},
          {"vocab_size", m.vocab_size},
          {"n_layer", m.n_layer},
          {"n_head", m.n_head},
          {"n_embd", m.n_embd},
          {"block_size", m.block_size},
          {"batch", tc.batch},
          {"optimizer", tc.optimizer.kind},
          {"lr", tc.optimizer.lr},
          {"grad_clip", tc.optimizer.grad_clip},
          {"recompute", std::string(activation_recompute_name(tc.recompute))},
          {"zero_stage", std::int64_t{tc.zero.stage}},
          {"zero_bucket_mb", tc.zero.bucket_mb},
          {"zero_offload", std::int64_t{tc.zero.offload ? 1 : 0}},
          {"zero_keep_parameters", std::int64_t{tc.zero.keep_parameters_for_step ? 1 : 0}},
          {"zero_reduce_per_micro_batch", std::int64_t{tc.zero.reduce_per_micro_batch ? 1 : 0}},
          {"seed", static_cast<std::int64_t>(tc.seed)},
          {"data", plan.data.source}};
}

// What this rank holds per category after the run, its peaks, and the bucket plan's model.
void record_memory(TrainResult& result, const ZeroEngine& engine, const ZeroConfig& zero, const Backend& backend) {
  const MemoryTracker& tracker = backend.allocator().tracker();
  const ZeroHeldBytes held = zero_held_bytes(engine.plan(), zero.stage, zero.offload, engine.has_moments());
  for (std::size_t c = 0; c < kMemCategoryCount; ++c) {
    const auto category = static_cast<MemCategory>(c);
    result.memory_held.emplace_back(category, tracker.current(category));
    result.memory_model.emplace_back(category, modelled(held, category));
    result.memory_peak.emplace_back(category, tracker.peak(category));
  }
}

// A /runs/NNNN-train group: the provenance every run carries (code, machine, mesh, MPI,
// oversubscription; collective, host names are gathered, so outside the ledger), the training
// settings, how the run ended, and the tables.  Rank 0 writes.
void write_results(const TrainConfig& tc, const TrainPlan& plan, const Mesh& mesh, MPI_Comm world,
                   const Backend& backend, std::int64_t skipped_nonfinite, const std::string& stopped_by,
                   const cost::ZeroPaperTraffic& paper, std::pair<double, double> setup,
                   const std::map<std::string, Table>& tables) {
  CommLedger& ledger = mesh.ledger();
  ledger.set_enabled(false);
  Attributes attrs = run::collect_provenance(
      mesh, world, {tc.command_line, tp_mode_name(tc.tp_mode), dtype_name(tc.dtype), backend.name()});
  ledger.set_enabled(true);
  const Attributes training = training_attributes(tc, plan);
  attrs.insert(training.begin(), training.end());
  attrs["skipped_nonfinite_steps"] = skipped_nonfinite;
  attrs["stopped_by"] = stopped_by;
  attrs["setup_model_seconds"] = setup.first;
  attrs["setup_optimizer_seconds"] = setup.second;
  // The paper's ZeRO figures beside rank 0's ledger and plan, first step (cost/zero.hpp).
  attrs["zero_paper_psi"] = paper.psi;
  attrs["zero_paper_factor"] = std::int64_t{paper.factor};
  attrs["zero_paper_dp_bus_bytes"] = paper.paper_bus_bytes;
  attrs["zero_ledger_dp_bus_bytes"] = paper.ledger_bus_bytes;
  attrs["zero_model_dp_bus_bytes"] = paper.model_bus_bytes;
  attrs["zero_paper_differences"] = paper.why;
  run::run_on_root(world, [&] { ResultsFile(tc.out).append_run("train", attrs, tables); });
}

}  // namespace

TrainResult train(const TrainConfig& tc, MPI_Comm world, std::ostream* progress) {
  int world_size = 1;
  MPI_Comm_size(world, &world_size);
  TrainPlan plan = plan_training(tc, world_size);  // local and identical on every rank

  // ---- Collective from here on.
  CommLedger ledger;
  ledger.set_sync_timing(tc.sync_timing || sync_timing_from_environment());  // refused (bad env) before any collective
  std::unique_ptr<Backend> backend = tc.device.make_backend ? tc.device.make_backend(world) : make_host_backend();
  Mesh mesh(plan.mesh, world, ledger,
            tc.device.make_comm_factory ? tc.device.make_comm_factory(*backend, world) : CommFactory{});
  // ZeRO-3 builds the model without parameter storage; the engine initialises (or the checkpoint
  // load fills) each rank's shards only, so no rank holds its whole tensor-parallel shard.
  auto mode = make_tp_mode(tc.tp_mode, TpContext{mesh, *backend, tc.dtype, tc.seed, {}, tc.zero.stage == 3});
  std::unique_ptr<GptKernels> kernels =
      tc.device.make_kernels ? tc.device.make_kernels(*backend) : make_host_gpt_kernels(*backend);
  const int stage = mesh.comm("pp").rank();
  const auto setup_start = std::chrono::steady_clock::now();
  GptModel model(*mode, plan.model, plan.micro_batch, stage_chunks(plan.partition, stage), "dp", kernels.get());
  model.set_recompute(tc.recompute);
  model.track_kept_activations(true);  // activation memory: the kept peak, sampled at pass ends
  const auto model_built = std::chrono::steady_clock::now();
  PipelineExecutor executor(model, mesh, plan.schedule, stage);
  // The optimizer, sharded over dp at ZeRO stages 1–3 (stage 0: every replica holds everything).
  ZeroEngine engine(tc.zero, tc.optimizer, model, mesh, *backend);
  engine.set_pass_order(stage_unit_passes(plan.schedule, plan.partition, stage));  // ZeRO-3's prefetch order
  TrainResult result;
  // Set-up cost beside the step (docs/host-performance.md): the slowest rank's, so a collective;
  // no rank can still be building its model here, as every one has its engine.
  const std::vector<double> setup =
      world_max({std::chrono::duration<double>(model_built - setup_start).count(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - model_built).count()},
                mesh, *backend);
  result.setup_model_seconds = setup[0];
  result.setup_optimizer_seconds = setup[1];
  result.model = plan.model;
  result.dp = plan.dp;
  result.partition = plan.partition.describe();
  TrainingState& state = result.state;
  state.rng_state = tc.seed;
  if (!tc.init_from.empty()) state = load_checkpoint(tc.init_from, model, engine, world);
  state.data_position %= plan.data.rows;

  Table steps = step_table(), ledger_rows = ledger_table();
  // ---- The whole-step communication plan beside the ledger (train/step_comm_config.hpp).
  const auto comm_model = step_comm_model(tc, plan);
  cost::ZeroPaperTraffic paper_traffic;  // rank 0's, after the first step
  // ---- end
  PipelineReport report(plan.schedule, mesh, world);
  const int replica = mesh.comm("dp").rank(), m = plan.schedule.micro_batches;
  const double tokens = static_cast<double>(tc.batch * plan.model.block_size);
  // ---- faults (docs/failures.md): SIGTERM/SIGINT stop the run after a step, agreed by all ranks;
  // a non-finite step is named (and skipped with --skip-nonfinite, else training stops).
  run::StopRequest stop_request;
  std::string nonfinite;  // why training stopped on a non-finite value, "" when it did not
  // ---- end faults
  backend->allocator().tracker().start_window();  // the steps' own peaks (gradients_in_step)
  for (std::int64_t s = 0; s < tc.steps; ++s) {
    const StepTokens batch = step_tokens(plan.data, state.data_position, replica, plan);
    ledger.clear();
    ledger.set_step(state.step + 1);  // faults: named by the collective watchdog
    const auto t0 = std::chrono::steady_clock::now();
    engine.begin_step();
    const StageStepResult run = executor.run_step(batch.micro_batches, model.loss_scale(m));
    engine.finish_gradients();
    const double loss = step_loss(model, mesh, run, m);
    // ---- faults: a non-finite loss (the same on every rank) is diagnosed before the update.
    if (!std::isfinite(loss)) {
      const std::string where = locate_nonfinite_gradient(engine, mesh, *backend, world, true);
      const std::string what = fmt::format("step {}: the loss is {}; first non-finite gradient: {}", state.step + 1,
                                           nonfinite_name(loss), where);
      if (!tc.skip_nonfinite) {
        nonfinite = what;
        break;
      }
      // A skipped step still counts (so step numbers stay unique); its update is not applied.
      result.skipped_nonfinite += 1;
      state.step += 1;
      state.data_position = (state.data_position + tc.batch) % plan.data.rows;
      steps.row()(state.step)(loss)(std::nan(""))(0.0)(0.0);
      if (progress) *progress << "skipped " << what << " (--skip-nonfinite)\n" << std::flush;
      result.stop_signal = run::stop_signal_everywhere(stop_request, world, mesh.wait_policy());
      if (result.stop_signal != 0) break;
      continue;
    }
    // ---- end faults
    const auto t1 = std::chrono::steady_clock::now();
    if (s == 0 && !tc.dump_grads.empty()) {
      ledger.set_enabled(false);
      dump_gradients(tc.dump_grads, model, engine, state.step + 1, loss, world);
      ledger.set_enabled(true);
    }
    const auto t2 = std::chrono::steady_clock::now();
    const double norm = engine.step();
    const auto t3 = std::chrono::steady_clock::now();
    state.step += 1;
    state.data_position = (state.data_position + tc.batch) % plan.data.rows;

    // The slowest rank's step time (the gradient dump excluded).
    StepRecord r{state.step, loss, norm,
                 world_max({std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count()}, mesh, *backend)[0], 0.0};
    r.tokens_per_second = tokens / r.seconds;
    result.steps.push_back(r);
    steps.row()(r.step)(r.loss)(r.grad_norm)(r.seconds)(r.tokens_per_second);
    // ---- The ledger with the model beside it (train/step_comm_config.hpp).
    const std::vector<LedgerStat> stats = reduce_ledger_stats(ledger, world, mesh.wait_policy());
    add_ledger_rows(ledger_rows, r.step, stats, comm_model);
    result.ledger = ledger.summary();
    // ---- end
    report.add_step(r.step, run);
    if (progress)
      *progress << fmt::format("step {:5d}  loss {:.6f}  grad-norm {:.4f}  {:8.1f} ms  {:10.0f} tok/s\n", r.step, r.loss,
                               r.grad_norm, r.seconds * 1e3, r.tokens_per_second)
                << (s == 0 ? ledger_summary(stats, comm_model) + "\n" : std::string())  // the model beside the ledger
                << std::flush;
    // ---- The paper's ZeRO figures beside this rank's ledger and its stage's plan (cost/zero.hpp).
    if (mesh.rank() == 0 && s == 0) {
      std::optional<std::map<LedgerKey, LedgerTotals>> own;
      if (comm_model) own = cost::plan_step_comm(step_comm_config(tc, plan), stage).totals();
      paper_traffic =
          cost::zero_paper_traffic(engine.plan(), tc.zero.stage, m, tc.zero.keep_parameters_for_step,
                                   tc.zero.reduce_per_micro_batch, result.ledger, own ? &*own : nullptr);
      if (progress) *progress << paper_traffic.line() << "\n" << std::flush;
    }
    // ---- end
    // ---- faults: a non-finite gradient norm (global) with a finite loss: the update is applied
    // already, so training stops even with --skip-nonfinite; then a stop signal, agreed by all.
    if (!std::isfinite(norm)) {
      const std::string where = locate_nonfinite_gradient(engine, mesh, *backend, world, false);
      nonfinite = fmt::format("step {}: the gradient norm is {} (the update is applied; --skip-nonfinite skips only "
                              "a non-finite loss); first non-finite gradient: {}",
                              state.step, nonfinite_name(norm), where);
      break;
    }
    if (const int signal = run::stop_signal_everywhere(stop_request, world, mesh.wait_policy()); signal != 0) {
      result.stop_signal = signal;
      break;
    }
    // ---- end faults
  }

  record_memory(result, engine, tc.zero, *backend);
  // ---- activation memory (docs/memory.md): measured beside the model of this stage's schedule.
  result.kept_activations.measured = model.kept_sample().kept_peak;
  result.kept_activations.allocator_at_pass_ends = model.kept_sample().allocator_peak;
  result.kept_activations.model = modelled_kept_peak(model, plan, stage, tc.recompute);
  result.kept_activations.parameters_in_pass = model.kept_sample().parameters_in_pass_peak;
  result.kept_activations.parameters_in_pass_model = modelled_parameters_in_pass(engine, plan, stage, tc.zero);
  result.kept_activations.in_step =
      result.steps.empty() ? 0 : backend->allocator().tracker().window_peak(MemCategory::activations);
  result.kept_activations.in_step_model = modelled_activations_in_step(model, plan, tc.recompute);
  // ---- end activation memory
  result.gradients_in_step.measured =
      result.steps.empty() ? 0 : backend->allocator().tracker().window_peak(MemCategory::gradients);
  result.gradients_in_step.model = modelled_gradients_in_step(engine, plan, stage, tc.zero);
  Table memory = memory_table();
  result.kept_activations.equal_on_every_rank = add_memory_rows(memory, result, stage, mesh, *backend);

  // faults: no checkpoint of a state a non-finite step stopped.
  if (!tc.save.empty() && nonfinite.empty()) save_checkpoint(tc.save, model, engine, state, world);
  if (!tc.out.empty()) {
    // faults: how the run ended (docs/failures.md).
    const std::string stopped_by = !nonfinite.empty()        ? "non-finite"
                                   : result.stop_signal != 0 ? run::signal_name(result.stop_signal)
                                                             : "";
    write_results(tc, plan, mesh, world, *backend, result.skipped_nonfinite, stopped_by, paper_traffic,
                  {result.setup_model_seconds, result.setup_optimizer_seconds},
                  {{"steps", steps}, {"ledger", ledger_rows}, {"pipeline", report.pipeline()},
                   {"timeline", report.timeline()}, {"memory", memory}});
  }
  // faults: every rank holds the same line; main prints it on every rank and exits 2.
  if (!nonfinite.empty())
    throw_error(nonfinite, "; training stopped", tc.out.empty() ? "" : " (results written)",
                tc.save.empty() ? "" : ", no checkpoint saved");
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
