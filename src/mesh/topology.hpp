#pragma once
// Topology: the whole rank layout of a tp·cp·dp·pp mesh and of its TP sub-grid, computed without
// MPI, so that `mdtp mesh` can print it and every rank can validate it before any collective.
//
// Group names:
//   "world"                          all ranks
//   "tp" "pp" "dp" "cp"              one axis (Megatron RankGenerator groups, docs/theory.md §1)
//   "tp-pp" "tp-dp" "dp-cp" "tp-dp-cp"  combined axes (tp-pp = model parallel); any other
//                                    '-'-joined set of axes is accepted by groups() too
//   "embedding"                      first and last stage of each pp group (only the first when
//                                    pp = 1): where tied embedding gradients are all-reduced
//   "tp.row", "tp.col", ...          the TP mode's sub-groups (tp_grid.hpp) across all TP groups
//   "dp-tp.dep"                      2.5D only: the ranks that differ only in their dp and depth
//                                    coordinates, i.e. every data-parallel replica of a weight
//                                    (the depth slabs hold the same weight shard); ZeRO shards
//                                    those weights over it (docs/zero.md §5)
//   "tp.kv"                          only where kv_copies > 1: blocks of kv_copies consecutive ranks
//                                    along the fastest TP axis, which splits the output columns of
//                                    a Linear (so attention's heads) in every mode; they hold copies
//                                    of the same key/value head (model/attention.hpp)
//
// Placement: ranks are packed onto nodes in rank order, node = rank / ranks_per_node
// (ranks_per_node = 0: one node).  A group name whose groups all stay on one node gets the
// intra-node link class; the cost model charges it the intra-node α-β parameters.
#include <map>
#include <string>
#include <vector>

#include "mesh/rank_generator.hpp"
#include "mesh/tp_grid.hpp"
#include "mesh/tp_mode.hpp"
#include "spec/names.hpp"
#include "spec/run_spec.hpp"

namespace mdtp {

struct MeshConfig {
  int world = 1;
  int tp = 1, pp = 1, cp = 1;
  std::string order = "tp-cp-dp-pp";
  TpMode tp_mode = TpMode::d1;
  int tp_depth = 1;            // 2.5d only
  int ranks_per_node = 0;      // 0 = all ranks on one node
  // Where the pipeline's first and last virtual stage run, and so the `embedding` group of the
  // tied wte's two copies: the first and the last stage (round-robin), or stage 0 alone, which
  // holds both ends of a V and so one wte, or each end stage alone under DualPipe's mirror (both
  // hold both ends), which also pairs stages r and p − 1 − r in the `mirror` group.
  StageMapping stage_mapping = StageMapping::round_robin;
  // Grouped-query attention with fewer key/value heads (kv) than the q ranks that split the heads:
  // each key/value head is held by kv_copies = q/kv consecutive ranks of that axis, the "tp.kv"
  // group.  1: none (kv ≥ q, or a model without grouped heads).
  int kv_copies = 1;
};

// The combined data-parallel × depth group of a 2.5D mesh (present only in 2.5D).
inline constexpr const char* kDpDepthGroup = group::dp_depth;  // spec/names.hpp

enum class LinkClass { intra_node, inter_node };
const char* link_class_name(LinkClass link);  // "intra-node" | "inter-node"

// The mesh a run spec's layout asks for on `world` ranks (tp, pp, the mode and 2.5D's depth; dp is
// what the world leaves, Topology checks the rest), with the tp.kv groups that a model of
// `kv_heads` key/value heads needs (0: none).
MeshConfig mesh_config(const ParallelLayout& layout, int world, std::int64_t kv_heads = 0);

// The number of ranks that split a Linear's output columns, and so attention's heads, in a mode:
// the fastest TP axis (tp in 1D, q in 2D, 2.5D and 3D).
int head_split_ranks(TpMode mode, int tp, int depth);

// How many ranks hold each key/value head when `kv_heads` of them are split over `head_split`
// ranks: head_split / kv_heads where that is a whole number above one, else 1 (each rank holds
// kv_heads / head_split of its own, or the split is refused by the model).
int kv_copies_for(std::int64_t kv_heads, int head_split);

class Topology {
 public:
  // Validates the configuration (an mdtp::Error naming the offending value) and derives dp.
  explicit Topology(const MeshConfig& config);

  const MeshConfig& config() const { return config_; }
  int world() const { return config_.world; }
  int tp() const { return config_.tp; }
  int pp() const { return config_.pp; }
  int cp() const { return config_.cp; }
  int dp() const { return dp_; }
  std::string order() const { return generator_.order(); }  // effective, with appended axes
  TpMode tp_mode() const { return config_.tp_mode; }
  const RankGenerator& rank_generator() const { return generator_; }
  const TpGrid& tp_grid() const { return grid_; }

  // The eight Megatron-style tokens: tp, pp, dp, cp, tp-pp, tp-dp, dp-cp, tp-dp-cp.
  static const std::vector<std::string>& mesh_tokens();
  // "tp" then the TP mode's sub-group names.
  std::vector<std::string> tp_group_names() const { return grid_.group_names(); }
  // Every named group kind, in the fixed order the Mesh creates communicators: "world", the
  // eight tokens, "embedding", then the TP sub-group names other than "tp", then (2.5D)
  // kDpDepthGroup.
  std::vector<std::string> group_names() const;

  // All groups of a name (see the header comment), each in group-rank order.
  const std::vector<std::vector<int>>& groups(const std::string& name) const;
  // Global-rank lists of every TP sub-group of that name: for each TP group in Megatron order,
  // its sub-groups in order of their lowest TP rank.  "tp" gives groups("tp").
  const std::vector<std::vector<int>>& tp_groups(const std::string& name) const;
  // Index in groups(name) of the group holding `rank`, or -1 (only "embedding" leaves ranks out).
  int group_index(const std::string& name, int rank) const;
  // The group of that name holding `rank`; an mdtp::Error if there is none.
  const std::vector<int>& group_of(const std::string& name, int rank) const;
  // `rank`'s index in its TP group.
  int tp_rank(int rank) const;

  // Placement.
  int ranks_per_node() const { return config_.ranks_per_node; }
  int nodes() const;
  int node_of(int rank) const;
  bool crosses_nodes(const std::string& name) const;  // some group of that name spans nodes
  LinkClass link_class(const std::string& name) const;
  // The fewest ranks of one group of that name on any node it touches (over every such group):
  // how many GPUs, and so NICs, a group spanning nodes leaves each node through.  The group size
  // for a group inside one node.
  int ranks_per_node_in(const std::string& name) const;

  // {"world", "order", "sizes": {"tp","pp","dp","cp"}, "groups": {TOKEN: [[ranks]...]},
  //  "tp_groups": {NAME: [[ranks]...]}}: the eight tokens plus "embedding", "tp" plus the
  // mode's sub-groups.
  std::string to_json() const;
  // Human-readable listing of sizes, order and every group kind.
  std::string to_table() const;

 private:
  std::string canonical_name(const std::string& name) const;
  MeshConfig config_;
  int dp_ = 1;
  RankGenerator generator_;
  TpGrid grid_;
  std::map<std::string, std::vector<std::vector<int>>> groups_;
  std::map<std::string, std::vector<int>> index_of_rank_;  // name → group index per rank, or -1
};

}  // namespace mdtp
