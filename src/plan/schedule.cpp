#include "plan/schedule.hpp"

#include <algorithm>
#include <deque>

#include "core/error.hpp"
#include "plan/virtual_stage.hpp"
#include "plan/zb_v_order.hpp"

namespace mdtp {
namespace {

using Actions = std::vector<Action>;

Actions gpipe_stage(int m) {
  Actions a;
  for (int i = 0; i < m; ++i) a.push_back({PassKind::F, i, 0});
  for (int i = 0; i < m; ++i) a.push_back({PassKind::BW, i, 0});
  return a;
}

Actions one_f_one_b_stage(int p, int m, int r) {
  const int warmup = std::min(p - r - 1, m);
  Actions a;
  for (int i = 0; i < warmup; ++i) a.push_back({PassKind::F, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    a.push_back({PassKind::F, warmup + i, 0});
    a.push_back({PassKind::BW, i, 0});
  }
  for (int i = m - warmup; i < m; ++i) a.push_back({PassKind::BW, i, 0});
  return a;
}

// Megatron-Core's table of forward passes: groups of N micro-batches through every chunk; the
// last group takes whatever is left (at most N).
std::vector<Action> interleaved_forward_order(int m, int v, int group) {
  std::vector<Action> order;
  for (int first = 0; first < m; first += group) {
    const int end = first + group >= m ? m : first + group;
    for (int c = 0; c < v; ++c)
      for (int i = first; i < end; ++i) order.push_back({PassKind::F, i, c});
  }
  return order;
}

Actions interleaved_stage(int p, int m, int v, int group, int r) {
  const std::vector<Action> forwards = interleaved_forward_order(m, v, group);
  std::vector<Action> backwards;
  for (const Action& f : forwards) backwards.push_back({PassKind::BW, f.microbatch, v - 1 - f.chunk});
  const int total = m * v;
  const int warmup = std::min(2 * (p - r - 1) + (v - 1) * group, total);
  Actions a;
  for (int k = 0; k < warmup; ++k) a.push_back(forwards[static_cast<std::size_t>(k)]);
  for (int k = 0; k < total - warmup; ++k) {
    a.push_back(forwards[static_cast<std::size_t>(warmup + k)]);
    a.push_back(backwards[static_cast<std::size_t>(k)]);
  }
  for (int k = total - warmup; k < total; ++k) a.push_back(backwards[static_cast<std::size_t>(k)]);
  return a;
}

Actions zb_h1_stage(int p, int m, int r) {
  Actions a;
  int f = 0, b = 0, w = 0;
  auto F = [&] { a.push_back({PassKind::F, f++, 0}); };
  auto B = [&] { a.push_back({PassKind::B, b++, 0}); };
  auto W = [&] { a.push_back({PassKind::W, w++, 0}); };
  for (int i = 0; i < p - r - 1; ++i) F();
  for (int i = 0; i < r; ++i) {  // later stages start their backwards earlier ...
    F();
    B();
  }
  F();
  B();
  W();  // ... and defer one W per stage of depth into the cool-down, where 1F1B idles
  for (int i = 0; i < m - p; ++i) {
    F();
    B();
    W();
  }
  for (int i = 0; i < p - r - 1; ++i) {
    B();
    W();
  }
  for (int i = 0; i < r; ++i) W();
  return a;
}

// ZB-H2 on every stage at once: the order a list scheduler gives at unit pass times.  Each unit
// of time, each stage runs the first of
//   - its next backward-input pass B, once its forward is done and (but on the last stage) the
//     stage below has finished its own B of that micro-batch;
//   - its next forward F, once the stage above has finished it, while the stage holds fewer than
//     2(p − r) − 1 forwarded micro-batches whose B has not run (the warm-up that reaches the
//     first B without a gap) and fewer than 2p − 1 contexts in all (ZB-H2's memory);
//   - its oldest pending weight pass W;
// else it idles.  Deferring W to where nothing else is ready is what fills the tail: the result
// is a parallelogram (stage r busy without a gap from r to 3m + r) once m ≥ 2p − 1.
std::vector<Actions> zb_h2_stages(int p, int m) {
  constexpr int kNotDone = -1;
  const auto P = static_cast<std::size_t>(p), M = static_cast<std::size_t>(m);
  std::vector<std::vector<int>> forward_done(P, std::vector<int>(M, kNotDone)), backward_done = forward_done;
  std::vector<int> f(P, 0), b(P, 0), w(P, 0);
  std::vector<Actions> out(P);
  auto done_by = [](int when, int t) { return when != kNotDone && when <= t; };
  auto finished = [&] { return std::all_of(w.begin(), w.end(), [&](int n) { return n == m; }); };
  // Every unit some stage can act (the dependencies point down the stages for F and up for B),
  // so the loop ends well within this many units; the bound only turns a bug into an error.
  const int horizon = 6 * m * p + 6 * p;
  for (int t = 0; !finished(); ++t) {
    require(t < horizon, "zb-h2: the list scheduler made no progress for p=", p, ", m=", m);
    for (int r = 0; r < p; ++r) {
      const auto R = static_cast<std::size_t>(r);
      const bool backward_ready =
          b[R] < f[R] && done_by(forward_done[R][static_cast<std::size_t>(b[R])], t) &&
          (r == p - 1 || done_by(backward_done[R + 1][static_cast<std::size_t>(b[R])], t));
      const bool forward_ready = f[R] < m && f[R] - b[R] < 2 * (p - r) - 1 && f[R] - w[R] < 2 * p - 1 &&
                                 (r == 0 || done_by(forward_done[R - 1][static_cast<std::size_t>(f[R])], t));
      if (backward_ready) {
        backward_done[R][static_cast<std::size_t>(b[R])] = t + 1;
        out[R].push_back({PassKind::B, b[R]++, 0});
      } else if (forward_ready) {
        forward_done[R][static_cast<std::size_t>(f[R])] = t + 1;
        out[R].push_back({PassKind::F, f[R]++, 0});
      } else if (w[R] < b[R]) {
        out[R].push_back({PassKind::W, w[R]++, 0});
      }
    }
  }
  return out;
}

// DualPipeV, stage r of p (DualPipe repository, dualpipev.py, DualPipeV.step): chunk 0 is the
// down leg (virtual stage r), chunk 1 the up leg (2p − 1 − r).  Eight phases, each named there:
//   1  2(p − r − 1) × F0                      the down leg's warm-up
//   2  (r + 1) × (F0, F1)
//   3  (p − r − 1) × (B1, W, F1)              B split from its W (the "zero bubble" trick)
//   4  (m − 2p + r + 1) × (F0&B1, F1&B0)      the steady state: overlapped F&B pairs
//   5  (p − r − 1) × (B1, F1&B0)
//   6  (r + 1) × (B1, B0)                     from the middle on with W split off
//   7  (p − r − 1) × (W, B0)
//   8  (r + 1) × W
// where F&B is a forward of one chunk paired with the full backward (B then W) of the other, and
// each W runs the oldest deferred weight pass.  On the last stage the first pair of phase 4 is
// run unpaired (as the reference does, to shorten the bubble); its order is the same.
Actions dualpipev_stage(int p, int m, int r) {
  Actions a;
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  std::deque<Action> deferred_weights;
  auto F = [&](int c, bool overlapped = false) { a.push_back({PassKind::F, forwards[c]++, c, overlapped}); };
  auto backward = [&](int c, bool split) {
    const int i = backwards[c]++;
    if (!split) {
      a.push_back({PassKind::BW, i, c});
      return;
    }
    a.push_back({PassKind::B, i, c});
    deferred_weights.push_back({PassKind::W, i, c});
  };
  auto W = [&] {
    a.push_back(deferred_weights.front());
    deferred_weights.pop_front();
  };
  auto pair = [&](int forward_chunk, int backward_chunk) {
    F(forward_chunk, true);
    backward(backward_chunk, false);
  };
  for (int i = 0; i < 2 * (p - r - 1); ++i) F(0);
  for (int i = 0; i < r + 1; ++i) F(0), F(1);
  for (int i = 0; i < p - r - 1; ++i) {
    backward(1, true);
    W();
    F(1);
  }
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {
    if (i == 0 && r == p - 1) {
      F(0);
      backward(1, false);
    } else {
      pair(0, 1);
    }
    pair(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    backward(1, false);
    pair(1, 0);
  }
  bool split = false;
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) split = true;
    backward(1, split);
    if (i == (r + 1) / 2 && r % 2 == 0) split = true;
    backward(0, split);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    W();
    backward(0, true);
  }
  for (int i = 0; i < r + 1; ++i) W();
  require(deferred_weights.empty(), "dualpipev: stage ", r, " left weight passes unscheduled");
  return a;
}

// DualPipe, stage r of p (dualpipe.py, DualPipe.step): DualPipeV's eight phases run on the
// half-rank h = min(r, p − 1 − r) of p/2 with m/2 micro-batches per route — the reference's own
// counts (num_half_ranks, half_rank, half_num_chunks) — and its "phase" is our chunk (the lower
// position first; the reference flips its phase on the upper half of the ranks the same way).
// Route 0 (down) carries micro-batches 0 … m/2 − 1, route 1 (up) the rest.
Actions dualpipe_stage(int p, int m, int r) {
  const int half = p / 2;
  const bool upper = r >= half;
  Actions a = dualpipev_stage(half, m / 2, std::min(r, p - 1 - r));
  for (Action& x : a) x.microbatch += (x.chunk ^ (upper ? 1 : 0)) * (m / 2);
  return a;
}

}  // namespace

bool Schedule::visits(int microbatch, int vs) const {
  if (mapping != StageMapping::mirrored) return true;
  return map().route(vs) == (2 * microbatch < micro_batches ? 0 : 1);
}

int Schedule::micro_batches_through(int stage, int chunk) const {
  (void)virtual_stage(stage, chunk);  // validates both
  return mapping == StageMapping::mirrored ? micro_batches / 2 : micro_batches;
}

std::vector<int> Schedule::loss_stages() const {
  std::vector<int> out;
  for (int vs = 0; vs < virtual_stages(); ++vs)
    if (last(vs) && std::find(out.begin(), out.end(), stage_of(vs)) == out.end()) out.push_back(stage_of(vs));
  std::sort(out.begin(), out.end());
  return out;
}

const char* pass_name(PassKind kind) {
  switch (kind) {
    case PassKind::F: return "F";
    case PassKind::B: return "B";
    case PassKind::W: return "W";
    case PassKind::BW: return "BW";
  }
  return "?";
}

Schedule make_schedule(ScheduleKind kind, int p, int m, int v, int group) {
  require(p >= 1, "the pipeline size must be >= 1; got pp=", p);
  require(m >= 1, "a step needs at least one micro-batch; got --micro-batches ", m);
  require(v >= 1, "the chunks per stage must be >= 1; got --chunks ", v);
  Schedule s;
  s.kind = kind;
  s.stages = p;
  s.micro_batches = m;
  s.chunks = v;
  s.mapping = stage_mapping_of(kind);
  if (kind != ScheduleKind::interleaved)
    require(group == 0 || group == 1, "a micro-batch group size applies only to the interleaved schedule");
  if (fixed_chunks(kind) == 2) {  // a V or a mirror: the schedule brings its two chunks
    require(v == 2 || v == 1, "--chunks ", v, ": the ", schedule_name(kind), " schedule runs 2 chunks per stage (",
            is_mirrored(kind) ? "positions r and p-1-r" : "V order", ")");
    s.chunks = 2;
  }
  if (is_mirrored(kind)) {
    require(p >= 2 && p % 2 == 0, "the dualpipe schedule needs an even pp >= 2 (stage r pairs with p-1-r); got pp=", p);
    require(m % 2 == 0 && m >= 2 * p, "the dualpipe schedule needs an even number of micro-batches, at least 2 x pp = ",
            2 * p, "; got m=", m, " (DualPipe's rule: m/2 enter at each end)");
  } else if (is_v_shaped(kind)) {
    require(p >= 2, "the ", schedule_name(kind), " schedule needs pp >= 2; got pp=", p);
    if (kind == ScheduleKind::dualpipev)
      require(m >= 2 * p, "the dualpipev schedule needs at least 2 x pp = ", 2 * p, " micro-batches; got m=", m,
              " (DualPipeV's rule)");
    else
      require(m >= p, "the zb-v schedule needs at least pp=", p, " micro-batches; got m=", m);
  } else if (kind == ScheduleKind::interleaved) {
    require(p >= 2, "the interleaved schedule needs pp >= 2; got pp=", p);
    require(v >= 2, "the interleaved schedule needs --chunks >= 2 (one chunk is plain 1f1b); got ", v);
    s.group_size = group == 0 ? p : group;
    const int n = s.group_size;
    require(n >= p && n <= m, "the interleaved schedule needs pp=", p, " <= micro-batch group size N=", n,
            " <= micro-batches m=", m, " (Megatron-Core's rule; raise --micro-batches)");
    require(m % n == 0 || m % n >= p, "the interleaved schedule needs m mod N either 0 or >= pp; got m=", m,
            ", N=", n, ", m mod N=", m % n, " (Megatron-Core's rule)");
  } else {
    require(v == 1, "--chunks ", v, " applies only to the interleaved schedule; ", schedule_name(kind),
            " runs one chunk per stage");
  }
  if (kind == ScheduleKind::zb_h1 || kind == ScheduleKind::zb_h2)
    require(m >= p, "the ", schedule_name(kind), " schedule needs at least pp=", p, " micro-batches; got m=", m);
  if (kind == ScheduleKind::zb_h2) {
    s.actions = zb_h2_stages(p, m);
    return s;
  }
  if (kind == ScheduleKind::zb_v) {
    s.actions = zb_v_actions(p, m);
    return s;
  }
  for (int r = 0; r < p; ++r) {
    switch (kind) {
      case ScheduleKind::gpipe: s.actions.push_back(gpipe_stage(m)); break;
      case ScheduleKind::one_f_one_b: s.actions.push_back(one_f_one_b_stage(p, m, r)); break;
      case ScheduleKind::interleaved: s.actions.push_back(interleaved_stage(p, m, v, s.group_size, r)); break;
      case ScheduleKind::zb_h1: s.actions.push_back(zb_h1_stage(p, m, r)); break;
      case ScheduleKind::dualpipev: s.actions.push_back(dualpipev_stage(p, m, r)); break;
      case ScheduleKind::dualpipe: s.actions.push_back(dualpipe_stage(p, m, r)); break;
      case ScheduleKind::zb_h2:
      case ScheduleKind::zb_v: break;  // built above, all stages at once
    }
  }
  return s;
}

std::vector<int> last_weight_actions(const Schedule& schedule, int stage) {
  require(stage >= 0 && static_cast<std::size_t>(stage) < schedule.actions.size(), "stage ", stage,
          " is not a stage of this schedule (", schedule.actions.size(), " stages)");
  std::vector<int> last(static_cast<std::size_t>(schedule.chunks), -1);
  const std::vector<Action>& list = schedule.actions[static_cast<std::size_t>(stage)];
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].op == PassKind::W || list[i].op == PassKind::BW)
      last.at(static_cast<std::size_t>(list[i].chunk)) = static_cast<int>(i);
  return last;
}

bool fused_backward_unit_by_unit(const Schedule& schedule, int stage, int chunk) {
  return schedule.first(schedule.virtual_stage(stage, chunk));
}

int forwards_before_first_backward(const Schedule& schedule, int stage) {
  int n = 0;
  for (const Action& a : schedule.actions.at(static_cast<std::size_t>(stage))) {
    if (a.op != PassKind::F) break;
    ++n;
  }
  return n;
}

}  // namespace mdtp
