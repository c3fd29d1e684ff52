#pragma once
// What a training run records of its pipeline, per step and stage (results tables "pipeline" and
// "timeline"):
//   pipeline  step, stage, rank, busy seconds per pass kind (F, B, W; a fused BW counts as B
//             and W together under "backward"), exposed p2p wait, the stage's step seconds, idle
//             = step − busy, the measured bubble fraction idle/step beside the one the schedule
//             simulator predicts from the measured mean pass times (T_F, T_B, T_W over the
//             step's stages), the contexts held at the peak beside the schedule's bound;
//   timeline  step, stage, op, micro-batch, chunk, wait start, start, end (seconds from the
//             stage's step start) — what experiments/analysis draws as a timeline.
// One representative rank per stage reports (tensor-parallel rank 0 of data-parallel replica 0;
// the others run the same actions).  Collective over the world; rank 0 receives the rows.
#include <mpi.h>

#include "io/table.hpp"
#include "mesh/mesh.hpp"
#include "pipeline/executor.hpp"

namespace mdtp {

class PipelineReport {
 public:
  PipelineReport(const Schedule& schedule, const Mesh& mesh, MPI_Comm world);
  // Collective: adds the step's rows (on rank 0).
  void add_step(std::int64_t step, const StageStepResult& result);
  Table& pipeline() { return pipeline_; }
  Table& timeline() { return timeline_; }

 private:
  const Schedule& schedule_;
  MPI_Comm world_;
  int rank_ = 0, stage_ = 0;
  bool representative_ = false;
  Table pipeline_, timeline_;
};

}  // namespace mdtp
