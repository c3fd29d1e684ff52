// The ZB-V order (plan/zb_v_order.hpp): action by action against the zero-bubble authors' greedy
// at unit costs (tests/data/zb_v_unit_orders.json, p = 2..8, m = p..4p) and at a few other pass
// times that make its fill policies and retries matter (tests/data/zb_v_timed_orders.json), and
// against properties checked here with a small simulator of our own: every pass once and in F, B,
// W order, at unit times makespan 6m + p − 1 and no idle inside a stage's span once m ≥ 2p − 1,
// and at most 2p contexts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "plan/schedule.hpp"
#include "plan/zb_v_order.hpp"

using namespace mdtp;
using Catch::Contains;

namespace {

using Orders = std::vector<std::vector<Action>>;

std::string describe(const Action& a) {
  std::ostringstream os;
  os << pass_name(a.op) << "(mb " << a.microbatch << ", chunk " << a.chunk << ")";
  return os.str();
}

// The data file's notation: the pass letter then the micro-batch, upper case for chunk 0 and lower
// case for chunk 1 ("f3" is the forward of micro-batch 3 on chunk 1).
std::vector<Action> parse_stage(const std::string& text) {
  std::vector<Action> out;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    const char letter = token.front();
    const int chunk = (letter >= 'a' && letter <= 'z') ? 1 : 0;
    PassKind op = PassKind::F;
    switch (letter) {
      case 'F': case 'f': op = PassKind::F; break;
      case 'B': case 'b': op = PassKind::B; break;
      case 'W': case 'w': op = PassKind::W; break;
      default: FAIL("unknown pass letter in token " << token);
    }
    out.push_back({op, std::stoi(token.substr(1)), chunk});
  }
  return out;
}

nlohmann::json load_pinned(const std::string& name) {
  const std::string path = std::string(MDTP_TEST_DATA_DIR) + "/" + name;
  INFO(path);
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// A pass on a stage, for the simulator's table of end times.
struct Key {
  PassKind op;
  int chunk, stage, microbatch;
  bool operator<(const Key& o) const {
    return std::tie(op, chunk, stage, microbatch) < std::tie(o.op, o.chunk, o.stage, o.microbatch);
  }
};

// What an action needs done first, written from the V's dependencies: F flows down chunk 0 and
// back up chunk 1, B from the loss (chunk 1 of stage 0) down chunk 1 and back up chunk 0, and a W
// needs its own B.  Returns false for the model's first pass (F of chunk 0 on stage 0).
bool dependency(int p, int stage, const Action& a, Key& out) {
  const int mb = a.microbatch;
  switch (a.op) {
    case PassKind::W: out = {PassKind::B, a.chunk, stage, mb}; return true;
    case PassKind::F:
      if (a.chunk == 0) {
        if (stage == 0) return false;
        out = {PassKind::F, 0, stage - 1, mb};
      } else {
        out = stage < p - 1 ? Key{PassKind::F, 1, stage + 1, mb} : Key{PassKind::F, 0, stage, mb};
      }
      return true;
    case PassKind::B:
      if (a.chunk == 1)
        out = stage > 0 ? Key{PassKind::B, 1, stage - 1, mb} : Key{PassKind::F, 1, 0, mb};
      else
        out = stage < p - 1 ? Key{PassKind::B, 0, stage + 1, mb} : Key{PassKind::B, 1, stage, mb};
      return true;
    default: FAIL("unexpected pass " << describe(a)); return false;
  }
}

struct Timing {
  int makespan = 0;
  int worst_idle = 0;     // largest idle time of a stage between its first and last action
  int peak_contexts = 0;  // largest count of (F done, W not yet) on a stage
};

// Every action starts when its stage is free and its dependency has ended, and takes its kind's
// time (one unit each by default).
Timing simulate(int p, const Orders& orders, const ZbVPassTimes& times = {}) {
  std::map<Key, int> end;
  std::vector<std::size_t> next(orders.size(), 0);
  std::vector<int> free_at(orders.size(), 0), idle(orders.size(), 0);
  std::size_t left = 0;
  for (const auto& o : orders) left += o.size();
  while (left > 0) {
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      const auto& order = orders[static_cast<std::size_t>(r)];
      auto& i = next[static_cast<std::size_t>(r)];
      while (i < order.size()) {
        const Action& a = order[i];
        Key dep{};
        int start = free_at[static_cast<std::size_t>(r)];
        if (dependency(p, r, a, dep)) {
          const auto done = end.find(dep);
          if (done == end.end()) break;  // waits for another stage
          start = std::max(start, done->second);
        }
        if (i > 0) idle[static_cast<std::size_t>(r)] += start - free_at[static_cast<std::size_t>(r)];
        const int duration =
            a.op == PassKind::F ? times.forward : a.op == PassKind::B ? times.backward_input : times.weight;
        end[{a.op, a.chunk, r, a.microbatch}] = start + duration;
        free_at[static_cast<std::size_t>(r)] = start + duration;
        ++i;
        --left;
        progressed = true;
      }
    }
    REQUIRE(progressed);  // else the order deadlocks
  }
  Timing t;
  t.makespan = *std::max_element(free_at.begin(), free_at.end());
  t.worst_idle = *std::max_element(idle.begin(), idle.end());
  for (const auto& order : orders) {
    int held = 0;
    for (const Action& a : order) {
      held += a.op == PassKind::F ? 1 : a.op == PassKind::W ? -1 : 0;
      t.peak_contexts = std::max(t.peak_contexts, held);
    }
  }
  return t;
}

