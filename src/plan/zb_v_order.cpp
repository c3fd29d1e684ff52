// The ZB-V order (zb_v_order.hpp): a list scheduler that places every stage's passes one at a time,
// keeping the clock of each stage, and whose choices reproduce the zero-bubble authors' greedy
// search.  Its outline:
//   1. warm-up: the first micro-batches' forwards down the V, stage r taking first-leg forwards
//      while it would otherwise wait for its second-leg activation;
//   2. staircase: every stage brought level with the one above it in forwards;
//   3. 2m rounds, each one B and at most one F per stage, W's put into the waits before them;
//   4. the W's still due, in order.
// The search runs under four pairs of fill policies, each retried while retrying lowers the worst
// idle time, and keeps the first with the least.
#include "plan/zb_v_order.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <utility>

#include "core/error.hpp"

namespace mdtp {
namespace {

// Inside the search a pass is named by its kind and its leg, not its chunk: forwards traverse
// chunk 0 then chunk 1, while backwards start at the loss and traverse chunk 1 then chunk 0.  By
// leg, both read the same — a leg-0 pass takes its input from stage r − 1, a leg-1 pass from
// stage r + 1 — so one set of rules serves F and B.
enum Kind { kForward = 0, kBackward = 1, kWeight = 2 };
constexpr int kKinds = 3;
constexpr int kLegs = 2;

int chunk_of(Kind kind, int leg) { return kind == kForward ? leg : 1 - leg; }

PassKind pass_kind(Kind kind) {
  switch (kind) {
    case kForward: return PassKind::F;
    case kBackward: return PassKind::B;
    case kWeight: return PassKind::W;
  }
  return PassKind::F;
}

// The reference's c, f_mem, b_mem and w_mem as the order is pinned: transfers take no time, and
// memory is counted in contexts — an F stores one, a W frees it.  The context budget of a stage is
// 2p forwards' worth (the reference's default max_mem).  The pass times (f, b, w) are the caller's.
constexpr int kTransferTime = 0;
constexpr std::array<int, kKinds> kContextChange{1, 0, -1};

constexpr int kNotIssued = -1;

struct Pass {
  Kind kind;
  int leg;
  int microbatch;
};

// Where a pass's input comes from: (kind, leg) on `stage`, the same micro-batch.
struct Producer {
  Kind kind;
  int leg;
  int stage;
};

struct StageState {
  int clock = 0;     // when the last pass issued to the stage ends
  int contexts = 0;  // contexts held (forwards run whose W has not)
  int idle = 0;      // time spent waiting since the stage's first pass
  std::array<std::array<int, kLegs>, kKinds> issued{};  // per (kind, leg): passes issued, i.e. the next micro-batch
  std::deque<int> weights_due;                          // legs of the B's run whose W has not, oldest first
  std::vector<Pass> order;
};

struct Attempt {
  std::vector<std::vector<Pass>> orders;  // per stage
  std::vector<int> idle;                  // per stage
  int worst_idle = 0;
};

// The search's two free choices, tried in all four combinations: before a first-leg B, and before
// an F, may a W that does not fit in the wait still go in front (delaying the pass rather than
// letting the stage idle)?  Before a second-leg B it always may.
struct FillPolicy {
  bool before_first_leg_backward = true;
  bool before_forward = true;
};

class VGreedy {
 public:
  // `earlier_idle`: the per-stage idle times of the attempt this one retries, or null.
  VGreedy(int stages, int micro_batches, const ZbVPassTimes& times, FillPolicy policy,
          const std::vector<int>* earlier_idle)
      : p_(stages),
        m_(micro_batches),
        pass_time_{times.forward, times.backward_input, times.weight},
        policy_(policy),
        earlier_idle_(earlier_idle),
        context_budget_(2 * stages * kContextChange[kForward]),
        stages_(static_cast<std::size_t>(stages)),
        finish_(static_cast<std::size_t>(kKinds * kLegs * stages * micro_batches), kNotIssued) {}

