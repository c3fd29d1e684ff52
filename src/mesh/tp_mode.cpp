#include "mesh/tp_mode.hpp"

namespace mdtp {

TpGridKind grid_kind(TpMode mode) {
  switch (mode) {
    case TpMode::none:
    case TpMode::d1:
    case TpMode::d1_sp: return TpGridKind::d1;
    case TpMode::d2: return TpGridKind::d2;
    case TpMode::d2p5: return TpGridKind::d2p5;
    case TpMode::d3: return TpGridKind::d3;
  }
  return TpGridKind::d1;
}

}  // namespace mdtp
