#include "cost/pipeline_traffic.hpp"

#include "core/error.hpp"
#include "cost/geometry.hpp"

namespace mdtp::cost {

PipelineBoundary pipeline_boundary(const Workload& workload) {
  Workload w = workload;
  w.layer = "layernorm";  // the residual layout is the mode's, whatever the layer
  const Geometry geometry(w);
  PipelineBoundary b;
  const Extent shard = geometry.residual(w.hidden);
  b.shard_elements = shard.numel();
  // Only 1D without sequence parallelism keeps the residual whole on every tp rank.
  if (w.mode == TpMode::d1 && geometry.tp() > 1) {
    require(shard.rows % geometry.tp() == 0, "pipeline boundary: the ", shard.rows, " rows of a micro-batch's ",
            "residual stream must divide over the ", geometry.tp(), " tp ranks that send a slice each");
    b.slices = geometry.tp();
    b.gather_group = "tp";
  }
  return b;
}

std::vector<PlannedCall> pipeline_calls(const Schedule& s, int stage, const PipelineBoundary& b, DType dtype) {
  require(stage >= 0 && stage < s.stages, "pipeline traffic: stage ", stage, " is outside [0, ", s.stages, ")");
  require(b.slices >= 1 && b.shard_elements % b.slices == 0, "pipeline traffic: ", b.shard_elements,
          " elements do not split into ", b.slices, " slices");
  const int last = s.stages * s.chunks - 1;
  std::vector<PlannedCall> calls;
  auto p2p = [&](CollectiveOp op) {
    calls.push_back(PlannedCall{"pipeline", "pp", op, s.stages, b.wire_elements(), dtype});
  };
  auto receive = [&] {
    p2p(CollectiveOp::recv);
    if (b.slices > 1)
      calls.push_back(PlannedCall{"pipeline", b.gather_group, CollectiveOp::all_gather, b.slices, b.shard_elements, dtype});
  };
  for (const Action& a : s.actions.at(static_cast<std::size_t>(stage))) {
    const int k = s.virtual_stage(stage, a.chunk);
    if (a.op == PassKind::F) {
      if (k > 0) receive();
      if (k < last) p2p(CollectiveOp::send);
    } else if (a.op == PassKind::B || a.op == PassKind::BW) {
      if (k < last) receive();
      if (k > 0) p2p(CollectiveOp::send);
    }
  }
  return calls;
}

}  // namespace mdtp::cost
