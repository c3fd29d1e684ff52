#include "cost/published.hpp"

#include <cmath>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

int exact_root(int value, int n, TpMode mode) {
  const int q = static_cast<int>(std::lround(std::pow(value, 1.0 / n)));
  int power = 1;
  for (int e = 0; e < n; ++e) power *= q;
  require(q >= 1 && power == value, "mode ", mode, " needs tp to be a ", n == 2 ? "square" : "cube", "; got tp=", value);
  return q;
}

// Aggregate construction: chained string assignments trip GCC 12's false -Wrestrict (PR 105329).
PublishedCosts row(std::string name, std::string note, double compute, double params, double activations,
                   double bandwidth, double latency, const char* f_compute, const char* f_params,
                   const char* f_activations, const char* f_bandwidth, const char* f_latency) {
  return PublishedCosts{std::move(name), std::move(note), compute, params, activations, bandwidth, latency,
                        f_compute, f_params, f_activations, f_bandwidth, f_latency};
}

}  // namespace

PublishedCosts published_costs(TpMode mode, int tp, int depth) {
  require(tp >= 1 && depth >= 1, "published costs need tp >= 1 and depth >= 1; got tp=", tp, ", depth=", depth);
  if (mode == TpMode::none) return row("serial", "one rank: no parallel row in the table", 1, 1, 1, 0, 0, "1", "1", "1", "0", "0");
  if (is_megatron_1d(mode)) {
    const double P = tp;
    return row("1D", mode == TpMode::d1_sp ? "the table has no sequence-parallel row: 1D shown" : "", 1 / P, 1 / P, 1,
               2 * (P - 1) / P, 2 * (P - 1), "1/P", "1/P", "1", "2(P-1)/P", "2(P-1)");
  }
  if (mode == TpMode::d2) {
    const double q = exact_root(tp, 2, mode);
    return row("2D", "", 1 / (q * q), 1 / (q * q), 1 / (q * q), 6 * (q - 1) / q, 6 * (q - 1), "1/q^2", "1/q^2", "1/q^2",
               "6(q-1)/q", "6(q-1)");
  }
  if (mode == TpMode::d2p5) {
    require(tp % depth == 0, "mode 2.5d needs tp = d·q²; got tp=", tp, ", d=", depth);
    const double q = exact_root(tp / depth, 2, mode), d = depth;
    return row("2.5D", "", 1 / (d * q * q), 1 / (q * q), 1 / (d * q * q), 3 * (q - 1) * (d + 1) / (d * q), 6 * (q - 1),
               "1/(d*q^2)", "1/q^2", "1/(d*q^2)", "3(q-1)(d+1)/(d*q)", "6(q-1)");
  }
  if (mode == TpMode::d3) {
    const double q = exact_root(tp, 3, mode);
    return row("3D", "", 1 / (q * q * q), 1 / (q * q * q), 1 / (q * q * q), 6 * (q - 1) / (q * q * q), 6 * (q - 1),
               "1/q^3", "1/q^3", "1/q^3", "6(q-1)/q^3", "6(q-1)");
  }
  throw_error("unknown tensor-parallel mode '", mode, "'; expected one of none, 1d, 1d-sp, 2d, 2.5d, 3d");
}

}  // namespace mdtp::cost
