#include "train/memory_audit.hpp"

#include "model/activation_timeline.hpp"
#include "plan/activation_peak.hpp"
#include "plan/bucket_memory.hpp"
#include "plan/gathered_parameters.hpp"
#include "plan/gradient_peak.hpp"
#include "plan/kept_activations.hpp"
#include "plan/unit_passes.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

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
  // The kept contexts' peak over the pass ends with its model, and the allocator's `activations`
  // counter at those points (it adds the boundary tensors in flight, so it is reported beside,
  // not modelled).
  const TrainResult::KeptActivations& k = result.kept_activations;
  rows.push_back({"activations_kept", 0, k.measured, k.model, true});
  rows.push_back({"activations_at_pass_ends", 0, k.allocator_at_pass_ends, -1});
  rows.push_back({"parameters_in_pass", 0, k.parameters_in_pass, k.parameters_in_pass_model, true});
  rows.push_back({"activations_in_step", 0, k.in_step, k.in_step_model, k.in_step_model >= 0});
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
  Communicator& world = mesh.comm(group::world);
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

// What a recomputation policy keeps (mdtp's attention kernels keep the
// probabilities: selective recomputation drops them).
KeepPolicy keep_policy(Recompute policy) {
  KeepPolicy keep;
  keep.block_input_only = policy == Recompute::full;
  keep.attention_probabilities = policy == Recompute::none;
  return keep;
}

// The model's local shapes, with what its block family changes (a gated MLP, no position table,
// RMSNorm's scratch row).
ActivationShapes activation_shapes(const GptModel& model, const TrainPlan& plan) {
  ActivationShapes a = model.activation_shapes();
  set_block_family(a, plan.spec.model, static_cast<std::int64_t>(dtype_size(plan.spec.precision.grad_reduce)));
  return a;
}

// The kept-activation peak of this stage's schedule from the model's local shapes.
std::int64_t modelled_kept_peak(const GptModel& model, const TrainPlan& plan, int stage, Recompute policy) {
  std::vector<UnitKeptBytes> units;
  for (const UnitActivationBytes& u :
       unit_activation_bytes(activation_shapes(model, plan), plan.spec.model.layers, keep_policy(policy)))
    units.push_back({u.after_forward, u.after_input});
  return kept_activations(plan.schedule, plan.partition, stage, units).peak;
}

// The allocator's `activations` peak inside a step without a pipeline: one micro-batch's passes
// replayed from the layers (model/activation_timeline.hpp) over the schedule; -1 with a pipeline.
std::int64_t modelled_activations_in_step(const GptModel& model, const TrainPlan& plan, Recompute policy) {
  if (plan.schedule.stages != 1 || plan.schedule.chunks != 1) return -1;
  const MicroBatchActivationPeaks p =
      micro_batch_activation_peaks(activation_shapes(model, plan), plan.spec.model.layers, keep_policy(policy));
  return activation_peak(plan.schedule, {p.forward_peak, p.after_forward, p.input_peak, p.after_input, p.fused_peak});
}

// Each bucket's full (padded) bytes of values or of gradients, in bucket order: what a gathered
// bucket of parameters, or a full gradient bucket, holds.
std::vector<std::int64_t> bucket_bytes(const BucketPlan& plan, std::int64_t (Bucket::*bytes)() const) {
  std::vector<std::int64_t> out;
  for (const Bucket& b : plan.buckets) out.push_back((b.*bytes)());
  return out;
}

// What the bucket plan says this rank holds in the training backend's allocator: all of it on the
// host backend; on a GPU, less what offload keeps in host memory (the engine's own host backend,
// whose allocator this audit does not read).
ZeroHeldBytes modelled_held(const ZeroEngine& engine, const ZeroConfig& zero, const Backend& backend) {
  const bool state_elsewhere = zero.offload && backend.device() != DeviceKind::host;
  return state_elsewhere ? zero_device_bytes(engine.plan(), zero.stage, zero.offload, engine.has_moments())
                         : zero_held_bytes(engine.plan(), zero.stage, zero.offload, engine.has_moments());
}

