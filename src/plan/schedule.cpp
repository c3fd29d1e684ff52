#include "plan/schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

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

}  // namespace

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
  if (kind == ScheduleKind::interleaved) {
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
    require(group == 0 || group == 1, "a micro-batch group size applies only to the interleaved schedule");
  }
  if (kind == ScheduleKind::zb_h1)
    require(m >= p, "the zb-h1 schedule needs at least pp=", p, " micro-batches; got m=", m);
  for (int r = 0; r < p; ++r) {
    switch (kind) {
      case ScheduleKind::gpipe: s.actions.push_back(gpipe_stage(m)); break;
      case ScheduleKind::one_f_one_b: s.actions.push_back(one_f_one_b_stage(p, m, r)); break;
      case ScheduleKind::interleaved: s.actions.push_back(interleaved_stage(p, m, v, s.group_size, r)); break;
      case ScheduleKind::zb_h1: s.actions.push_back(zb_h1_stage(p, m, r)); break;
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
  return schedule.virtual_stage(stage, chunk) == 0;
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
