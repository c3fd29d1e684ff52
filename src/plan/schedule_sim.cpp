#include "plan/schedule_sim.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.hpp"

namespace mdtp {
namespace {

// (micro-batch, virtual stage) → (stage, index in its action list), per pass kind.
struct Key {
  int microbatch, virtual_stage;
  char kind;  // 'F' forward, 'B' the backward-input half (of B or BW), 'W' the weight half (of W or BW)
  auto tie() const { return std::tie(microbatch, virtual_stage, kind); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Located {
  int stage, index;
};

std::string describe(const Action& a, int virtual_stage) {
  std::ostringstream os;
  os << pass_name(a.op) << "(micro-batch " << a.microbatch << ", chunk " << a.chunk << ", virtual stage "
     << virtual_stage << ")";
  return os.str();
}

std::map<Key, Located> index_actions(const Schedule& s) {
  std::map<Key, Located> where;
  for (int r = 0; r < s.stages; ++r) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      const int vs = s.virtual_stage(r, a.chunk);
      auto add = [&](char kind) {
        // The message is built only on failure: this runs for every pass of every schedule the
        // planner prices.
        if (!where.emplace(Key{a.microbatch, vs, kind}, Located{r, i}).second)
          throw_error("schedule ", schedule_name(s.kind), ": stage ", r, " runs ", describe(a, vs), " twice");
      };
      if (a.op == PassKind::F) add('F');
      if (a.op == PassKind::B || a.op == PassKind::BW) add('B');
      if (a.op == PassKind::W || a.op == PassKind::BW) add('W');
    }
  }
  for (int mb = 0; mb < s.micro_batches; ++mb)
    for (int vs = 0; vs < s.virtual_stages(); ++vs)
      for (char kind : {'F', 'B', 'W'})
        require(where.count(Key{mb, vs, kind}) == (s.visits(mb, vs) ? 1u : 0u), "schedule ", schedule_name(s.kind),
                s.visits(mb, vs) ? ": no " : ": an unexpected ", kind, " pass of micro-batch ", mb, " on virtual stage ",
                vs);
  return where;
}

// The message an action receives (or sends), as the channel sees it.
struct Message {
  int microbatch, virtual_stage;  // of the producing pass
  bool operator==(const Message&) const = default;
};

// Sends and receives per (source, destination, direction) channel in each stage's action order;
// the two sequences of a channel must be equal.
void check_channels(const Schedule& s) {
  using Channel = std::tuple<int, int, char>;
  std::map<Channel, std::vector<Message>> sent, received;
  for (int r = 0; r < s.stages; ++r)
    for (const Action& a : s.actions[static_cast<std::size_t>(r)]) {
      const int vs = s.virtual_stage(r, a.chunk);
      // A hand-off between two chunks of one stage (the bottom of a V) stays on the stage: no
      // channel, and the executor matches it by (micro-batch, virtual stage), not by order.
      auto link = [&](std::map<Channel, std::vector<Message>>& side, int src, int dst, char dir, Message msg) {
        if (src != dst) side[{src, dst, dir}].push_back(msg);
      };
      if (a.op == PassKind::F) {
        if (!s.first(vs)) link(received, s.stage_of(vs - 1), r, 'F', {a.microbatch, vs - 1});
        if (!s.last(vs)) link(sent, r, s.stage_of(vs + 1), 'F', {a.microbatch, vs});
      }
      if (a.op == PassKind::B || a.op == PassKind::BW) {
        if (!s.last(vs)) link(received, s.stage_of(vs + 1), r, 'B', {a.microbatch, vs + 1});
        if (!s.first(vs)) link(sent, r, s.stage_of(vs - 1), 'B', {a.microbatch, vs});
      }
    }
  for (const auto& [channel, sends] : sent) {
    const auto& recvs = received[channel];
    const auto [src, dst, dir] = channel;
    require(sends.size() == recvs.size(), "schedule ", schedule_name(s.kind), ": channel ", src, "→", dst, " (",
            dir == 'F' ? "activations" : "gradients", ") has ", sends.size(), " sends and ", recvs.size(), " receives");
    for (std::size_t k = 0; k < sends.size(); ++k)
      require(sends[k] == recvs[k], "schedule ", schedule_name(s.kind), ": on channel ", src, "→", dst, " (",
              dir == 'F' ? "activations" : "gradients", ") receive #", k, " expects micro-batch ", recvs[k].microbatch,
              " of virtual stage ", recvs[k].virtual_stage, " but send #", k, " carries micro-batch ",
              sends[k].microbatch, " of virtual stage ", sends[k].virtual_stage,
              " (first-in first-out matching would mix them up)");
  }
}

double duration(PassKind op, const PassTimes& t) {
  switch (op) {
    case PassKind::F: return t.forward;
    case PassKind::B: return t.backward_input;
    case PassKind::W: return t.backward_weight;
    case PassKind::BW: return t.backward_input + t.backward_weight;
  }
  return 0.0;
}

}  // namespace

double Simulation::bubble_over_busy() const {
  double worst = 0.0;
  for (std::size_t r = 0; r < busy.size(); ++r)
    if (busy[r] > 0) worst = std::max(worst, idle[r] / busy[r]);
  return worst;
}

Simulation simulate(const Schedule& s, const PassTimes& t, double transfer) {
  require(t.forward >= 0 && t.backward_input >= 0 && t.backward_weight >= 0 && transfer >= 0,
          "pass times and the transfer time must be >= 0");
  const std::map<Key, Located> where = index_actions(s);
  check_channels(s);
  constexpr double kNotYet = -1.0;
  Simulation sim;
  sim.times.resize(static_cast<std::size_t>(s.stages));
  for (int r = 0; r < s.stages; ++r)
    sim.times[static_cast<std::size_t>(r)].assign(s.actions[static_cast<std::size_t>(r)].size(), {kNotYet, kNotYet});
  // When the input of a pass is available on `stage`, or kNotYet.
  auto ready_at = [&](const Key& dep, int stage) -> double {
    const Located l = where.at(dep);
    const double end = sim.times[static_cast<std::size_t>(l.stage)][static_cast<std::size_t>(l.index)].end;
    if (end == kNotYet) return kNotYet;
    return end + (l.stage == stage ? 0.0 : transfer);
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(s.stages), 0);
  std::vector<double> free_at(static_cast<std::size_t>(s.stages), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < s.stages; ++r) {
      auto& i = next[static_cast<std::size_t>(r)];
      const auto& list = s.actions[static_cast<std::size_t>(r)];
      while (i < list.size()) {
        const Action& a = list[i];
        const int vs = s.virtual_stage(r, a.chunk);
        double input = 0.0;
        if (a.op == PassKind::F && !s.first(vs)) input = ready_at({a.microbatch, vs - 1, 'F'}, r);
        if (a.op == PassKind::B || a.op == PassKind::BW)
          input = !s.last(vs) ? ready_at({a.microbatch, vs + 1, 'B'}, r) : ready_at({a.microbatch, vs, 'F'}, r);
        if (a.op == PassKind::W) input = ready_at({a.microbatch, vs, 'B'}, r);
        if (input == kNotYet) break;
        ActionTiming& at = sim.times[static_cast<std::size_t>(r)][i];
        at.start = std::max(free_at[static_cast<std::size_t>(r)], input);
        at.end = at.start + duration(a.op, t);
        free_at[static_cast<std::size_t>(r)] = at.end;
        ++i;
        progress = true;
      }
    }
  }
  std::ostringstream stuck;
  for (int r = 0; r < s.stages; ++r) {
    const std::size_t i = next[static_cast<std::size_t>(r)];
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    if (i < list.size()) stuck << " stage " << r << " waits at " << describe(list[i], s.virtual_stage(r, list[i].chunk)) << ";";
  }
  require(stuck.str().empty(), "schedule ", schedule_name(s.kind), " deadlocks:", stuck.str());

