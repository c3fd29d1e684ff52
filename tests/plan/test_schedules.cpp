// The schedules against the rules written in docs/theory.md §3, over a table of (p, m, v), and the
// whole-pipeline simulator: every schedule completes (no cyclic wait, FIFO channels in order) —
// p = 2 and the interleaved wrap-around included — and its bubble with unit pass times is the
// textbook one: 3(p − 1) per stage for GPipe and 1F1B, p − 1 for ZB-H1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "plan/schedule.hpp"
#include "plan/schedule_sim.hpp"

using namespace mdtp;
using Catch::Contains;

namespace {

int count(const std::vector<Action>& list, PassKind op) {
  return static_cast<int>(std::count_if(list.begin(), list.end(), [&](const Action& a) { return a.op == op; }));
}

// Every schedule kind that accepts (p, m, v), for the table below.
std::vector<Schedule> schedules_for(int p, int m) {
  std::vector<Schedule> out;
  out.push_back(make_schedule(ScheduleKind::gpipe, p, m));
  out.push_back(make_schedule(ScheduleKind::one_f_one_b, p, m));
  if (m >= p) out.push_back(make_schedule(ScheduleKind::zb_h1, p, m));
  for (int v : {2, 3})
    if (p >= 2 && m >= p && (m % p == 0 || m % p >= p)) out.push_back(make_schedule(ScheduleKind::interleaved, p, m, v));
  return out;
}

}  // namespace

TEST_CASE("1F1B warms up min(p − r − 1, m) forwards and alternates after", "[plan][schedule]") {
  for (int p = 1; p <= 5; ++p)
    for (int m = 1; m <= 9; ++m) {
      const Schedule s = make_schedule(ScheduleKind::one_f_one_b, p, m);
      for (int r = 0; r < p; ++r) {
        INFO("p=" << p << " m=" << m << " stage " << r);
        const int w = std::min(p - r - 1, m);
        CHECK(forwards_before_first_backward(s, r) == (w == m ? m : w + 1));  // the first steady forward follows at once
        const auto& a = s.actions[static_cast<std::size_t>(r)];
        REQUIRE(a.size() == static_cast<std::size_t>(2 * m));
        for (int i = 0; i < m - w; ++i) {  // steady phase: F(w + i), BW(i)
          CHECK(a[static_cast<std::size_t>(w + 2 * i)] == Action{PassKind::F, w + i, 0});
          CHECK(a[static_cast<std::size_t>(w + 2 * i + 1)] == Action{PassKind::BW, i, 0});
        }
      }
    }
  const Schedule g = make_schedule(ScheduleKind::gpipe, 3, 4);
  for (const auto& a : g.actions) {
    for (int i = 0; i < 4; ++i) CHECK(a[static_cast<std::size_t>(i)] == Action{PassKind::F, i, 0});
    for (int i = 0; i < 4; ++i) CHECK(a[static_cast<std::size_t>(4 + i)] == Action{PassKind::BW, i, 0});
  }
}

TEST_CASE("interleaved 1F1B follows Megatron-Core's groups and warm-up", "[plan][schedule]") {
  // p = 2, m = 4, v = 2, N = 2: forwards (0,c0) (1,c0) (0,c1) (1,c1) (2,c0) (3,c0) (2,c1) (3,c1).
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 4, 2);
  CHECK(s.group_size == 2);
  std::vector<Action> forwards;
  for (const Action& a : s.actions[0])
    if (a.op == PassKind::F) forwards.push_back(a);
  CHECK(forwards == std::vector<Action>{{PassKind::F, 0, 0}, {PassKind::F, 1, 0}, {PassKind::F, 0, 1}, {PassKind::F, 1, 1},
                                        {PassKind::F, 2, 0}, {PassKind::F, 3, 0}, {PassKind::F, 2, 1}, {PassKind::F, 3, 1}});
  std::vector<Action> backwards;
  for (const Action& a : s.actions[1])
    if (a.op == PassKind::BW) backwards.push_back(a);
  CHECK(backwards.front() == Action{PassKind::BW, 0, 1});  // the chunk reversed
  for (int p : {2, 3, 4})
    for (int v : {2, 3})
      for (int m : {p, 2 * p, 2 * p + p, p + p + 1}) {
        if (!(m % p == 0 || m % p >= p)) continue;
        const Schedule t = make_schedule(ScheduleKind::interleaved, p, m, v);
        for (int r = 0; r < p; ++r) {
          INFO("p=" << p << " m=" << m << " v=" << v << " stage " << r);
          const int w = std::min(2 * (p - r - 1) + (v - 1) * p, m * v);
          CHECK(forwards_before_first_backward(t, r) == (w == m * v ? m * v : w + 1));
          CHECK(count(t.actions[static_cast<std::size_t>(r)], PassKind::F) == m * v);
          CHECK(count(t.actions[static_cast<std::size_t>(r)], PassKind::BW) == m * v);
        }
      }
  // Group size N with m mod N >= p: the last group is smaller.
  const Schedule odd = make_schedule(ScheduleKind::interleaved, 2, 5, 2, 3);
  CHECK(odd.actions[0].size() == 20u);
}

