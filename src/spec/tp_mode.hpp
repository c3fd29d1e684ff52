#pragma once
// The tensor-parallel modes, parsed once from their names (command line, run spec, test tables)
// into an enum; everything below the command line compares enums, never strings.
//
//   none   the serial reference (tp = 1)         1d     Megatron column/row
//   1d-sp  1D with sequence parallelism           2d     SUMMA / Optimus on a q×q grid
//   2.5d   Tesseract, d slabs of q×q              3d     a q×q×q cube
//
// The run spec names a mode without a mesh, so the enum lives here; which TP sub-grid a mode runs
// on (grid_kind) is the mesh's (mesh/tp_mode.hpp).
#include <ostream>
#include <string_view>
#include <vector>

namespace mdtp {

enum class TpMode { none, d1, d1_sp, d2, d2p5, d3 };

// "none" | "1d" | "1d-sp" | "2d" | "2.5d" | "3d"; an mdtp::Error naming the value otherwise.
TpMode parse_tp_mode(std::string_view name);
const char* tp_mode_name(TpMode mode);
// Every mode, in the order above.
const std::vector<TpMode>& all_tp_modes();
// "none, 1d, 1d-sp, 2d, 2.5d, 3d" (for messages and --help).
const char* tp_mode_list();

// Writes the name, so that messages can stream a mode.
inline std::ostream& operator<<(std::ostream& os, TpMode mode) { return os << tp_mode_name(mode); }

bool is_sequence_parallel(TpMode mode);
// Megatron's column/row split, with or without sequence parallelism (1d, 1d-sp): the modes whose
// TP collectives are all-reduces (or their reduce-scatter/all-gather halves) over the whole group.
bool is_megatron_1d(TpMode mode);

}  // namespace mdtp
