#pragma once
// Naming a non-finite training step (docs/failures.md): which parameter's gradient first holds a
// NaN or an Inf.  Searched only once the loss or the gradient norm — values every rank already
// has — is non-finite, so normal steps pay nothing.
#include <mpi.h>

#include <string>

#include "mesh/mesh.hpp"
#include "zero/zero_engine.hpp"

namespace mdtp {

// Collective over `world` (every rank calls it with the same `reduced`).  Each rank searches its
// own gradients in parameter order: with `reduced` (between ZeroEngine::finish_gradients and
// step) the reduced gradients through ZeroEngine::tp_shard, which maps ZeRO shards back to
// parameters (collective over dp); otherwise the parameters' local gradient tensors.  The lowest
// world rank that finds one names it, identically on every rank:
//   "'transformer.h.0.mlp.c_fc.weight' element 37 = NaN (world rank 1)"
// or "no gradient element is non-finite" when none does.
// Device gradients are copied to the host first (this is the rare path).
std::string locate_nonfinite_gradient(ZeroEngine& engine, const Mesh& mesh, const Backend& backend, MPI_Comm world,
                                      bool reduced);

}  // namespace mdtp
