#include "model/fused_columns.hpp"

#include "core/error.hpp"

namespace mdtp {

std::vector<std::int64_t> block_grouped_columns(const std::vector<std::int64_t>& part_widths, std::int64_t blocks,
                                                const std::string& what) {
  return block_grouped_columns(part_widths, std::vector<std::int64_t>(part_widths.size(), blocks), blocks, what);
}

std::vector<std::int64_t> block_grouped_columns(const std::vector<std::int64_t>& part_widths,
                                                const std::vector<std::int64_t>& part_blocks, std::int64_t blocks,
                                                const std::string& what) {
  require(blocks > 0, what, ": the column split must be positive; got ", blocks);
  require(part_blocks.size() == part_widths.size(), what, ": ", part_blocks.size(), " block counts for ",
          part_widths.size(), " fused parts");
  for (std::size_t p = 0; p < part_widths.size(); ++p) {
    const std::int64_t w = part_widths[p], n = part_blocks[p];
    require(n > 0 && blocks % n == 0, what, ": a fused part cut into ", n, " blocks cannot follow a split into ",
            blocks);
    require(w > 0 && w % n == 0, what, ": a fused part of width ", w, " does not split into ", n,
            " equal column blocks");
  }
  std::vector<std::int64_t> logical;
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::int64_t part_start = 0;
    for (std::size_t p = 0; p < part_widths.size(); ++p) {
      const std::int64_t piece = part_widths[p] / part_blocks[p], block = b / (blocks / part_blocks[p]);
      for (std::int64_t c = 0; c < piece; ++c) logical.push_back(part_start + block * piece + c);
      part_start += part_widths[p];
    }
  }
  return logical;
}

}  // namespace mdtp
