// RankGenerator against docs/theory.md §1's worked example and against an independent brute-force
// enumeration of "ranks that agree on every unmasked axis".
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mesh/rank_generator.hpp"

using mdtp::RankGenerator;
using Groups = std::vector<std::vector<int>>;

namespace {

// Brute force, written from the definition rather than from Megatron's loops: each rank's
// coordinate per axis is its mixed-radix digit in the order (first axis fastest).  Ranks with
// equal unmasked coordinates form a group; members are sorted by the mixed-radix index of their
// masked coordinates, groups by that of their unmasked coordinates (Megatron enumerates group
// indices over the unmasked sizes, first unmasked axis fastest).
Groups brute_force(const std::map<std::string, int>& size, const std::vector<std::string>& order,
                   const std::vector<std::string>& masked_axes) {
  int world = 1;
  for (const auto& a : order) world *= size.at(a);
  auto is_masked = [&](const std::string& a) {
    return std::find(masked_axes.begin(), masked_axes.end(), a) != masked_axes.end();
  };
  struct Entry {
    int group_key, member_key, rank;
  };
  std::vector<Entry> entries;
  for (int rank = 0; rank < world; ++rank) {
    int rest = rank, gk = 0, gm = 1, mk = 0, mm = 1;
    for (const auto& a : order) {
      int digit = rest % size.at(a);
      rest /= size.at(a);
      if (is_masked(a)) {
        mk += digit * mm;
        mm *= size.at(a);
      } else {
        gk += digit * gm;
        gm *= size.at(a);
      }
    }
    entries.push_back({gk, mk, rank});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) {
    return x.group_key != y.group_key ? x.group_key < y.group_key : x.member_key < y.member_key;
  });
  Groups out;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    if (e == 0 || entries[e].group_key != entries[e - 1].group_key) out.emplace_back();
    out.back().push_back(entries[e].rank);
  }
  return out;
}

// Whether a '-'-joined token names an axis.
bool names_axis(const std::string& token, const std::string& axis) {
  for (const auto& part : mdtp::split_token(token))
    if (part == axis) return true;
  return false;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "-") + p;
  return out;
}

}  // namespace

TEST_CASE("RankGenerator reproduces the 16-rank worked example", "[mesh][rank_generator]") {
  // tp=2, pp=4, dp=2, order tp-dp-pp (docs/theory.md §1).
  RankGenerator gen(2, 1, 2, 4, "tp-dp-pp");
  CHECK(gen.world() == 16);
  CHECK(gen.groups("tp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(gen.groups("dp") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(gen.groups("pp") == Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(gen.groups("tp-pp") == Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}});
  CHECK(gen.groups("pp-tp") == gen.groups("tp-pp"));
  CHECK(gen.groups("cp") == [] {
    Groups g;
    for (int r = 0; r < 16; ++r) g.push_back({r});
    return g;
  }());
  // The default order with cp = 1 gives the same groups.
  RankGenerator by_default(2, 1, 2, 4);
  for (const char* token : {"tp", "dp", "pp", "cp", "tp-pp", "tp-dp", "dp-cp", "tp-dp-cp"})
    CHECK(by_default.groups(token) == gen.groups(token));
}

TEST_CASE("RankGenerator appends missing size-1 axes in Megatron's order", "[mesh][rank_generator]") {
  CHECK(RankGenerator(2, 1, 2, 4, "tp-dp-pp").order() == "tp-dp-pp-cp");
  CHECK(RankGenerator(1, 1, 4, 1, "dp").order() == "dp-tp-pp-cp");
  CHECK(RankGenerator(2, 2, 2, 2).order() == "tp-cp-dp-pp");
  CHECK(RankGenerator(1, 1, 1, 1, "pp").order() == "pp-tp-dp-cp");
  CHECK_THROWS_WITH(RankGenerator(1, 1, 1, 1, ""), Catch::Matchers::Contains("order is empty"));
}

TEST_CASE("RankGenerator matches brute force for every order and token", "[mesh][rank_generator]") {
  const std::vector<std::vector<int>> shapes = {  // tp, cp, dp, pp
      {2, 1, 3, 2}, {3, 2, 2, 1}, {1, 1, 5, 1}, {2, 2, 2, 2}, {4, 1, 2, 3}, {1, 3, 1, 2}, {2, 3, 1, 4}, {1, 1, 1, 1}};
  const std::vector<std::string> tokens = {"tp",    "pp",    "dp",    "cp",       "tp-pp", "tp-dp",
                                           "dp-cp", "tp-cp", "cp-pp", "tp-dp-cp", "dp-pp", "tp-cp-dp-pp"};
  std::vector<std::string> order = {"cp", "dp", "pp", "tp"};  // sorted: next_permutation visits all 24
  int orders = 0;
  do {
    ++orders;
    for (const auto& s : shapes) {
      std::map<std::string, int> size = {{"tp", s[0]}, {"cp", s[1]}, {"dp", s[2]}, {"pp", s[3]}};
      RankGenerator gen(s[0], s[1], s[2], s[3], join(order));
      for (const auto& token : tokens) {
        // Masked axes as named in the token; the brute force uses them in order-string order.
        std::vector<std::string> masked;
        for (const auto& a : {"tp", "cp", "dp", "pp"})
          if (names_axis(token, a)) masked.push_back(a);
        INFO("order " << join(order) << " sizes tp=" << s[0] << " cp=" << s[1] << " dp=" << s[2] << " pp=" << s[3]
                      << " token " << token);
        CHECK(gen.groups(token) == brute_force(size, order, masked));
      }
    }
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 24);
}

TEST_CASE("RankGenerator groups partition the world and agree with coord()", "[mesh][rank_generator]") {
  RankGenerator gen(2, 3, 2, 2, "pp-tp-dp-cp");
  for (const char* token : {"tp", "cp", "dp", "pp", "tp-dp"}) {
    std::vector<int> seen(gen.world(), 0);
    for (const auto& g : gen.groups(token))
      for (int r : g) {
        ++seen[r];
        // members of a group agree on every axis outside the token
        for (const char* axis : {"tp", "cp", "dp", "pp"})
          if (!names_axis(token, axis))
            CHECK(gen.coord(r, axis) == gen.coord(g.front(), axis));
      }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("RankGenerator refuses bad sizes, orders and tokens", "[mesh][rank_generator]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(RankGenerator(0, 1, 1, 1), Contains("tp=0") && Contains(">= 1"));
  CHECK_THROWS_WITH(RankGenerator(1, 1, -2, 1), Contains("dp=-2"));
  CHECK_THROWS_WITH(RankGenerator(2, 1, 2, 1, "tp-ep-dp"), Contains("unknown axis 'ep'") && Contains("tp-ep-dp"));
  CHECK_THROWS_WITH(RankGenerator(2, 1, 2, 1, "tp-dp-tp"), Contains("'tp' appears more than once"));
  CHECK_THROWS_WITH(RankGenerator(2, 1, 2, 4, "tp-dp"), Contains("axis pp of size 4"));
  CHECK_THROWS_WITH(RankGenerator(2, 1, 2, 1, "tp--dp"), Contains("unknown axis ''"));
  RankGenerator gen(2, 1, 2, 1);
  CHECK_THROWS_AS(gen.groups("xx"), mdtp::Error);
  CHECK_THROWS_WITH(gen.groups("tp-xx"), Contains("unknown axis 'xx'") && Contains("tp-xx"));
  CHECK_THROWS_WITH(gen.groups("dp-dp"), Contains("'dp' appears more than once"));
}
