#include "plan/gathered_parameters.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp {

std::int64_t gathered_parameter_peak(const std::vector<std::vector<std::size_t>>& reads,
                                     const std::vector<std::int64_t>& bucket_bytes, bool keep_for_step) {
  std::vector<bool> kept(bucket_bytes.size(), false);  // keep-for-step: gathered so far this step
  std::int64_t peak = 0;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    std::vector<bool> live = keep_for_step ? kept : std::vector<bool>(bucket_bytes.size(), false);
    for (std::size_t j = i; j <= i + 1 && j < reads.size(); ++j)
      for (std::size_t b : reads[j]) {
        require(b < bucket_bytes.size(), "gathered parameters: pass ", j, " reads bucket ", b, " of ",
                bucket_bytes.size());
        live[b] = true;
      }
    std::int64_t bytes = 0;
    for (std::size_t b = 0; b < live.size(); ++b)
      if (live[b]) bytes += bucket_bytes[b];
    peak = std::max(peak, bytes);
    if (keep_for_step) kept = live;
  }
  return peak;
}

}  // namespace mdtp
