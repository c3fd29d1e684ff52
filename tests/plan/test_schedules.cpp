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

namespace {

// Unit-time facts of one stage of a simulation: when it first starts, when it last ends, and the
// idle units between the two.
struct StageSpan {
  double first = 0.0, last = 0.0, idle_inside = 0.0;
};

StageSpan span_of(const Simulation& sim, int stage) {
  const auto& times = sim.times[static_cast<std::size_t>(stage)];
  StageSpan s{times.front().start, times.back().end, 0.0};
  double busy = 0.0;
  for (const ActionTiming& t : times) busy += t.end - t.start;
  s.idle_inside = s.last - s.first - busy;
  return s;
}

// Every (micro-batch, chunk) runs exactly one F, one B and one W (or one BW) on each stage.
void check_each_pass_once(const Schedule& s) {
  for (int r = 0; r < s.stages; ++r) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (int c = 0; c < s.chunks; ++c)
      for (int i = 0; i < s.micro_batches; ++i) {
        int f = 0, b = 0, w = 0;
        for (const Action& a : list) {
          if (a.microbatch != i || a.chunk != c) continue;
          f += a.op == PassKind::F;
          b += a.op == PassKind::B || a.op == PassKind::BW;
          w += a.op == PassKind::W || a.op == PassKind::BW;
        }
        INFO("stage " << r << " micro-batch " << i << " chunk " << c);
        CHECK((f == 1 && b == 1 && w == 1));
      }
  }
}

}  // namespace

TEST_CASE("the V-shaped mapping: stage r runs virtual stages r and 2p − 1 − r", "[plan][schedule]") {
  for (int p : {2, 3, 5}) {
    const Schedule s = make_schedule(ScheduleKind::zb_v, p, p);
    CHECK(s.mapping == StageMapping::v_shape);
    CHECK(s.chunks == 2);
    CHECK(s.loss_stages() == std::vector<int>{0});
    for (int r = 0; r < p; ++r) {
      CHECK(s.virtual_stage(r, 0) == r);
      CHECK(s.virtual_stage(r, 1) == 2 * p - 1 - r);
      CHECK(s.stage_of(s.virtual_stage(r, 1)) == r);
      CHECK(s.chunk_of(s.virtual_stage(r, 1)) == 1);
      CHECK(s.direction(r, 0) == 1);
      CHECK(s.direction(r, 1) == -1);
    }
    CHECK(make_schedule(ScheduleKind::one_f_one_b, p, 1).loss_stages() == std::vector<int>{p - 1});
  }
}

TEST_CASE("ZB-H2 is a parallelogram: warm-up 2(p − r) − 1, no gap inside, 2p − 1 contexts", "[plan][schedule][simulate]") {
  for (int p = 2; p <= 6; ++p)
    for (int m : {p, 2 * p - 1, 2 * p, 3 * p + 1}) {
      INFO("p=" << p << " m=" << m);
      const Schedule s = make_schedule(ScheduleKind::zb_h2, p, m);
      check_each_pass_once(s);
      const Simulation sim = simulate(s, PassTimes{1, 1, 1});
      const std::vector<PeakContexts> peaks = peak_contexts(s);
      // The synchronous step's bubble, recomputed: stage r starts at r and the last one ends at
      // 3m + p − 1, so every stage idles p − 1 units, ZB-H1's (p − 1)(T_F + T_B − T_W).
      CHECK(sim.makespan == Approx(3.0 * m + p - 1));
      for (int r = 0; r < p; ++r) {
        const auto rr = static_cast<std::size_t>(r);
        CHECK(sim.idle[rr] == Approx(p - 1.0));
        CHECK(peaks[rr].total <= 2 * p - 1);
        if (m >= 2 * p - 1) {
          const StageSpan span = span_of(sim, r);
          CHECK(span.first == Approx(r));
          CHECK(span.last == Approx(3.0 * m + r));
          CHECK(span.idle_inside == Approx(0.0));
          CHECK(forwards_before_first_backward(s, r) == 2 * (p - r) - 1);
        }
      }
      if (m >= 2 * p - 1) CHECK(peaks[0].total == 2 * p - 1);
    }
}

TEST_CASE("ZB-V at unit times: makespan 6m + p − 1, no gap inside a stage's span, 2p contexts", "[plan][schedule][simulate]") {
  for (int p = 2; p <= 6; ++p)
    for (int m : {p, 2 * p - 1, 2 * p + 3}) {
      INFO("p=" << p << " m=" << m);
      const Schedule s = make_schedule(ScheduleKind::zb_v, p, m);
      check_each_pass_once(s);
      const Simulation sim = simulate(s, PassTimes{1, 1, 1});
      CHECK(sim.makespan == Approx(6.0 * m + p - 1));
      for (int r = 0; r < p; ++r) {
        CHECK(peak_contexts(s)[static_cast<std::size_t>(r)].total <= 2 * p);
        if (m >= 2 * p - 1) CHECK(span_of(sim, r).idle_inside == Approx(0.0));
      }
    }
}

