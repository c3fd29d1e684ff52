#include "cost/chunked_overlap.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp::cost {

double chunked_exposure(double collective, double pass, int chunks, int group) {
  require(chunks >= 1 && group >= 1, "chunked_exposure needs at least one chunk and one micro-batch per group; got ",
          chunks, " and ", group);
  if (chunks == 1) return collective - pass;
  const double v = static_cast<double>(chunks);
  double left = collective / v;  // k = 0: the last chunk's reduction, launched after its last pass
  for (int k = 1; k < chunks; ++k)
    left = std::max(left, (k + 1) * collective / v - static_cast<double>(k) * group * pass / v);
  return left;
}

}  // namespace mdtp::cost
