// TpGrid: the coordinate conventions the TP layers rely on (Colossal-AI's, docs/theory.md §2).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mesh/tp_grid.hpp"
#include "mesh/tp_mode.hpp"

using mdtp::TpGrid;
using mdtp::TpGridKind;
using Groups = std::vector<std::vector<int>>;

namespace {

// Coordinates by the formulas of docs/theory.md §2, independently of TpGrid's axis table.
std::map<std::string, int> formula_coords(TpGridKind kind, int q, int t) {
  switch (kind) {
    case TpGridKind::d2: return {{"r", t / q}, {"c", t % q}};  // t = r·q + c
    case TpGridKind::d2p5: return {{"c", t % q}, {"r", t / q % q}, {"k", t / (q * q)}};  // t = c + q·r + q²·k
    case TpGridKind::d3: return {{"i", t % q}, {"j", t / q % q}, {"k", t / (q * q)}};  // t = i + q·j + q²·k
    default: return {{"t", t}};
  }
}

// Names → axes that must vary inside the group (all others fixed).
std::map<std::string, std::set<std::string>> expected_varying(TpGridKind kind) {
  switch (kind) {
    case TpGridKind::d2: return {{"tp.row", {"c"}}, {"tp.col", {"r"}}};
    case TpGridKind::d2p5:
      return {{"tp.row", {"c"}}, {"tp.col", {"r"}}, {"tp.dep", {"k"}}, {"tp.row-dep", {"c", "k"}},
              {"tp.col-dep", {"r", "k"}}};
    case TpGridKind::d3:
      return {{"tp.input", {"i"}},          {"tp.weight", {"j"}},           {"tp.output", {"k"}},
              {"tp.input-weight", {"i", "j"}}, {"tp.output-weight", {"j", "k"}}};
    default: return {};
  }
}

void check_grid(TpGridKind kind, int q, int depth) {
  const int tp = kind == TpGridKind::d3 ? q * q * q : depth * q * q;
  TpGrid grid(kind, tp, depth);
  INFO("kind " << mdtp::tp_grid_kind_name(kind) << " q=" << q << " d=" << depth);
  CHECK(grid.q() == q);
  CHECK(grid.size() == tp);

  for (int t = 0; t < tp; ++t) {
    auto f = formula_coords(kind, q, t);
    auto c = grid.coords(t);
    if (kind != TpGridKind::d3) {
      CHECK(c.r == f["r"]);
      CHECK(c.c == f["c"]);
      CHECK(c.k == (kind == TpGridKind::d2p5 ? f["k"] : 0));
    } else {
      CHECK(c.i == f["i"]);
      CHECK(c.j == f["j"]);
      CHECK(c.k == f["k"]);
    }
    CHECK(grid.rank_of(c) == t);
  }

  auto expected = expected_varying(kind);
  std::vector<std::string> names = {"tp"};
  for (const auto& [name, axes] : expected) names.push_back(name);
  auto got_names = grid.group_names();
  CHECK(got_names.front() == "tp");
  CHECK(std::set<std::string>(got_names.begin(), got_names.end()) == std::set<std::string>(names.begin(), names.end()));

  for (const auto& [name, varying] : expected) {
    INFO("group " << name);
    Groups groups = grid.local_groups(name);
    int group_size = 1;
    for (const auto& a : varying) group_size *= (a == "k" && kind == TpGridKind::d2p5) ? depth : q;
    CHECK(static_cast<int>(groups.size()) * group_size == tp);
    std::vector<int> seen(tp, 0);
    int previous_first = -1;
    for (const auto& g : groups) {
      CHECK(static_cast<int>(g.size()) == group_size);
      CHECK(std::is_sorted(g.begin(), g.end()));
      CHECK(g.front() > previous_first);  // groups ordered by lowest member
      previous_first = g.front();
      auto first = formula_coords(kind, q, g.front());
      std::set<std::vector<int>> distinct;  // varying coordinates must all differ
      for (int t : g) {
        ++seen[t];
        auto ct = formula_coords(kind, q, t);
        std::vector<int> v;
        for (const auto& [axis, value] : ct) {
          if (varying.count(axis))
            v.push_back(value);
          else
            CHECK(value == first[axis]);
        }
        distinct.insert(v);
      }
      CHECK(static_cast<int>(distinct.size()) == group_size);
      if (varying.size() == 1) {  // group rank == coordinate along the varying axis
        const std::string axis = *varying.begin();
        for (std::size_t m = 0; m < g.size(); ++m) CHECK(formula_coords(kind, q, g[m])[axis] == static_cast<int>(m));
      }
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
  Groups whole = grid.local_groups("tp");
  REQUIRE(whole.size() == 1);
  CHECK(static_cast<int>(whole[0].size()) == tp);
}

}  // namespace

TEST_CASE("TP modes parse from their names once, and each runs on its grid kind", "[mesh][tp_grid]") {
  CHECK(mdtp::grid_kind(mdtp::parse_tp_mode("none")) == TpGridKind::d1);
  CHECK(mdtp::grid_kind(mdtp::parse_tp_mode("1d")) == TpGridKind::d1);
  CHECK(mdtp::grid_kind(mdtp::parse_tp_mode("1d-sp")) == TpGridKind::d1);
  CHECK(mdtp::grid_kind(mdtp::parse_tp_mode("2d")) == TpGridKind::d2);
  CHECK(mdtp::grid_kind(mdtp::parse_tp_mode("2.5d")) == TpGridKind::d2p5);
  CHECK(mdtp::grid_kind(mdtp::parse_tp_mode("3d")) == TpGridKind::d3);
  for (mdtp::TpMode mode : mdtp::all_tp_modes()) CHECK(mdtp::parse_tp_mode(mdtp::tp_mode_name(mode)) == mode);
  CHECK(mdtp::is_sequence_parallel(mdtp::TpMode::d1_sp));
  CHECK_THROWS_WITH(mdtp::parse_tp_mode("4d"),
                    Catch::Matchers::Contains("unknown tensor-parallel mode '4d'; expected one of none, 1d, 1d-sp"));
}

TEST_CASE("1D TP grid has only the whole TP group", "[mesh][tp_grid]") {
  TpGrid grid(TpGridKind::d1, 6);
  CHECK(grid.group_names() == std::vector<std::string>{"tp"});
  CHECK(grid.local_groups("tp") == Groups{{0, 1, 2, 3, 4, 5}});
  CHECK_THROWS_WITH(grid.local_groups("tp.row"), Catch::Matchers::Contains("unknown TP group 'tp.row'"));
}

TEST_CASE("2D TP grid groups", "[mesh][tp_grid]") {
  check_grid(TpGridKind::d2, 2, 1);
  check_grid(TpGridKind::d2, 3, 1);
  TpGrid grid(TpGridKind::d2, 4);
  CHECK(grid.local_groups("tp.row") == Groups{{0, 1}, {2, 3}});
  CHECK(grid.local_groups("tp.col") == Groups{{0, 2}, {1, 3}});
}

TEST_CASE("2.5D TP grid groups", "[mesh][tp_grid]") {
  check_grid(TpGridKind::d2p5, 2, 2);
  check_grid(TpGridKind::d2p5, 3, 2);
  check_grid(TpGridKind::d2p5, 2, 1);
  TpGrid grid(TpGridKind::d2p5, 8, 2);
  CHECK(grid.local_groups("tp.dep") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(grid.local_groups("tp.row-dep") == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}});
  CHECK(grid.local_groups("tp.col-dep") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
}

TEST_CASE("3D TP grid groups", "[mesh][tp_grid]") {
  check_grid(TpGridKind::d3, 2, 1);
  check_grid(TpGridKind::d3, 3, 1);
  TpGrid grid(TpGridKind::d3, 8);
  CHECK(grid.local_groups("tp.input") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(grid.local_groups("tp.weight") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(grid.local_groups("tp.output") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(grid.local_groups("tp.input-weight") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(grid.local_groups("tp.output-weight") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
}

TEST_CASE("TP grids refuse sizes that do not fit the mode", "[mesh][tp_grid]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d2, 6), Contains("2D tensor parallelism needs a square TP size; got tp=6"));
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d3, 9), Contains("3D tensor parallelism needs a cubic TP size; got tp=9"));
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d2p5, 8, 3), Contains("2.5D") && Contains("tp=8") && Contains("d=3"));
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d2p5, 12, 2), Contains("tp=12") && Contains("d=2"));
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d2p5, 4, 0), Contains("tp_depth=0"));
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d2, 4, 2), Contains("tp_depth=2") && Contains("2.5D"));
  CHECK_THROWS_WITH(TpGrid(TpGridKind::d1, 0), Contains("tp=0"));
}
