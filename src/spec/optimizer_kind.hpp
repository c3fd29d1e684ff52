#pragma once
// The optimizers by name: what the run spec, the command line and a checkpoint's attribute say,
// parsed once into an enum (zero/optimizer.hpp has what each one does).  "sgd" | "adamw".
#include <string_view>
#include <vector>

namespace mdtp {

enum class OptimizerKind { sgd, adamw };

// An mdtp::Error naming the value for an unknown name.
OptimizerKind parse_optimizer_kind(std::string_view name);
const char* optimizer_kind_name(OptimizerKind kind);
// Every optimizer, in the order above.
const std::vector<OptimizerKind>& all_optimizer_kinds();

}  // namespace mdtp