TEST_CASE("DualPipeV stays within (p − 1)(F&B + B − 3W) idle chunk units and 2p + 1 contexts", "[plan][schedule][simulate]") {
  // Chunk times F = B = W = 1: a full backward B is 2, and the F&B pair as mdtp runs it (one
  // pass after the other) 3; the DualPipe README's bound is then (p − 1)(3 + 2 − 3) = 2(p − 1).
  for (int p = 2; p <= 6; ++p)
    for (int m : {2 * p, 2 * p + 1, 3 * p + 2}) {
      INFO("p=" << p << " m=" << m);
      const Schedule s = make_schedule(ScheduleKind::dualpipev, p, m);
      check_each_pass_once(s);
      const Simulation sim = simulate(s, PassTimes{1, 1, 1});
      const double fb = 3.0, full_backward = 2.0, w = 1.0;
      for (int r = 0; r < p; ++r) {
        const auto rr = static_cast<std::size_t>(r);
        CHECK(sim.busy[rr] == Approx(6.0 * m));
        CHECK(sim.idle[rr] <= Approx((p - 1) * (fb + full_backward - 3 * w)));
        CHECK(sim.idle[rr] == Approx(p - 1.0));  // what these shapes reach: half the bound
        CHECK(peak_contexts(s)[rr].total <= 2 * p + 1);
        // Every overlapped forward is followed by the full backward of the other chunk.
        const auto& list = s.actions[rr];
        int pairs = 0;
        for (std::size_t i = 0; i + 1 < list.size(); ++i)
          if (list[i].overlapped) {
            ++pairs;
            CHECK(list[i].op == PassKind::F);
            CHECK(list[i + 1].op == PassKind::BW);
            CHECK(list[i + 1].chunk != list[i].chunk);
          }
        // Phase 4's two pairs per round and phase 5's one (the last stage's first round unpaired).
        const int rounds = m - 2 * p + r + 1;
        CHECK(pairs == 2 * rounds + (p - r - 1) - (r == p - 1 ? 1 : 0));
      }
    }
}

TEST_CASE("the zero-bubble family refuses what it cannot run, naming the value", "[plan][schedule][errors]") {
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::dualpipev, 4, 7), Contains("at least 2 x pp = 8 micro-batches; got m=7"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::zb_v, 1, 4), Contains("zb-v schedule needs pp >= 2; got pp=1"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::zb_v, 2, 4, 3), Contains("--chunks 3") && Contains("2 chunks per stage"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::zb_h2, 4, 3), Contains("zb-h2 schedule needs at least pp=4"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::zb_v, 3, 2), Contains("zb-v schedule needs at least pp=3"));
  for (const char* name : {"zb-h2", "zb-v", "dualpipev", "dualpipe"})
    CHECK(schedule_name(parse_schedule(name)) == std::string(name));
}

TEST_CASE("the mirrored mapping: stage r holds positions r and p − 1 − r, mirror stages the same chunks", "[plan][schedule]") {
  for (int p : {2, 4, 6}) {
    const Schedule s = make_schedule(ScheduleKind::dualpipe, p, 2 * p);
    CHECK(s.mapping == StageMapping::mirrored);
    CHECK(s.parameter_copies() == 2);
    CHECK(s.loss_stages() == std::vector<int>{0, p - 1});  // route 1 ends on stage 0, route 0 on p − 1
    const StageMap map = s.map();
    for (int r = 0; r < p; ++r) {
      const int low = std::min(r, p - 1 - r), high = std::max(r, p - 1 - r);
      CHECK(map.position(s.virtual_stage(r, 0)) == low);  // chunks in model order
      CHECK(map.position(s.virtual_stage(r, 1)) == high);
      for (int c : {0, 1}) {
        const int vs = s.virtual_stage(r, c);
        CHECK(s.stage_of(vs) == r);
        CHECK(s.chunk_of(vs) == c);
        // The down route (0) runs position k on stage k, the up route (1) on stage p − 1 − k.
        CHECK(map.route(vs) == (map.position(vs) == r ? 0 : 1));
        CHECK(s.micro_batches_through(r, c) == p);
        // Micro-batches 0 … m/2 − 1 take the down route, the rest the up route.
        CHECK(s.visits(0, vs) == (map.route(vs) == 0));
        CHECK(s.visits(2 * p - 1, vs) == (map.route(vs) == 1));
      }
    }
  }
  CHECK_THROWS_WITH(StageMap(StageMapping::mirrored, 3, 2), Contains("needs an even pp; got pp=3"));
}

TEST_CASE("DualPipe: both routes fed, within (p/2 − 1)(F&B + B − 3W) idle units and p + 1 contexts", "[plan][schedule][simulate]") {
  // The same unit times as DualPipeV's test: F&B = 3, a full backward B = 2, W = 1.
  for (int p : {2, 4, 6, 8})
    for (int m : {2 * p, 2 * p + 2, 3 * p + 2 * (p % 4 == 0 ? 1 : 2)}) {
      if (m % 2) continue;
      INFO("p=" << p << " m=" << m);
      const Schedule s = make_schedule(ScheduleKind::dualpipe, p, m);
      const Simulation sim = simulate(s, PassTimes{1, 1, 1});  // completes, channels in order
      for (int r = 0; r < p; ++r) {
        const auto rr = static_cast<std::size_t>(r);
        // m/2 micro-batches through each of the two chunks, 3 units each.
        CHECK(sim.busy[rr] == Approx(3.0 * m));
        CHECK(sim.idle[rr] <= Approx((p / 2 - 1) * (3.0 + 2.0 - 3.0)));
        CHECK(peak_contexts(s)[rr].total <= p + 1);
        int down = 0, up = 0;
        for (const Action& a : s.actions[rr])
          if (a.op == PassKind::F) (s.map().route(s.virtual_stage(r, a.chunk)) == 0 ? down : up) += 1;
        CHECK(down == m / 2);
        CHECK(up == m / 2);
      }
    }
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::dualpipe, 3, 6), Contains("even pp >= 2") && Contains("pp=3"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::dualpipe, 4, 9), Contains("even number of micro-batches") && Contains("m=9"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::dualpipe, 4, 6), Contains("at least 2 x pp = 8"));
}