  double first = std::numeric_limits<double>::infinity(), last = 0.0;
  for (int r = 0; r < s.stages; ++r) {
    double busy = 0.0;
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const ActionTiming& at = sim.times[static_cast<std::size_t>(r)][i];
      busy += at.end - at.start;
      first = std::min(first, at.start);
      last = std::max(last, at.end);
    }
    sim.busy.push_back(busy);
  }
  sim.makespan = last - first;
  for (double b : sim.busy) sim.idle.push_back(sim.makespan - b);
  for (const PeakContexts& p : peak_contexts(s)) {
    sim.peak_full.push_back(p.full);
    sim.peak_weight_only.push_back(p.weight_only);
  }
  return sim;
}

std::vector<PeakContexts> peak_contexts(const Schedule& s) {
  std::vector<PeakContexts> out;
  for (const auto& list : s.actions) {
    int full = 0, weight_only = 0;
    PeakContexts peak;
    for (const Action& a : list) {
      if (a.op == PassKind::F) ++full;
      if (a.op == PassKind::B) --full, ++weight_only;
      if (a.op == PassKind::BW) --full;
      if (a.op == PassKind::W) --weight_only;
      peak.full = std::max(peak.full, full);
      peak.weight_only = std::max(peak.weight_only, weight_only);
      peak.total = std::max(peak.total, full + weight_only);
    }
    out.push_back(peak);
  }
  return out;
}

}  // namespace mdtp