  Attempt run() {
    warm_up();
    level_staircase();
    for (int round = 0; round < 2 * m_; ++round) {
      backward_round();
      forward_round();
    }
    for (int r = 0; r < p_; ++r)
      while (!stage(r).weights_due.empty()) issue_weight(r);

    Attempt out;
    for (const StageState& s : stages_) {
      out.orders.push_back(s.order);
      out.idle.push_back(s.idle);
      out.worst_idle = std::max(out.worst_idle, s.idle);
    }
    return out;
  }

 private:
  StageState& stage(int r) { return stages_[static_cast<std::size_t>(r)]; }

  int& finish(Kind kind, int leg, int r, int microbatch) {
    const int index = ((kind * kLegs + leg) * p_ + r) * m_ + microbatch;
    return finish_[static_cast<std::size_t>(index)];
  }
  bool issued(Kind kind, int leg, int r, int microbatch) { return finish(kind, leg, r, microbatch) != kNotIssued; }

  // The greedy's own consistency: the rules below never issue a pass before its input or beyond
  // the budget for p ≥ 2, m ≥ p; a failure here is a bug, reported rather than ignored.
  void check(bool ok, const char* what) const {
    require(ok, "zb-v order: the greedy ", what, " (p=", p_, ", m=", m_, "); this is a bug");
  }

  // The V's dependencies; nothing for the very first pass of the model (leg-0 F on stage 0).
  std::optional<Producer> producer(Kind kind, int leg, int r) const {
    if (kind == kWeight) return Producer{kBackward, leg, r};
    if (leg == 0) {
      if (r > 0) return Producer{kind, 0, r - 1};
      if (kind == kBackward) return Producer{kForward, 1, 0};  // at the loss, B follows its own F
      return std::nullopt;
    }
    if (r < p_ - 1) return Producer{kind, 1, r + 1};
    return Producer{kind, 0, r};  // the turn of the V: the second leg follows this stage's first
  }

  // When the input of the next (kind, leg) pass of stage r arrives from a neighbouring stage, or
  // nothing when it is made on stage r itself (then it never makes the stage wait).
  std::optional<int> arrival_from_neighbour(Kind kind, int leg, int r) {
    const std::optional<Producer> from = producer(kind, leg, r);
    if (!from || from->stage == r) return std::nullopt;
    const int microbatch = stage(r).issued[kind][leg];
    check(issued(from->kind, from->leg, from->stage, microbatch), "looked at an input not yet issued");
    return finish(from->kind, from->leg, from->stage, microbatch) + kTransferTime;
  }

  // Appends the next (kind, leg) pass to stage r: it starts when the stage is free and its input
  // has arrived.
  void issue(Kind kind, int leg, int r) {
    StageState& s = stage(r);
    const int microbatch = s.issued[kind][leg];
    check(microbatch < m_, "ran out of micro-batches");
    check(s.contexts + kContextChange[kind] <= context_budget_, "went over the context budget");
    int start = s.clock;
    if (const std::optional<Producer> from = producer(kind, leg, r)) {
      check(issued(from->kind, from->leg, from->stage, microbatch), "issued a pass before its input");
      const int transfer = from->stage == r ? 0 : kTransferTime;
      start = std::max(start, finish(from->kind, from->leg, from->stage, microbatch) + transfer);
    }
    if (!s.order.empty()) s.idle += start - s.clock;  // waiting for the first pass is start-up, not bubble
    s.clock = start + pass_time_[kind];
    finish(kind, leg, r, microbatch) = s.clock;
    s.contexts += kContextChange[kind];
    s.order.push_back({kind, leg, microbatch});
    if (kind == kBackward) s.weights_due.push_back(leg);
    ++s.issued[kind][leg];
  }

  void issue_weight(int r) {
    StageState& s = stage(r);
    check(!s.weights_due.empty(), "needed a W with none due");
    const int leg = s.weights_due.front();
    s.weights_due.pop_front();
    issue(kWeight, leg, r);
  }

  void free_contexts_for(Kind kind, int r) {
    while (stage(r).contexts + kContextChange[kind] > context_budget_) issue_weight(r);
  }

