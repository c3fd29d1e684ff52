#include "spec/tp_mode.hpp"

#include <string>

#include "core/error.hpp"

namespace mdtp {

TpMode parse_tp_mode(std::string_view name) {
  for (TpMode mode : all_tp_modes())
    if (name == tp_mode_name(mode)) return mode;
  throw_error("unknown tensor-parallel mode '", std::string(name), "'; expected one of ", tp_mode_list());
}

const char* tp_mode_name(TpMode mode) {
  switch (mode) {
    case TpMode::none: return "none";
    case TpMode::d1: return "1d";
    case TpMode::d1_sp: return "1d-sp";
    case TpMode::d2: return "2d";
    case TpMode::d2p5: return "2.5d";
    case TpMode::d3: return "3d";
  }
  return "?";
}

const std::vector<TpMode>& all_tp_modes() {
  static const std::vector<TpMode> modes{TpMode::none, TpMode::d1, TpMode::d1_sp, TpMode::d2, TpMode::d2p5, TpMode::d3};
  return modes;
}

const char* tp_mode_list() { return "none, 1d, 1d-sp, 2d, 2.5d, 3d"; }

bool is_sequence_parallel(TpMode mode) { return mode == TpMode::d1_sp; }

bool is_megatron_1d(TpMode mode) { return mode == TpMode::d1 || mode == TpMode::d1_sp; }

}  // namespace mdtp
