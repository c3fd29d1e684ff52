#pragma once
// Fused weights whose column blocks a mode splits over ranks: the attention's Q|K|V projection and
// Llama's gate|up projection are each ONE Linear (one GEMM, one set of collectives), yet every rank
// must hold matching pieces of every part — whole heads of Q with their K and V, the gate columns
// with the up columns they multiply.  So the stored columns are BLOCK-GROUPED: with the columns
// split into `blocks` contiguous blocks, storage block b is [part 0's block b | part 1's block b |
// ...].  Checkpoints and initial values use the logical order (all of part 0, then all of part 1,
// ...), which ModelParam::logical_columns maps to.
#include <cstdint>
#include <string>
#include <vector>

namespace mdtp {

// Storage column → logical column of a fused tensor of parts `part_widths` split into `blocks`
// column blocks.  Every part must divide by `blocks` (an error names `what` and the widths).
std::vector<std::int64_t> block_grouped_columns(const std::vector<std::int64_t>& part_widths, std::int64_t blocks,
                                                const std::string& what);

// The same where part p is cut into part_blocks[p] blocks only (a divisor of `blocks`: the
// key/value part of fewer heads than the ranks splitting them): storage block b holds part p's
// block b / (blocks / part_blocks[p]), so blocks / part_blocks[p] consecutive storage blocks hold
// copies of it, and several storage columns map to one logical column.
std::vector<std::int64_t> block_grouped_columns(const std::vector<std::int64_t>& part_widths,
                                                const std::vector<std::int64_t>& part_blocks, std::int64_t blocks,
                                                const std::string& what);

}  // namespace mdtp
