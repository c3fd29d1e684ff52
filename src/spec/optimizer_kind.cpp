#include "spec/optimizer_kind.hpp"

#include "core/error.hpp"

namespace mdtp {

OptimizerKind parse_optimizer_kind(std::string_view name) {
  for (OptimizerKind k : all_optimizer_kinds())
    if (name == optimizer_kind_name(k)) return k;
  throw_error("unknown optimizer '", name, "'; expected sgd or adamw");
}

const char* optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

const std::vector<OptimizerKind>& all_optimizer_kinds() {
  static const std::vector<OptimizerKind> kinds{OptimizerKind::sgd, OptimizerKind::adamw};
  return kinds;
}

}  // namespace mdtp