  // How much idle time stage r may still accept before a W goes in front of a pass that would
  // otherwise wait: as much as the worst stage has idled so far, and on a retry at least the
  // headroom this stage had under the earlier attempt's worst (stages that idled little before may
  // now take more, so the waits spread out rather than pile up on one stage).
  int idle_allowance(int r) {
    int allowance = 0;
    for (const StageState& s : stages_) allowance = std::max(allowance, s.idle);
    if (earlier_idle_ != nullptr) {
      const int earlier_worst = *std::max_element(earlier_idle_->begin(), earlier_idle_->end());
      allowance = std::max(allowance, earlier_worst - (*earlier_idle_)[static_cast<std::size_t>(r)]);
    }
    return allowance - stage(r).idle;
  }

  // Before a pass whose input arrives at `arrival`: W's that end by then run in the wait; one more
  // may run past it (delaying the pass) when the wait left is more idle than the stage may accept.
  // A pass whose input is made on its own stage never waits, so nothing is filled.  (The reference
  // compares such a pass against an unset end time, -1; with transfers free that never fills
  // either, so the orders agree — a transfer time would have to revisit this.)
  void fill_wait(int r, std::optional<int> arrival, bool may_delay_pass) {
    if (!arrival) return;
    StageState& s = stage(r);
    while (!s.weights_due.empty() && *arrival >= s.clock + pass_time_[kWeight]) issue_weight(r);
    if (may_delay_pass && !s.weights_due.empty() && *arrival - s.clock > idle_allowance(r)) issue_weight(r);
  }

  // 1. Every stage runs micro-batch 0's first-leg forward; then, from the turn of the V up to
  // stage 0, stage r runs its second-leg forward of micro-batch 0 — but first, while that
  // activation is still on its way from stage r + 1 and memory leaves 2(r + 1) contexts spare,
  // one more first-leg forward, issued on every stage 0 … r because each needs the one above it.
  void warm_up() {
    for (int r = 0; r < p_; ++r) issue(kForward, 0, r);
    for (int r = p_ - 1; r >= 0; --r) {
      if (r < p_ - 1) {
        const int arrival = finish(kForward, 1, r + 1, 0) + kTransferTime;
        const StageState& s = stage(r);
        while (s.contexts + kContextChange[kForward] * (2 + 2 * r) <= context_budget_ &&
               s.clock + pass_time_[kForward] <= arrival && s.issued[kForward][0] < m_)
          for (int above = 0; above <= r; ++above) issue(kForward, 0, above);
      }
      issue(kForward, 1, r);
    }
  }

  // 2. Stage 0 now leads in forwards.  Going down, stage r is brought level with stage r − 1: as
  // many forwards in all, and more second-leg ones (until r − 1 has run them all).  Each sweep
  // issues one forward on stages p − 1 … r, bottom first so that a second-leg input exists before
  // the stage above uses it, alternating the leg between sweeps as the steady state does.
  void level_staircase() {
    int leg = 0;
    for (int r = 1; r < p_; ++r) {
      const auto& here = stage(r).issued[kForward];
      const auto& above = stage(r - 1).issued[kForward];
      while (here[0] + here[1] < above[0] + above[1] || (here[1] <= above[1] && above[1] < m_)) {
        for (int below = p_ - 1; below >= r; --below)
          if (stage(below).issued[kForward][leg] < m_) issue(kForward, leg, below);
        leg = 1 - leg;
      }
    }
  }

  // The leg of stage r's next B: the first leg unless the second has one ready to run — its
  // input from stage r + 1 issued (on the last stage, its own first-leg B) — or the first leg has
  // none left.  The second leg of a micro-batch never overtakes its first.
  int next_backward_leg(int r) {
    const auto& n = stage(r).issued[kBackward];
    if (n[1] >= n[0]) return 0;
    if (r == p_ - 1) return 1;
    if (n[0] >= m_ || issued(kBackward, 1, r + 1, n[1])) return 1;
    return 0;
  }

