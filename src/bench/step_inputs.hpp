#pragma once
// The input X and the output gradient dY of a benchmark step.  Their elements are drawn from a
// counter-based generator (init_value: a function of seed, name and the element's global index),
// so each rank makes only its own shard — no full tensor is ever built or scattered — and the
// serial reference on rank 0 can regenerate the full tensors exactly.
//
// Data parallelism: `rows` is what one TP group processes (cost::Workload::rows); data-parallel
// replica d (its position in the "dp" group) owns global rows [d·rows, (d+1)·rows) of the
// dp·rows-row global batch, sharded inside its TP group by the layer's layout.
#include <cstdint>
#include <string>

#include "mesh/mesh.hpp"
#include "tp/layout.hpp"

namespace mdtp::bench {

struct ReplicaRows {
  std::int64_t rows = 0;   // rows of one data-parallel replica
  std::int64_t first = 0;  // its first global row
  std::int64_t global = 0; // rows of all replicas together
};
// This rank's replica of `rows` rows.
ReplicaRows replica_rows(const Mesh& mesh, std::int64_t rows);

// This rank's shard of its replica's [rows, cols] block of the global tensor `name` in `layout`.
Tensor make_input_shard(const std::string& name, std::uint64_t seed, const Layout& layout, const Mesh& mesh,
                        const Backend& backend, DType dtype, std::int64_t rows, std::int64_t cols);

// The whole global tensor `name`, all replicas' rows: [global_rows, cols] (the serial reference).
Tensor make_full_input(const std::string& name, std::uint64_t seed, const Backend& backend, DType dtype,
                       std::int64_t rows, std::int64_t cols);

inline constexpr const char* kInputName = "bench.input.x";
inline constexpr const char* kOutputGradName = "bench.input.dy";

}  // namespace mdtp::bench
