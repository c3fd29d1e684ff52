#include "model/fused_columns.hpp"

#include "core/error.hpp"

namespace mdtp {

std::vector<std::int64_t> block_grouped_columns(const std::vector<std::int64_t>& part_widths, std::int64_t blocks,
                                                const std::string& what) {
  require(blocks > 0, what, ": the column split must be positive; got ", blocks);
  std::int64_t total = 0;
  for (std::int64_t w : part_widths) {
    require(w > 0 && w % blocks == 0, what, ": a fused part of width ", w, " does not split into ", blocks,
            " equal column blocks");
    total += w;
  }
  std::vector<std::int64_t> logical;
  logical.reserve(static_cast<std::size_t>(total));
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::int64_t part_start = 0;
    for (std::int64_t w : part_widths) {
      const std::int64_t piece = w / blocks;
      for (std::int64_t c = 0; c < piece; ++c) logical.push_back(part_start + b * piece + c);
      part_start += w;
    }
  }
  return logical;
}

}  // namespace mdtp
