#pragma once
// Which kind of TP sub-grid (tp_grid.hpp) each tensor-parallel mode runs on: none, 1d and 1d-sp on
// the 1d grid, the others on their own.  The modes themselves (the enum, its names and parsing)
// are the run spec's vocabulary, spec/tp_mode.hpp, included here so that existing includes of
// this header keep seeing them.
#include "mesh/tp_grid.hpp"
#include "spec/tp_mode.hpp"

namespace mdtp {

TpGridKind grid_kind(TpMode mode);

}  // namespace mdtp
