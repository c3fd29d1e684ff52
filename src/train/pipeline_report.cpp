#include "train/pipeline_report.hpp"

#include <array>
#include <vector>

#include "plan/schedule_sim.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

// One rank's summary of a step, as MPI_Gather moves it.
enum Field { kStage, kRepresentative, kBusyF, kBusyB, kBusyW, kWait, kSeconds, kPeakFull, kPeakWeight, kPeakTotal,
             kFieldCount };
// One action of the timeline.
enum ActionField { kOp, kMicrobatch, kChunk, kWaitStart, kStart, kEnd, kActionFieldCount };

double busy(const StageStepResult& r, PassKind kind) {
  double s = 0.0;
  for (const ActionRecord& a : r.timeline)
    if (a.action.op == kind) s += a.end - a.start;
  return s;
}

}  // namespace

PipelineReport::PipelineReport(const Schedule& schedule, const Mesh& mesh, MPI_Comm world)
    : schedule_(schedule), world_(world) {
  MPI_Comm_rank(world, &rank_);
  stage_ = mesh.comm(group::pp).rank();
  representative_ = mesh.comm(group::tp).rank() == 0 && mesh.comm(group::dp).rank() == 0;
  pipeline_.integer("step").integer("stage").integer("rank").real("forward_s").real("backward_input_s")
      .real("backward_weight_s").real("backward_s").real("p2p_wait_s").real("step_s").real("idle_s")
      .real("bubble_measured").real("bubble_model").integer("peak_contexts").integer("peak_full")
      .integer("peak_weight_only").integer("bound_full").integer("bound_total");
  timeline_.integer("step").integer("stage").text("op").integer("microbatch").integer("chunk").real("wait_start_s")
      .real("start_s").real("end_s");
}

void PipelineReport::add_step(std::int64_t step, const StageStepResult& r) {
  std::array<double, kFieldCount> mine{};
  mine[kStage] = stage_;
  mine[kRepresentative] = representative_ ? 1.0 : 0.0;
  mine[kBusyF] = busy(r, PassKind::F);
  mine[kBusyB] = busy(r, PassKind::B);
  mine[kBusyW] = busy(r, PassKind::W) + busy(r, PassKind::BW);
  mine[kWait] = r.p2p_wait;
  mine[kSeconds] = r.seconds;
  mine[kPeakFull] = r.peak_full;
  mine[kPeakWeight] = r.peak_weight_only;
  mine[kPeakTotal] = r.peak_total;
  int world = 1;
  MPI_Comm_size(world_, &world);
  std::vector<double> all(rank_ == 0 ? static_cast<std::size_t>(world) * kFieldCount : 0);
  MPI_Gather(mine.data(), kFieldCount, MPI_DOUBLE, all.data(), kFieldCount, MPI_DOUBLE, 0, world_);

  std::vector<double> actions;
  if (representative_)
    for (const ActionRecord& a : r.timeline)
      actions.insert(actions.end(), {static_cast<double>(static_cast<char>(a.action.op)), double(a.action.microbatch),
                                     double(a.action.chunk), a.wait_start, a.start, a.end});
  int count = static_cast<int>(actions.size());
  std::vector<int> counts(static_cast<std::size_t>(world)), offsets(static_cast<std::size_t>(world));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world_);
  int total = 0;
  for (int i = 0; i < world; ++i) offsets[static_cast<std::size_t>(i)] = total, total += counts[static_cast<std::size_t>(i)];
  std::vector<double> gathered(rank_ == 0 ? static_cast<std::size_t>(total) : 0);
  MPI_Gatherv(actions.data(), count, MPI_DOUBLE, gathered.data(), counts.data(), offsets.data(), MPI_DOUBLE, 0, world_);
  if (rank_ != 0) return;

  // Mean pass times over the representatives' actions, for the model's prediction.
  double sum[4] = {0, 0, 0, 0};
  int n[4] = {0, 0, 0, 0};
  for (int i = 0; i < total; i += kActionFieldCount) {
    const auto op = static_cast<PassKind>(static_cast<char>(gathered[static_cast<std::size_t>(i + kOp)]));
    const int k = op == PassKind::F ? 0 : op == PassKind::B ? 1 : op == PassKind::W ? 2 : 3;
    sum[k] += gathered[static_cast<std::size_t>(i + kEnd)] - gathered[static_cast<std::size_t>(i + kStart)];
    ++n[k];
  }
  auto mean = [&](int k) { return n[k] ? sum[k] / n[k] : 0.0; };
  // A fused BW counts as the backward-input pass: the simulator then charges BW its duration.
  const PassTimes times{mean(0), n[3] ? mean(3) : mean(1), n[3] ? 0.0 : mean(2)};
  const Simulation sim = simulate(schedule_, times);
  const std::vector<PeakContexts> bound = peak_contexts(schedule_);

  for (int rank = 0; rank < world; ++rank) {
    const double* f = &all[static_cast<std::size_t>(rank) * kFieldCount];
    const auto stage = static_cast<std::size_t>(f[kStage]);
    const double step_s = f[kSeconds], busy_s = f[kBusyF] + f[kBusyB] + f[kBusyW];
    const double model = sim.makespan > 0 ? sim.idle[stage] / sim.makespan : 0.0;
    pipeline_.row()(step)(static_cast<std::int64_t>(stage))(static_cast<std::int64_t>(rank))(f[kBusyF])(f[kBusyB])(
        f[kBusyW])(f[kBusyB] + f[kBusyW])(f[kWait])(step_s)(step_s - busy_s)(step_s > 0 ? (step_s - busy_s) / step_s : 0.0)(
        model)(static_cast<std::int64_t>(f[kPeakTotal]))(static_cast<std::int64_t>(f[kPeakFull]))(
        static_cast<std::int64_t>(f[kPeakWeight]))(static_cast<std::int64_t>(bound[stage].full))(
        static_cast<std::int64_t>(bound[stage].total));
  }
  for (int rank = 0; rank < world; ++rank) {
    const int begin = offsets[static_cast<std::size_t>(rank)], end = begin + counts[static_cast<std::size_t>(rank)];
    const auto stage = static_cast<std::int64_t>(all[static_cast<std::size_t>(rank) * kFieldCount + kStage]);
    for (int i = begin; i < end; i += kActionFieldCount) {
      const double* a = &gathered[static_cast<std::size_t>(i)];
      timeline_.row()(step)(stage)(std::string(pass_name(static_cast<PassKind>(static_cast<char>(a[kOp])))))(
          static_cast<std::int64_t>(a[kMicrobatch]))(static_cast<std::int64_t>(a[kChunk]))(a[kWaitStart])(a[kStart])(a[kEnd]);
    }
  }
}

}  // namespace mdtp
