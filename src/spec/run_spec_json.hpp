#pragma once
// A RunSpec as JSON, the form a run is described in outside the program (a spec file, the results
// file's record of what ran):
//
//   {"version": 1,
//    "model": {"layers", "hidden", "heads", "seq", "vocab", "ffn_hidden", "kv_heads", "family",
//              "tied_head", "rope_theta", "norm_eps"},
//    "global_batch": 8,
//    "parallel": {"mode", "tp", "depth", "pp", "dp", "schedule", "micro_batches", "chunks",
//                 "group_size", "pp_layers", "stage_mapping"},
//    "zero": {"stage", "bucket_mb", "offload", "keep_parameters", "reduce_per_micro_batch"},
//    "recompute": "none",
//    "precision": {"params", "grad_reduce", "loss_scale", "initial_loss_scale", "min_loss_scale",
//                  "loss_scale_window", "hysteresis"},
//    "optimizer": {"kind", "lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip"},
//    "dropout": 0.0, "seed": 1234}
//
// Enums are written as their names ("1d", "1f1b", "selective", "bf16", "adamw", …).  The writer
// writes every member, so a record says exactly what ran even after a default changes; the reader
// takes a missing key from the defaults it is given, so a hand-written spec names only what
// differs.  The reader refuses — with one line naming the key's full path — an unknown key (a typo
// would otherwise be a silently ignored setting), a value of the wrong type, an unknown enum name
// and a version other than 1.  It does not validate(): a spec may be completed (say, from the
// command line) before it is checked.  Writing and reading back gives the same RunSpec exactly
// (nlohmann-json writes doubles in a form that reads back to the same bits; seeds are unsigned
// 64-bit integers).
#include <string>

#include <nlohmann/json.hpp>

#include "spec/run_spec.hpp"

namespace mdtp {

// The format version to_json writes and run_spec_from_json reads.
inline constexpr int kRunSpecVersion = 1;

nlohmann::json to_json(const RunSpec& spec);
RunSpec run_spec_from_json(const nlohmann::json& json, const RunSpec& defaults = {});

// The spec as a file holds it: pretty JSON (2-space indent, the members in the order above) and a
// trailing newline.
std::string run_spec_text(const RunSpec& spec);
// Reads a spec file (missing keys from `defaults`); an mdtp::Error naming the path when it cannot
// be read, is not JSON, or is refused by run_spec_from_json.
RunSpec read_run_spec_file(const std::string& path, const RunSpec& defaults = {});

}  // namespace mdtp
