#pragma once
// The names one training run is measured by, shared by whoever writes them and whoever reads them
// back: the engines tag their communication with a phase (comm/ledger.hpp's PhaseScope) on a mesh
// group (mesh/topology.hpp), the cost model predicts the same (phase, group) pairs, and the
// reports and tests compare the two.  A misspelt string would silently become a new, empty row;
// a misspelt constant does not compile.  The values are the strings the ledger, the results files
// and the analysis scripts already use, so nothing written changes.
namespace mdtp {

// Ledger phases (PhaseScope tags).
namespace phase {
inline constexpr const char forward[] = "forward";
inline constexpr const char backward[] = "backward";
// Full activation recomputation: a block's forward run again right before its backward.
inline constexpr const char recompute[] = "recompute";
// Pipeline boundary sends and receives (and their waits).
inline constexpr const char pipeline[] = "pipeline";
// The data-parallel (and replicated-parameter) gradient reduction.
inline constexpr const char grad_sync[] = "grad-sync";
// The step's loss reduced over the logits' split, the replicas and the stages.
inline constexpr const char loss[] = "loss";
// The update, with its gradient-norm reductions and ZeRO's parameter all-gathers after it.
inline constexpr const char optimizer[] = "optimizer";
// ZeRO-3's parameter gathers before a unit's passes.
inline constexpr const char param_gather[] = "param-gather";
// Gathering sharded state to write or read a checkpoint.
inline constexpr const char checkpoint[] = "checkpoint";
}  // namespace phase

// Mesh groups (Topology::group_names()).
namespace group {
inline constexpr const char world[] = "world";
// The mesh axes and the combined tokens Topology::mesh_tokens() names (tp-pp: model parallel).
inline constexpr const char tp[] = "tp";
inline constexpr const char pp[] = "pp";
inline constexpr const char dp[] = "dp";
inline constexpr const char cp[] = "cp";
inline constexpr const char tp_pp[] = "tp-pp";
inline constexpr const char tp_dp[] = "tp-dp";
inline constexpr const char dp_cp[] = "dp-cp";
inline constexpr const char tp_dp_cp[] = "tp-dp-cp";
// The first and last stage of each pp group: the tied embedding's gradient all-reduce.
inline constexpr const char embedding[] = "embedding";
// Stages r and p − 1 − r of each pp group under DualPipe's mirrored mapping, which both hold
// positions r and p − 1 − r of the model: the two copies' gradient all-reduce.
inline constexpr const char mirror[] = "mirror";
// The TP modes' sub-groups inside one TP group (mesh/tp_grid.hpp): 2D and 2.5D ...
inline constexpr const char tp_row[] = "tp.row";
inline constexpr const char tp_col[] = "tp.col";
inline constexpr const char tp_dep[] = "tp.dep";
inline constexpr const char tp_row_dep[] = "tp.row-dep";
inline constexpr const char tp_col_dep[] = "tp.col-dep";
// ... and 3D.
inline constexpr const char tp_input[] = "tp.input";
inline constexpr const char tp_weight[] = "tp.weight";
inline constexpr const char tp_output[] = "tp.output";
inline constexpr const char tp_input_weight[] = "tp.input-weight";
inline constexpr const char tp_output_weight[] = "tp.output-weight";
// 2.5D only: dp × tp.dep, the replicas of a weight shard (ZeRO shards over it).
inline constexpr const char dp_depth[] = "dp-tp.dep";
// Where a model has fewer key/value heads than the ranks that split its heads, the ranks that hold
// copies of the same key/value head: blocks of consecutive ranks along the fastest TP axis (the one
// that splits a Linear's output columns in every mode); present only then (mesh/topology.hpp).
inline constexpr const char tp_kv[] = "tp.kv";
}  // namespace group

}  // namespace mdtp
