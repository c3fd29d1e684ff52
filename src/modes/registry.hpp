#pragma once
// The registry above the modes: builds the TensorParallelMode of a TpMode.  It sits above the
// four mode folders (tp1d, tp2d, tp2p5d, tp3d) so that the shared layer (tp/) never includes a
// mode; a model is written against tp/mode.hpp and handed the result.
#include <memory>

#include "tp/mode.hpp"

namespace mdtp {

// Checks the mesh fits the mode (its TP sub-grid is the mode's: 2d needs a mesh built for 2d;
// none needs tp=1) on every rank before any collective, and builds it.
std::unique_ptr<TensorParallelMode> make_tp_mode(TpMode mode, const TpContext& ctx);

}  // namespace mdtp
