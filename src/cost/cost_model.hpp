#pragma once
// The theoretical model of mdtp: what each layer of each mode communicates (the exact list of
// collectives, derived from the algorithm — never from the ledger), how long that should take
// under an α-β model of the algorithm the library actually uses at each size, how long the
// GEMMs take at a measured rate, and the memory a rank holds.  Experiments print it beside the
// ledger; tests require the bytes to agree exactly, per (phase, group, op).
//
// Phases match the PhaseScope tags that drivers and tests set (spec/names.hpp): phase::forward,
// phase::backward, phase::grad_sync (reduce_gradients of src/tp/parameter.hpp).
//
// The model, one header each (namespace mdtp::cost):
//   cost_model.hpp      Workload, plan_step (the collectives), summarize, repeat_plan
//   time_model.hpp      LinkParams per link class, MPICH's algorithm per op and size, TimeModel,
//                       predict_call / predict_plan (seconds per (phase, group, op))
//   calibration.hpp     Calibration: fitted link α-β, per-op fits, GEMM rates (what calibrate fills)
//   calibration_io.hpp  Calibration ⇄ HDF5 tables of a /runs/NNNN-calibrate group (header-only)
//   compute_model.hpp   plan_gemms (every GEMM's m, n, k per rank), gemm_seconds
//   memory_model.hpp    estimate_memory: parameters, gradients, optimizer, kept activations
//   published.hpp       the published asymptotic row of docs/theory.md §2 (not normalised consistently)
//   zero.hpp, pipeline_bubble.hpp   ZeRO stages 0–3 and the pipeline bubble
//   report.hpp          all of it for one configuration, as data, text or JSON (`mdtp cost`)
//   geometry.hpp        (internal) the shard shapes the others are read off
//
// The whole training step of a GPT on a cluster (docs/performance-model.md), built on the above:
//   cluster.hpp         a machine as data (data/clusters/*.json): peaks, efficiencies, links
//   kernel_time.hpp     roofline GEMMs, streaming kernels
//   step_config.hpp     StepConfig: model, batch, parallelism, schedule, ZeRO, recomputation
//   model_flops.hpp     parameters, model FLOPs (MFU), hardware FLOPs (HFU), Narayanan's count
//   layer_costs.hpp     per micro-batch and rank: F, B, W of a block, the embedding and the head
//   step_memory.hpp     memory per GPU;  step_model.hpp  the step;  planner.hpp  `mdtp plan`
//   measured_tables.hpp the published tables it is validated against;  step_report.hpp  text, JSON
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "cost/block_widths.hpp"
#include "mesh/topology.hpp"
#include "tp/context.hpp"

namespace mdtp::cost {

// One collective the algorithm issues (one call).
struct PlannedCall {
  std::string phase;
  std::string group;  // mesh group name, as in the ledger
  CollectiveOp op;
  int group_size = 1;
  std::int64_t elements = 0;  // of the logical buffer (see comm/ledger.hpp)
  DType dtype = DType::f32;
  // Issued by the weight pass W (SUMMA's dW product, 3D's dW reduce-scatter), which the engine
  // can run apart from the backward-input pass; the ledger records it under phase "backward"
  // all the same.  1d-sp's re-gather of X stays with B (layer_costs.hpp).
  bool weight_pass = false;
  // 1d-sp's all-gather of X again for the weight gradient (the activation is kept sharded), which
  // Transformer Engine overlaps on SMs where the other all-gathers use copy engines
  // (collective_sms.hpp).
  bool input_regather = false;
};

// What runs in one step of an experiment.
struct Workload {
  TpMode mode = TpMode::d1;
  MeshConfig mesh;          // world, tp, tp_mode, tp_depth, pp, cp, ranks_per_node
  // "linear" | "layernorm" | "mlp" | "attention" (c_attn H → qkv width, c_proj H → H)
  std::string layer = "mlp";
  std::int64_t rows = 0;      // B = batch·sequence rows of the activation (full, unsharded)
  std::int64_t hidden = 0;    // H (Linear: in_features)
  std::int64_t ffn_hidden = 0;  // MLP inner size F, fc2's input (Linear: out_features)
  // The block family's widths and parameters (block_widths.hpp); GPT-2's unless set.
  BlockWidths block{};
  DType dtype = DType::f32;
  // The gradients' dtype (of the weight gradients' partial sums and of reduce_gradients): `dtype`
  // unless set (f32 for bf16/f16 parameters under mixed precision).
  std::optional<DType> grad_dtype;
  DType gradient_dtype() const { return grad_dtype.value_or(dtype); }
  TpOptions options{};
  // The group reduce_gradients is given as its data-parallel group: "" (the default, as the TP
  // tests call it) sums no data-parallel copies; "dp" adds one all-reduce per parameter over the
  // dp axis (skipped when that axis has one rank, as reduce_gradients skips it).
  std::string data_parallel_group;
};

// The exact collective list of one forward + backward + gradient reduction, in the order the
// ledger records it (non-blocking calls are recorded when waited on).  Every rank of the mesh
// issues this same list: ranks differ only in the roots of SUMMA's broadcasts and reductions
// and in which 3D axis plays I or O, never in a call's op, group name, size or element count.
// Throws mdtp::Error (naming the value) for a workload the layers would refuse.
std::vector<PlannedCall> plan_step(const Workload& workload);

// Logical bytes and nccl-tests bus bytes of one call, exactly as the Communicator records it.
LedgerEntry to_ledger_entry(const PlannedCall& call);

// Totals per (phase, group, op), as CommLedger::summary() totals a ledger (seconds are 0).
std::map<LedgerKey, LedgerTotals> summarize(const std::vector<PlannedCall>& plan);

// `times` copies of a plan, in order (an L-layer stack of identical blocks).
std::vector<PlannedCall> repeat_plan(const std::vector<PlannedCall>& plan, int times);

}  // namespace mdtp::cost
