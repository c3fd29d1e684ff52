#pragma once
// Correctness of a benchmark step: the distributed output Y, input gradient dX and every
// parameter gradient (after grad-sync), gathered to full tensors, against the same layer run
// serially (mode "none") on rank 0 with the same parameters and inputs.  Error per tensor is
// ‖Δ‖∞ / ‖ref‖∞ (docs/theory.md §2: LayerNorm's dX has entries that are always near zero, so no
// element-wise relative test).  Tolerances are looser than the unit tests' (1e-12 / 1e-5) because
// benchmark sizes sum over thousands of terms: f64 1e-10, f32 1e-4.
#include <mpi.h>

#include <string>
#include <vector>

#include "bench/layer_under_test.hpp"
#include "mesh/mesh.hpp"

namespace mdtp::bench {

struct TensorError {
  std::string tensor;  // "Y", "dX", or a parameter name + ".grad"
  double relative_error = 0.0;
};

struct CheckResult {
  bool ran = false;
  bool passed = true;
  double tolerance = 0.0;
  std::vector<TensorError> errors;  // same on every rank
  double worst() const;
};

double check_tolerance(DType dtype);

// Collective over the mesh's world (gathers through the "tp" and "dp" groups: call it with the
// ledger disabled).  `y` and `dx` are this rank's shards from the step just run, whose gradients
// have been synchronised.  `seed` is the TpContext seed; `input_seed` the one of step_inputs.
CheckResult check_against_serial(LayerUnderTest& layer, const Tensor& y, const Tensor& dx, const Mesh& mesh,
                                 const Backend& backend, const cost::Workload& workload, std::uint64_t seed,
                                 std::uint64_t input_seed, MPI_Comm world);

}  // namespace mdtp::bench
