#include "simulate/kernel_tally.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace mdtp::simulate {

void KernelTally::add(const char* kind, double bytes, double seconds) {
  if (!counting_) return;
  KernelKindCharge& k = kinds_[kind];
  ++k.calls;
  k.bytes += bytes;
  k.seconds += seconds;
}

KernelKindCharge KernelTally::total() const {
  KernelKindCharge all;
  for (const auto& [kind, k] : kinds_) {
    all.calls += k.calls;
    all.bytes += k.bytes;
    all.seconds += k.seconds;
  }
  return all;
}

Table KernelTally::table(std::int64_t steps) const {
  const double per = 1.0 / static_cast<double>(std::max<std::int64_t>(1, steps));
  Table t;
  t.text("kind").real("calls").real("bytes").real("seconds");
  for (const auto& [kind, k] : kinds_)
    t.row()(kind)(static_cast<double>(k.calls) * per)(k.bytes * per)(k.seconds * per);
  return t;
}

std::string KernelTally::summary(std::int64_t steps) const {
  const double per = 1.0 / static_cast<double>(std::max<std::int64_t>(1, steps));
  const KernelKindCharge all = total();
  const auto gemm = kinds_.find("gemm");
  const KernelKindCharge g = gemm == kinds_.end() ? KernelKindCharge{} : gemm->second;
  return fmt::format(
      "simulated kernels on rank 0, per step: {:.0f} charged {:.3f} ms ({:.0f} GEMMs {:.3f} ms, {:.0f} others "
      "{:.3f} ms; by kind in the kernels table)",
      static_cast<double>(all.calls) * per, all.seconds * per * 1e3, static_cast<double>(g.calls) * per,
      g.seconds * per * 1e3, static_cast<double>(all.calls - g.calls) * per, (all.seconds - g.seconds) * per * 1e3);
}

}  // namespace mdtp::simulate
