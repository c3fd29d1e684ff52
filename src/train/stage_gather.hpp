#pragma once
// Full tensors from every pipeline stage onto the writer rank, for checkpoints and gradient dumps:
// each stage's representative (tensor-parallel rank 0 of data-parallel replica 0, which holds the
// full tensors once they are gathered over tp) sends what its stage holds to world rank 0, which
// returns them in the model's canonical order (by unit, then as each unit lists them) with the
// second copy of a tensor two stages hold (the tied wte, equal on both) dropped.  Raw MPI: this is
// file I/O traffic, not training communication, and stays out of the ledger.
#include <mpi.h>

#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "mesh/mesh.hpp"
#include "model/gpt_config.hpp"

namespace mdtp {

struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<double> values;
};

// Collective over `world`.  World rank 0 returns every stage's tensors; the others an empty list.
std::vector<NamedTensor> gather_stage_tensors(const std::vector<NamedTensor>& mine, const Mesh& mesh, MPI_Comm world,
                                              const GptConfig& config);

}  // namespace mdtp