TEST_CASE("ZB-H1 splits the backward and defers the weight passes", "[plan][schedule]") {
  const int p = 4, m = 8;
  const Schedule s = make_schedule(ScheduleKind::zb_h1, p, m);
  for (int r = 0; r < p; ++r) {
    const auto& a = s.actions[static_cast<std::size_t>(r)];
    CHECK(count(a, PassKind::F) == m);
    CHECK(count(a, PassKind::B) == m);
    CHECK(count(a, PassKind::W) == m);
    CHECK(count(a, PassKind::BW) == 0);
    CHECK(forwards_before_first_backward(s, r) == p - r);
    // The last r actions are weight passes: they fill what 1F1B's cool-down leaves idle.
    for (int i = 0; i < r; ++i) CHECK(a[a.size() - 1 - static_cast<std::size_t>(i)].op == PassKind::W);
  }
}

TEST_CASE("every schedule completes, its channels match in order, and its bubble is the textbook one",
          "[plan][simulate]") {
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 8; ++m)
      for (const Schedule& s : schedules_for(p, m)) {
        INFO(schedule_name(s.kind) << " p=" << p << " m=" << m << " v=" << s.chunks);
        const Simulation sim = simulate(s, PassTimes{1, 1, 1});
        const int V = p * s.chunks;
        // Every stage's busy time: 3 units per (micro-batch, chunk).
        for (double b : sim.busy) CHECK(b == Approx(3.0 * m * s.chunks));
        if (s.kind == ScheduleKind::gpipe || s.kind == ScheduleKind::one_f_one_b) {
          for (double idle : sim.idle) CHECK(idle == Approx(3.0 * (p - 1)));  // (p−1)(T_F+T_B+T_W)
        }
        if (s.kind == ScheduleKind::zb_h1) {
          for (double idle : sim.idle) CHECK(idle == Approx(1.0 * (p - 1)));  // (p−1)(T_F+T_B−T_W)
        }
        if (s.kind == ScheduleKind::interleaved && m % p == 0) {
          // (p − 1) passes of 3 units of a chunk: 1/v of 1F1B's bubble in whole-model units.
          for (double idle : sim.idle) CHECK(idle == Approx(3.0 * (p - 1)));
          CHECK(sim.bubble_over_busy() == Approx(double(p - 1) / (s.chunks * m)));
        }
        // Peak contexts: GPipe all m; 1F1B p − r; ZB-H1 p − r full, r + 1 weight-only, p in all.
        for (int r = 0; r < p; ++r) {
          const auto rr = static_cast<std::size_t>(r);
          if (s.kind == ScheduleKind::gpipe) CHECK(sim.peak_full[rr] == m);
          if (s.kind == ScheduleKind::one_f_one_b) CHECK(sim.peak_full[rr] == std::min(p - r, m));
          if (s.kind == ScheduleKind::zb_h1) {
            CHECK(sim.peak_full[rr] == p - r);
            CHECK(sim.peak_weight_only[rr] <= r + 1);
            CHECK(peak_contexts(s)[rr].total <= p);
          }
        }
        CHECK(V >= 1);
      }
}

TEST_CASE("the simulator finds a deadlock and a first-in first-out mix-up", "[plan][simulate][errors]") {
  Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  // Stage 1 asks for micro-batch 1 before micro-batch 0: the channel from stage 0 would hand it
  // micro-batch 0's activation.
  std::swap(s.actions[1][0], s.actions[1][2]);
  CHECK_THROWS_WITH(simulate(s, PassTimes{}), Contains("first-in first-out") && Contains("channel 0→1"));
  Schedule d = make_schedule(ScheduleKind::gpipe, 2, 1);
  // Stage 0 runs its backward before stage 1 could have sent the gradient, and stage 1 never
  // runs its forward: each waits for the other.
  d.actions[0] = {{PassKind::BW, 0, 0}, {PassKind::F, 0, 0}};
  CHECK_THROWS_WITH(simulate(d, PassTimes{}), Contains("deadlocks") && Contains("stage 0 waits at BW"));
}

TEST_CASE("schedules refuse what they cannot run, naming the value", "[plan][schedule][errors]") {
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 4, 6, 2), Contains("m mod N") && Contains("m=6"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 4, 3, 2), Contains("<= micro-batches m=3"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 2, 4, 1), Contains("--chunks >= 2"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 1, 4, 2), Contains("pp >= 2"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::one_f_one_b, 2, 4, 2), Contains("--chunks 2 applies only"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::zb_h1, 4, 3), Contains("at least pp=4 micro-batches"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::gpipe, 2, 0), Contains("--micro-batches 0"));
  CHECK_THROWS_WITH(parse_schedule("1F1B"), Contains("unknown pipeline schedule '1F1B'"));
  CHECK(parse_schedule("zb-h1") == ScheduleKind::zb_h1);
}
