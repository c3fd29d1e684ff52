#include "bench/step_inputs.hpp"

#include <vector>

#include "spec/names.hpp"
#include "tp/parameter.hpp"

namespace mdtp::bench {
namespace {
// Unit normal entries: activations and gradients of order one, like a normalised residual.
const InitSpec kInputInit{InitSpec::Kind::normal, 1.0, 0.0};
}  // namespace

ReplicaRows replica_rows(const Mesh& mesh, std::int64_t rows) {
  require(rows > 0, "a step needs a positive number of rows; got ", rows);
  const int replica = mesh.comm(group::dp).rank();
  return ReplicaRows{rows, replica * rows, rows * mesh.topology().dp()};
}

Tensor make_input_shard(const std::string& name, std::uint64_t seed, const Layout& layout, const Mesh& mesh,
                        const Backend& backend, DType dtype, std::int64_t rows, std::int64_t cols) {
  const ReplicaRows replica = replica_rows(mesh, rows);
  const ShardBlock b = shard_block(layout, mesh, replica.rows, cols, name);
  std::vector<double> values(static_cast<std::size_t>(b.rows * b.cols));
  for (std::int64_t i = 0; i < b.rows; ++i) {
    const std::int64_t row = replica.first + b.row0() + i;
    for (std::int64_t j = 0; j < b.cols; ++j)
      values[static_cast<std::size_t>(i * b.cols + j)] = init_value(seed, name, row * cols + b.col0() + j, kInputInit);
  }
  return backend.from_f64(values, {b.rows, b.cols}, dtype, MemCategory::activations);
}

Tensor make_full_input(const std::string& name, std::uint64_t seed, const Backend& backend, DType dtype,
                       std::int64_t rows, std::int64_t cols) {
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  for (std::int64_t k = 0; k < rows * cols; ++k) values[static_cast<std::size_t>(k)] = init_value(seed, name, k, kInputInit);
  return backend.from_f64(values, {rows, cols}, dtype, MemCategory::activations);
}

}  // namespace mdtp::bench
