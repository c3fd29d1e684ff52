#include "spec/recompute.hpp"

#include "core/error.hpp"

namespace mdtp {

Recompute parse_recompute(std::string_view name) {
  for (Recompute r : all_recomputes())
    if (name == recompute_name(r)) return r;
  throw_error("activation recomputation must be none, selective or full; got '", name, "'");
}

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

const std::vector<Recompute>& all_recomputes() {
  static const std::vector<Recompute> policies{Recompute::none, Recompute::selective, Recompute::full};
  return policies;
}

}  // namespace mdtp
