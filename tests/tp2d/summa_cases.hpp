#pragma once
// The 2D and 2.5D meshes the SUMMA tests run on, chosen from the MPI world size, and the
// problem sizes they use: every dimension a distinct multiple of its divisor, so that a wrong
// block size or a transposed operand shows up as a wrong element count or a wrong value.
#include <cstdint>
#include <string>
#include <vector>

#include "support/tp_harness.hpp"

namespace mdtp::testing {

struct SummaCase {
  ModeCase mode;  // "2d" or "2.5d" with its mesh
  int q = 1, d = 1;
  std::int64_t batch() const { return static_cast<std::int64_t>(d) * q * 3; }  // B: rows of X
  std::int64_t in() const { return static_cast<std::int64_t>(q) * 5; }        // K
  std::int64_t out() const { return static_cast<std::int64_t>(q) * 7; }       // N
};

inline SummaCase summa_case(int world, const std::string& mode, int q, int d) {
  MeshConfig c;
  c.world = world;
  c.tp = d * q * q;
  c.tp_mode = parse_tp_mode(mode);
  c.tp_depth = d;
  return SummaCase{ModeCase{c.tp_mode, c}, q, d};
}

// Every 2D (q, with the rest of the world as dp) and 2.5D (q, d) mesh with q >= 2 that fits,
// plus the degenerate 2.5D q = 1 (pure depth) on 4 ranks.
inline std::vector<SummaCase> summa_cases(int world) {
  std::vector<SummaCase> cases;
  for (int q : {2, 3}) {
    if (world % (q * q) != 0) continue;
    cases.push_back(summa_case(world, "2d", q, 1));
    for (int d = 1; d * q * q <= world; ++d)
      if (world % (d * q * q) == 0) cases.push_back(summa_case(world, "2.5d", q, d));
  }
  if (world == 4) cases.push_back(summa_case(world, "2.5d", 1, 4));
  return cases;
}

inline std::string summa_label(const SummaCase& c) {
  return std::string(tp_mode_name(c.mode.mode)) + " q=" + std::to_string(c.q) + " d=" + std::to_string(c.d) + " world=" +
         std::to_string(c.mode.config.world);
}

}  // namespace mdtp::testing
