#include "pipeline/executor.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

// Receives posted ahead of the action that needs them: enough to overlap a transfer with the
// action before, few enough that their buffers do not pile up.
constexpr std::size_t kReceiveLookahead = 2;
// MPI guarantees tags up to 32767.  Two messages of one channel that share a tag are still
// matched in order, which the schedule simulator has proved is the right order.
constexpr int kTagSpace = 32768;

}  // namespace

PipelineExecutor::PipelineExecutor(GptModel& model, const Mesh& mesh, Schedule schedule, int stage)
    : model_(model), mesh_(mesh), schedule_(std::move(schedule)), stage_(stage),
      virtual_stages_(schedule_.virtual_stages()), link_(model, mesh) {
  require(mesh.comm(group::pp).size() == schedule_.stages, "pipeline: the schedule has ", schedule_.stages,
          " stages but the mesh's pp group has ", mesh.comm(group::pp).size(), " ranks");
  require(stage >= 0 && stage < schedule_.stages, "pipeline: stage ", stage, " is outside [0, ", schedule_.stages, ")");
  require(static_cast<int>(model.chunks().size()) == schedule_.chunks, "pipeline: the model holds ",
          model.chunks().size(), " chunks; the schedule runs ", schedule_.chunks, " per stage");
  last_weight_pass_ = last_weight_actions(schedule_, stage_);
}

bool PipelineExecutor::needs_input(const Action& a) const {
  const int vs = virtual_stage(a);
  if (a.op == PassKind::F) return !schedule_.first(vs);
  if (a.op == PassKind::B || a.op == PassKind::BW) return !schedule_.last(vs);
  return false;
}

int PipelineExecutor::input_source(const Action& a) const {
  return a.op == PassKind::F ? virtual_stage(a) - 1 : virtual_stage(a) + 1;
}

void PipelineExecutor::pass_on(const Tensor& x, char direction, int microbatch, int from_vs, int to_vs) {
  const int peer = schedule_.stage_of(to_vs);
  if (peer == stage_) {  // the bottom of a V: the next chunk runs here, no transfer
    local_handoffs_.emplace(std::make_tuple(direction, microbatch, from_vs), x);
    return;
  }
  PhaseScope phase(mesh_.ledger(), phase::pipeline);
  sends_.push_back(link_.send(x, peer, tag(direction, microbatch, from_vs)));
}

int PipelineExecutor::tag(char direction, int microbatch, int virtual_stage) const {
  return ((microbatch * virtual_stages_ + virtual_stage) * 2 + (direction == 'F' ? 0 : 1)) % kTagSpace;
}

void PipelineExecutor::post_receives_ahead(std::size_t from) {
  const auto& list = schedule_.actions[static_cast<std::size_t>(stage_)];
  next_receive_ = std::max(next_receive_, from);
  PhaseScope phase(mesh_.ledger(), phase::pipeline);
  while (receives_.size() < kReceiveLookahead && next_receive_ < list.size()) {
    const Action& a = list[next_receive_];
    const int source_vs = input_source(a);
    if (needs_input(a) && schedule_.stage_of(source_vs) != stage_)
      receives_.emplace(next_receive_, link_.post_receive(schedule_.stage_of(source_vs),
                                                          tag(a.op == PassKind::F ? 'F' : 'B', a.microbatch, source_vs)));
    ++next_receive_;
  }
}

void PipelineExecutor::poll() {
  for (auto& r : receives_) r.second.handle.test();
  while (!sends_.empty() && sends_.front().handle.test()) sends_.pop_front();
  for (auto& s : sends_) s.handle.test();
}

void PipelineExecutor::count_contexts(StageStepResult& out) const {
  int full = 0, weight_only = 0;
  for (const auto& [key, slot] : slots_) (slot.input_done ? weight_only : full) += 1;
  out.peak_full = std::max(out.peak_full, full);
  out.peak_weight_only = std::max(out.peak_weight_only, weight_only);
  out.peak_total = std::max(out.peak_total, full + weight_only);
}