// The `parameters` counter inside a pass: what the bucket plan says is held, plus ZeRO-3's gathered
// buckets (those the pass reads and those of the next pass, in the order the engine prefetches).
std::int64_t modelled_parameters_in_pass(const ZeroEngine& engine, const TrainPlan& plan, int stage,
                                         const ZeroConfig& zero, const Backend& backend) {
  const std::int64_t held = modelled_held(engine, zero, backend).parameters;
  if (zero.stage < 3) return held;
  std::vector<std::vector<std::size_t>> reads;
  for (const UnitPass& p : stage_unit_passes(plan.schedule, plan.partition, stage))
    reads.push_back(p.direction > 0 ? engine.layout().forward_reads(p.unit) : engine.layout().backward_reads(p.unit));
  return held + gathered_parameter_peak(reads, bucket_bytes(engine.plan(), &Bucket::value_bytes), zero.keep_parameters);
}

// The `gradients` counter's peak inside a step: what the bucket plan says is held, plus, at stages
// 2–3, the full gradient buckets held at once (plan/gradient_peak.hpp); stages 0–1 hold their
// gradients whole throughout.
std::int64_t modelled_gradients_in_step(const ZeroEngine& engine, const TrainPlan& plan, int stage,
                                        const ZeroConfig& zero, const Backend& backend) {
  const std::int64_t held = modelled_held(engine, zero, backend).gradients;
  if (zero.stage < 2) return held;
  return held + full_gradient_peak(stage_gradient_events(plan.schedule, plan.partition, stage,
                                                         zero.reduce_per_micro_batch),
                                   engine.layout().writers(), bucket_bytes(engine.plan(), &Bucket::grad_bytes));
}

// What this rank holds per category after the run, its peaks, and the bucket plan's model.
void record_memory(TrainResult& result, const ZeroEngine& engine, const ZeroConfig& zero, const Backend& backend) {
  const MemoryTracker& tracker = backend.allocator().tracker();
  const ZeroHeldBytes held = modelled_held(engine, zero, backend);
  for (std::size_t c = 0; c < kMemCategoryCount; ++c) {
    const auto category = static_cast<MemCategory>(c);
    result.memory_held.emplace_back(category, tracker.current(category));
    result.memory_model.emplace_back(category, modelled(held, category));
    result.memory_peak.emplace_back(category, tracker.peak(category));
  }
}

}  // namespace

Table audit_memory(TrainResult& result, TrainRig& rig, const TrainPlan& plan) {
  const GptModel& model = rig.model();
  const ZeroEngine& engine = rig.engine();
  const MemoryTracker& tracker = rig.backend().allocator().tracker();
  const bool stepped = !result.steps.empty();
  record_memory(result, engine, plan.zero, rig.backend());
  // Activation memory: measured beside the model of this stage's schedule.
  TrainResult::KeptActivations& k = result.kept_activations;
  k.measured = model.kept_sample().kept_peak;
  k.allocator_at_pass_ends = model.kept_sample().allocator_peak;
  k.model = modelled_kept_peak(model, plan, rig.stage(), plan.spec.recompute);
  k.parameters_in_pass = model.kept_sample().parameters_in_pass_peak;
  k.parameters_in_pass_model = modelled_parameters_in_pass(engine, plan, rig.stage(), plan.zero, rig.backend());
  k.in_step = stepped ? tracker.window_peak(MemCategory::activations) : 0;
  k.in_step_model = modelled_activations_in_step(model, plan, plan.spec.recompute);
  result.gradients_in_step.measured = stepped ? tracker.window_peak(MemCategory::gradients) : 0;
  result.gradients_in_step.model = modelled_gradients_in_step(engine, plan, rig.stage(), plan.zero, rig.backend());
  Table memory = memory_table();
  k.equal_on_every_rank = add_memory_rows(memory, result, rig.stage(), rig.mesh(), rig.backend());
  return memory;
}

}  // namespace mdtp
