#include "tp/replicated_columns.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"

namespace mdtp {

void sum_replicated_columns(Tensor grad, std::int64_t cols, const ReplicatedColumns& rc, const Mesh& mesh,
                            const Backend& backend) {
  Communicator& comm = mesh.comm(rc.group);
  if (comm.size() == 1) return;
  require(cols > 0 && grad.numel() % cols == 0 && rc.first >= 0 && rc.count > 0 && rc.first + rc.count <= cols,
          "replicated columns [", rc.first, ", ", rc.first + rc.count, ") of a shard of ", grad.numel(),
          " elements in rows of ", cols);
  const std::int64_t rows = grad.numel() / cols;
  Tensor whole = grad.reshaped({rows, cols});
  Tensor packed = backend.empty({rows, rc.count}, grad.dtype(), MemCategory::communication);
  backend.copy_block(whole, 0, rc.first, packed, 0, 0, rows, rc.count);
  comm.all_reduce(packed);
  backend.copy_block(packed, 0, 0, whole, 0, rc.first, rows, rc.count);
}

double uncounted_squares(const Tensor& segment, std::int64_t first, std::int64_t cols, const ReplicatedColumns& rc,
                         const Mesh& mesh, const Backend& backend) {
  if (mesh.comm(rc.group).rank() == 0) return 0.0;
  const Tensor flat = segment.reshaped({segment.numel()});
  const std::int64_t last = first + flat.numel();
  double sum = 0.0;
  // Row by row of the shard, the part of the replicated columns inside [first, last).
  for (std::int64_t row = first / cols; row * cols < last; ++row) {
    const std::int64_t lo = std::max(first, row * cols + rc.first);
    const std::int64_t hi = std::min(last, row * cols + rc.first + rc.count);
    if (lo < hi) sum += backend.sum_squares(flat.row_slice(lo - first, hi - first));
  }
  return sum;
}

}  // namespace mdtp