void PipelineExecutor::run_action(const Action& a, const std::vector<MicroBatch>& mbs, double loss_scale,
                                  StageStepResult& out) {
  const std::size_t index = out.timeline.size();
  const int vs = virtual_stage(a);
  ModelChunk& chunk = model_.chunk(static_cast<std::size_t>(a.chunk));
  const std::pair<int, int> key{a.microbatch, a.chunk};
  const bool last_weight = last_weight_pass_[static_cast<std::size_t>(a.chunk)] == static_cast<int>(index);
  ActionRecord rec{a, now(), 0.0, 0.0};

  Tensor input;
  if (needs_input(a)) {
    const auto local = local_handoffs_.find(std::make_tuple(a.op == PassKind::F ? 'F' : 'B', a.microbatch, input_source(a)));
    if (local != local_handoffs_.end()) {
      input = std::move(local->second);
      local_handoffs_.erase(local);
    } else {
      PhaseScope phase(mesh_.ledger(), phase::pipeline);
      input = link_.complete(receives_.at(index));
      receives_.erase(index);
    }
  }
  rec.start = now();
  out.p2p_wait += rec.start - rec.wait_start;
  // Sends the input gradient back upstream (virtual stage vs − 1), as soon as it exists.
  auto send_back = [&](const Tensor& dx) {
    if (!schedule_.first(vs)) pass_on(dx, 'B', a.microbatch, vs, vs - 1);
  };
  switch (a.op) {
    case PassKind::F: {
      require(slots_.count(key) == 0, "pipeline: micro-batch ", a.microbatch, " of chunk ", a.chunk,
              " is forwarded twice in one step");
      Slot& slot = slots_[key];
      double local = 0.0;
      Tensor y;
      {
        PhaseScope phase(mesh_.ledger(), phase::forward);
        y = chunk.forward(input, mbs.at(static_cast<std::size_t>(a.microbatch)), slot.saved, &local);
      }
      if (schedule_.last(vs)) {
        out.loss_sum += local;
        out.loss_by_micro_batch.at(static_cast<std::size_t>(a.microbatch)) += local;
      }
      else
        pass_on(y, 'F', a.microbatch, vs, vs + 1);
      break;
    }
    case PassKind::BW:
      if (fused_backward_unit_by_unit(schedule_, stage_, a.chunk)) {  // nothing to send upstream
        PhaseScope phase(mesh_.ledger(), phase::backward);
        chunk.backward(input, loss_scale, slots_.at(key).saved, last_weight);
        slots_.erase(key);
        break;
      }
      [[fallthrough]];
    case PassKind::B: {
      Slot& slot = slots_.at(key);
      Tensor dx;
      {
        PhaseScope phase(mesh_.ledger(), phase::backward);
        dx = chunk.backward_input(input, loss_scale, slot.saved);
      }
      send_back(dx);
      slot.input_done = true;
      if (a.op == PassKind::B) break;
      PhaseScope phase(mesh_.ledger(), phase::backward);
      chunk.backward_weight(slot.saved, last_weight);
      slots_.erase(key);
      break;
    }
    case PassKind::W: {
      PhaseScope phase(mesh_.ledger(), phase::backward);
      chunk.backward_weight(slots_.at(key).saved, last_weight);
      slots_.erase(key);
      break;
    }
  }
  rec.end = now();
  count_contexts(out);
  out.timeline.push_back(rec);
}

StageStepResult PipelineExecutor::run_step(const std::vector<MicroBatch>& micro_batches, double loss_scale) {
  require(static_cast<int>(micro_batches.size()) == schedule_.micro_batches, "pipeline: a step of the ",
          schedule_name(schedule_.kind), " schedule runs ", schedule_.micro_batches, " micro-batches; got ",
          micro_batches.size());
  step_start_ = Clock::now();
  slots_.clear();
  local_handoffs_.clear();
  receives_.clear();
  sends_.clear();
  next_receive_ = 0;
  StageStepResult out;
  out.loss_by_micro_batch.assign(static_cast<std::size_t>(schedule_.micro_batches), 0.0);
  const auto& list = schedule_.actions[static_cast<std::size_t>(stage_)];
  post_receives_ahead(0);
  for (std::size_t i = 0; i < list.size(); ++i) {
    run_action(list[i], micro_batches, loss_scale, out);
    poll();
    post_receives_ahead(i + 1);
  }
  for (auto& s : sends_) s.handle.wait();
  sends_.clear();
  require(slots_.empty() && receives_.empty() && local_handoffs_.empty(), "pipeline: the ", schedule_name(schedule_.kind),
          " schedule left micro-batches unfinished on stage ", stage_);
  out.seconds = now();
  return out;
}

}  // namespace mdtp