  // 3a. One B on every stage.  Second-leg B's go first, from the last stage up, then first-leg
  // ones from stage 0 down: each stage's input in this round is then issued before it is needed.
  void backward_round() {
    for (int r = 0; r < p_; ++r) free_contexts_for(kBackward, r);
    std::vector<int> second_leg, first_leg;
    for (int r = 0; r < p_; ++r) (next_backward_leg(r) == 1 ? second_leg : first_leg).push_back(r);
    std::vector<std::pair<int, int>> turns;  // (stage, leg)
    for (auto r = second_leg.rbegin(); r != second_leg.rend(); ++r) turns.emplace_back(*r, 1);
    for (int r : first_leg) turns.emplace_back(r, 0);
    for (const auto& [r, leg] : turns) {
      fill_wait(r, arrival_from_neighbour(kBackward, leg, r), leg == 1 || policy_.before_first_leg_backward);
      issue(kBackward, leg, r);
    }
  }

  // The leg of stage r's next F, or nothing when neither leg's input has been issued.  The second
  // leg goes first when its input is there (it leads to the loss, and so to the next B's).
  std::optional<int> next_forward_leg(int r) {
    const auto& n = stage(r).issued[kForward];
    if (n[1] >= n[0]) return 0;
    if (r == p_ - 1 || issued(kForward, 1, r + 1, n[1])) return 1;
    if (n[0] < m_ && (r == 0 || issued(kForward, 0, r - 1, n[0]))) return 0;
    return std::nullopt;
  }

  // 3b. At most one F on every stage with forwards left, from stage 0 down.
  void forward_round() {
    for (int r = 0; r < p_; ++r) {
      if (stage(r).issued[kForward][1] >= m_) continue;
      const std::optional<int> leg = next_forward_leg(r);
      if (!leg) continue;
      free_contexts_for(kForward, r);
      fill_wait(r, arrival_from_neighbour(kForward, *leg, r), policy_.before_forward);
      issue(kForward, *leg, r);
    }
  }

  const int p_;
  const int m_;
  const std::array<int, kKinds> pass_time_;  // per kind
  const FillPolicy policy_;
  const std::vector<int>* const earlier_idle_;
  const int context_budget_;
  std::vector<StageState> stages_;
  std::vector<int> finish_;  // per (kind, leg, stage, micro-batch): when the pass ends, or kNotIssued
};

// One policy's attempt, retried with the per-stage idle times of the best so far for as long as
// that lowers the worst idle time.
Attempt refined_attempt(int stages, int micro_batches, const ZbVPassTimes& times, FillPolicy policy) {
  Attempt best = VGreedy(stages, micro_batches, times, policy, nullptr).run();
  for (;;) {
    Attempt retry = VGreedy(stages, micro_batches, times, policy, &best.idle).run();
    if (retry.worst_idle >= best.worst_idle) return best;
    best = std::move(retry);
  }
}

}  // namespace

std::vector<std::vector<Action>> zb_v_actions(int stages, int micro_batches, const ZbVPassTimes& times) {
  require(stages >= 2, "the zb-v schedule needs at least 2 pipeline stages; got p=", stages);
  require(micro_batches >= stages, "the zb-v schedule needs at least as many micro-batches as stages; got m=",
          micro_batches, " with p=", stages);
  require(times.forward >= 1 && times.backward_input >= 1 && times.weight >= 1,
          "the zb-v schedule needs pass times of at least 1; got forward=", times.forward,
          " backward_input=", times.backward_input, " weight=", times.weight);

  // The reference's order of trying the policies; the first with the least worst idle wins.
  std::optional<Attempt> best;
  for (bool before_first_leg_backward : {true, false})
    for (bool before_forward : {true, false}) {
      Attempt attempt = refined_attempt(stages, micro_batches, times, {before_first_leg_backward, before_forward});
      if (!best || attempt.worst_idle < best->worst_idle) best = std::move(attempt);
    }

  std::vector<std::vector<Action>> actions;
  for (const std::vector<Pass>& order : best->orders) {
    std::vector<Action>& list = actions.emplace_back();
    for (const Pass& pass : order)
      list.push_back({pass_kind(pass.kind), pass.microbatch, chunk_of(pass.kind, pass.leg)});
  }
  return actions;
}

}  // namespace mdtp
