#pragma once
// TrainRig: the objects one rank trains with, built collectively from the resolved plan in the
// order they depend on each other — the ledger, the backend, the mesh (which owns the
// communicators), the tensor-parallel mode, the kernels, this stage's model, the pipeline executor
// and the optimizer (the ZeRO engine).  It also measures what the set-up costs (the slowest rank's
// seconds to build the model and then the optimizer, docs/host-performance.md).
//
// Built once per run and never moved: the mesh refers to the ledger, the model to the mode, the
// executor and the engine to the model.
#include <mpi.h>

#include <memory>
#include <vector>

#include "comm/ledger.hpp"
#include "mesh/mesh.hpp"
#include "model/gpt.hpp"
#include "pipeline/executor.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"
#include "zero/zero_engine.hpp"

namespace mdtp {

class TrainRig {
 public:
  // Collective over `world`.  ZeRO-3 builds the model without parameter storage; the engine
  // initialises (or a checkpoint load fills) each rank's shards only.
  TrainRig(const TrainConfig& config, const TrainPlan& plan, MPI_Comm world);
  TrainRig(const TrainRig&) = delete;
  TrainRig& operator=(const TrainRig&) = delete;

  CommLedger& ledger() { return ledger_; }
  const Backend& backend() const { return *backend_; }
  const Mesh& mesh() const { return *mesh_; }
  GptModel& model() { return *model_; }
  const GptModel& model() const { return *model_; }
  PipelineExecutor& executor() { return *executor_; }
  ZeroEngine& engine() { return *engine_; }
  const ZeroEngine& engine() const { return *engine_; }
  MPI_Comm world() const { return world_; }
  int stage() const { return stage_; }
  // The slowest rank's seconds to build the model and then the optimizer.
  double setup_model_seconds() const { return setup_seconds_[0]; }
  double setup_optimizer_seconds() const { return setup_seconds_[1]; }

 private:
  MPI_Comm world_;
  CommLedger ledger_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<TensorParallelMode> mode_;
  std::unique_ptr<GptKernels> kernels_;
  int stage_ = 0;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<PipelineExecutor> executor_;
  std::unique_ptr<ZeroEngine> engine_;
  std::vector<double> setup_seconds_;
};

// The slowest rank's values, element by element, in one collective over the world that is kept out
// of the ledger (bookkeeping, not the model's traffic).
std::vector<double> world_max(const std::vector<double>& values, const Mesh& mesh, const Backend& backend);

}  // namespace mdtp
