#pragma once
// KernelTally: what one simulated rank's kernels were charged while its steps ran, per kernel kind
// (calls, bytes read and written, modelled seconds) — the instrument that says where a simulated
// step's compute went, kind by kind, so it can be held against the step model's kernel list
// (`mdtp cost --kernels engine`, docs/simulate.md).
//
// The charging Backend and model kernels (charging_backend.hpp, charging_gpt_kernels.hpp) of the
// rank that asks for it report every kernel here; only those charged between set_counting(true)
// and set_counting(false) are counted (the trainer's steps: initialisation and reports left out).
#include <cstdint>
#include <map>
#include <string>

#include "io/table.hpp"

namespace mdtp::simulate {

struct KernelKindCharge {
  std::int64_t calls = 0;
  double bytes = 0.0;    // read and written, as charged (a GEMM: its operands and result)
  double seconds = 0.0;  // the modelled time charged to the simulated clock
};

class KernelTally {
 public:
  void set_counting(bool counting) { counting_ = counting; }
  void add(const char* kind, double bytes, double seconds);
  const std::map<std::string, KernelKindCharge>& kinds() const { return kinds_; }
  KernelKindCharge total() const;
  // One row per kind, divided by `steps` (per step); columns kind, calls, bytes, seconds.
  Table table(std::int64_t steps) const;
  // One line: per step, the kernels, their seconds, GEMMs against the rest.
  std::string summary(std::int64_t steps) const;

 private:
  bool counting_ = false;
  std::map<std::string, KernelKindCharge> kinds_;
};

}  // namespace mdtp::simulate