// Every (micro-batch, chunk) has exactly one F, one B and one W on every stage, in that order.
void check_passes_once_in_order(int m, const Orders& orders) {
  for (std::size_t r = 0; r < orders.size(); ++r) {
    std::map<std::tuple<PassKind, int, int>, std::vector<std::size_t>> where;
    for (std::size_t i = 0; i < orders[r].size(); ++i) {
      const Action& a = orders[r][i];
      where[{a.op, a.microbatch, a.chunk}].push_back(i);
    }
    CHECK(orders[r].size() == static_cast<std::size_t>(6 * m));
    for (int mb = 0; mb < m; ++mb)
      for (int chunk = 0; chunk < 2; ++chunk) {
        INFO("stage " << r << " micro-batch " << mb << " chunk " << chunk);
        const auto& f = where[{PassKind::F, mb, chunk}];
        const auto& b = where[{PassKind::B, mb, chunk}];
        const auto& w = where[{PassKind::W, mb, chunk}];
        REQUIRE(f.size() == 1);
        REQUIRE(b.size() == 1);
        REQUIRE(w.size() == 1);
        CHECK(f[0] < b[0]);
        CHECK(b[0] < w[0]);
      }
  }
}

// Every case of a pinned file: our order action by action, and the reference's makespan and worst
// idle time from our simulator.  Returns the number of cases.
int check_pinned(const nlohmann::json& pinned) {
  CHECK(pinned.at("source").at("commit") == "39f2c186a27580b7051eb51e0f651e1efd0a8170");
  int cases = 0;
  for (const auto& c : pinned.at("cases")) {
    const int p = c.at("stages").get<int>();
    const int m = c.at("micro_batches").get<int>();
    ZbVPassTimes times;
    if (c.contains("times")) times = {c["times"][0].get<int>(), c["times"][1].get<int>(), c["times"][2].get<int>()};
    INFO("p=" << p << " m=" << m << " times (" << times.forward << ", " << times.backward_input << ", "
              << times.weight << ")");
    const Orders ours = zb_v_actions(p, m, times);
    REQUIRE(ours.size() == c.at("order").size());
    for (std::size_t r = 0; r < ours.size(); ++r) {
      const std::vector<Action> theirs = parse_stage(c.at("order")[r].get<std::string>());
      INFO("stage " << r);
      REQUIRE(ours[r].size() == theirs.size());
      for (std::size_t i = 0; i < theirs.size(); ++i) {
        INFO("action " << i << ": ours " << describe(ours[r][i]) << ", reference " << describe(theirs[i]));
        REQUIRE(ours[r][i] == theirs[i]);
      }
    }
    check_passes_once_in_order(m, ours);
    const Timing t = simulate(p, ours, times);
    CHECK(t.makespan == c.at("makespan").get<int>());
    CHECK(t.worst_idle == c.at("bubble").get<int>());
    CHECK(t.peak_contexts <= 2 * p);
    ++cases;
  }
  return cases;
}

}  // namespace

TEST_CASE("zb-v order equals the zero-bubble authors' greedy at unit costs", "[plan][schedule][zb-v]") {
  const nlohmann::json pinned = load_pinned("zb_v_unit_orders.json");
  int expected = 0;  // every m = p..4p for p = 2..8
  for (int p = 2; p <= 8; ++p) expected += 3 * p + 1;
  CHECK(check_pinned(pinned) == expected);
  for (const auto& c : pinned.at("cases"))  // as the reference found
    CHECK(c.at("makespan").get<int>() == 6 * c.at("micro_batches").get<int>() + c.at("stages").get<int>() - 1);
}

TEST_CASE("zb-v order equals the zero-bubble authors' greedy at other pass times", "[plan][schedule][zb-v]") {
  CHECK(check_pinned(load_pinned("zb_v_timed_orders.json")) == 120);  // 5 times × p = 2..6 × 4 or 5 m
}

TEST_CASE("zb-v order runs every pass once, in 6m + p − 1 unit times, within 2p contexts", "[plan][schedule][zb-v]") {
  for (int p = 2; p <= 12; ++p) {
    std::vector<int> ms;
    for (int m = p; m <= 4 * p; ++m) ms.push_back(m);
    ms.push_back(6 * p + 1);
    for (int m : ms) {
      INFO("p=" << p << " m=" << m);
      const Orders orders = zb_v_actions(p, m);
      REQUIRE(orders.size() == static_cast<std::size_t>(p));
      check_passes_once_in_order(m, orders);
      const Timing t = simulate(p, orders);
      CHECK(t.makespan == 6 * m + p - 1);
      if (m >= 2 * p - 1) CHECK(t.worst_idle == 0);
      CHECK(t.peak_contexts <= 2 * p);
    }
  }
}

TEST_CASE("zb-v order refuses fewer than 2 stages, fewer micro-batches than stages, or empty passes",
          "[plan][schedule][zb-v]") {
  CHECK_THROWS_AS(zb_v_actions(1, 4), Error);
  CHECK_THROWS_WITH(zb_v_actions(1, 4), Contains("zb-v") && Contains("p=1"));
  CHECK_THROWS_WITH(zb_v_actions(0, 4), Contains("p=0"));
  CHECK_THROWS_AS(zb_v_actions(4, 3), Error);
  CHECK_THROWS_WITH(zb_v_actions(4, 3), Contains("zb-v") && Contains("m=3") && Contains("p=4"));
  CHECK_THROWS_WITH(zb_v_actions(2, 0), Contains("m=0"));
  CHECK_THROWS_WITH(zb_v_actions(2, 2, {1, 1, 0}), Contains("zb-v") && Contains("weight=0"));
  CHECK_THROWS_WITH(zb_v_actions(2, 2, {-1, 1, 1}), Contains("forward=-1"));
}
