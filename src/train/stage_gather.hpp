#pragma once
// Full tensors from every pipeline stage onto the writer rank, one tensor at a time, for
// checkpoints: every rank of a stage produces its stage's tensors in order (a collective within
// the stage: the engine gathers its shards over dp and tp), and each stage's representative
// (tensor-parallel rank 0 of data-parallel replica 0, which then holds the full tensor) sends it
// to world rank 0, which hands it to a consumer (the file writer) before the next one arrives.  So
// no rank ever holds more than one full tensor of the model: ZeRO-3's promise that the model is
// never materialised in full on a rank holds while a checkpoint is written too.  Raw MPI: this is
// file I/O traffic, not training communication, and stays out of the ledger.
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "mesh/mesh.hpp"

namespace mdtp {

struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<double> values;
};

// Collective over `world`.  Every rank calls produce(0), …, produce(count − 1) in order, where
// `count` is the number of tensors its stage holds (the same on every rank of a stage; produce
// may communicate within the stage).  World rank 0 — stage 0's representative — passes stage 0's
// tensors to `consume` as it produces them, then stage 1's as they arrive, and so on; `consume`
// is called on world rank 0 only.  A tensor two stages hold (the tied wte) reaches it twice.
void stream_stage_tensors(std::size_t count, const std::function<NamedTensor(std::size_t)>& produce,
                          const std::function<void(NamedTensor&&)>& consume, const Mesh& mesh, MPI_Comm world);

}  // namespace mdtp
