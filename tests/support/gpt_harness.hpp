#pragma once
// Shared pieces of the GPT model tests: the (mode, mesh) cases per MPI world size, a model on its
// own mesh (the world, or MPI_COMM_SELF for the serial reference every rank computes), random
// batches and parameters, and logical (checkpoint-layout) parameter maps.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "support/gpt_reference.hpp"
#include "support/shared_files.hpp"
#include "model/gpt.hpp"
#include "support/tp_harness.hpp"

namespace mdtp::testing {

int world_rank();


// Every (mode, mesh) the model tests run at this world size, with several data-parallel sizes.
std::vector<ModeCase> model_cases_for_world(int world);
// A tiny model and global batch every case of that world size can split.
struct ModelSize {
  ModelShape config;
  std::int64_t batch = 0;  // global, in sequences
};
ModelSize model_size_for_world(int world);

struct TokenBatch {
  std::vector<std::int32_t> inputs, targets;  // [batch, T] row-major
};
TokenBatch random_batch(const ModelShape& config, std::int64_t batch, unsigned seed);

// A GPT model in one mode on a mesh over `comm`.
struct GptRun {
  GptRun(const ModeCase& c, const ModelShape& config, std::int64_t global_batch, MPI_Comm comm = MPI_COMM_WORLD,
         DType dtype = DType::f64, std::uint64_t seed = 1234);
  CommLedger ledger;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<TensorParallelMode> mode;
  std::unique_ptr<GptModel> model;

  // This rank's replica's rows of a global [batch, T] array.
  std::vector<std::int32_t> replica_rows(const std::vector<std::int32_t>& global) const;
  // forward_backward on this replica's rows of `batch`, then reduce_gradients; returns the loss.
  double step(const TokenBatch& batch);
  ParamMap gather(bool grad) const;  // full logical tensors (collective over tp)
  void set(const ParamMap& values);  // every rank passes the same map
};

// The serial reference model (mode none) on MPI_COMM_SELF: one per rank, same init.
ModeCase serial_case();

// Random logical values for every parameter of `run` (LayerNorm γ around 1), identical on every
// rank: a model far from its small-init regime, so every gradient is sizeable.
ParamMap random_parameters(const GptRun& run, unsigned seed, double scale = 0.2);

}  // namespace mdtp::testing
