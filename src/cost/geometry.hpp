#pragma once
// Geometry: the shapes one rank holds when a Workload's layer runs — every shard of every
// operand, and which mesh groups each parameter's gradient is partial over — derived from the
// layouts the modes document (tp1d/mode_1d.hpp … tp3d/linear_3d.hpp), without building a mesh.
// The collective plan, the GEMM list and the memory model are all read off this one description,
// so they cannot disagree about a shape.
//
// Every rank of a mode holds shards of the same shapes (the layouts split evenly), so one
// Geometry describes every rank.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.hpp"
#include "mesh/topology.hpp"

namespace mdtp::cost {

// The five Linear algorithms of src/tp*.
enum class LinearKind { serial, column_1d, row_1d, summa, cube_3d };

struct Extent {
  std::int64_t rows = 0, cols = 0;
  std::int64_t numel() const { return rows * cols; }
};

// A parameter shard and the groups its gradient is summed over by reduce_gradients (before the
// data-parallel group).  Group names are mesh group names; a group of size 1 is still listed here
// (the plan skips it, as reduce_gradients does).
struct ParamShard {
  std::string name;
  std::int64_t elements = 0;
  std::vector<std::string> partial_grad_over;
};

struct LinearShape {
  std::string name;  // "linear", "fc1", "fc2"
  LinearKind kind = LinearKind::serial;
  std::int64_t in_features = 0, out_features = 0;  // K, N (full)
  std::int64_t full_rows = 0;                       // B (full)
  Extent x, w, y;                                   // this rank's shards of X, W, Y
  std::int64_t bias = 0;                            // elements of the bias shard (0: no bias)
  // 3D: I (gathers X, reduce-scatters dX) and O (reduce-scatters Y, gathers dY).
  std::string input_group, output_group;
  std::vector<ParamShard> params;                   // weight, bias (where the block has biases)
};

struct LayerNormShape {
  Extent x;                  // this rank's [rows, cols] shard of the activation
  std::string hidden_group;  // "" when the hidden dimension is not split
  std::vector<ParamShard> params;  // γ, β (RMSNorm: γ)
};

class Geometry {
 public:
  // Validates the workload (mode against the mesh's tp_mode, divisibility of every split) with
  // an mdtp::Error naming the offending value, as the layers would on every rank.
  explicit Geometry(const Workload& workload);

  const Workload& workload() const { return workload_; }
  const Topology& topology() const { return topology_; }
  // Ranks in one group of that name (all groups of a name are equal in size).
  int group_size(const std::string& group) const;

  int tp() const { return tp_; }
  int q() const { return q_; }          // grid side: P for 1D, q for 2D/2.5D/3D, 1 for none
  int depth() const { return depth_; }  // 2.5D d, else 1
  bool sequence_parallel() const { return is_sequence_parallel(workload_.mode); }
  bool keep_gathered_3d() const { return workload_.options.keep_gathered_3d; }

  // Shard of the residual activation [B, H] (where LayerNorm runs and the layers start).
  Extent residual(std::int64_t cols) const;

  // The Linears of the layer, in forward order ("layernorm": none).
  const std::vector<LinearShape>& linears() const { return linears_; }
  // The LayerNorm of the layer ("layernorm" only).
  const std::vector<LayerNormShape>& layernorms() const { return layernorms_; }
  // Every parameter, in the order the layer's parameters() lists them.
  std::vector<ParamShard> params() const;

 private:
  LinearShape make_linear(const std::string& name, std::int64_t in, std::int64_t out, int position) const;
  LayerNormShape make_layernorm(std::int64_t hidden) const;

  Workload workload_;
  Topology topology_;
  int tp_ = 1, q_ = 1, depth_ = 1;
  std::vector<LinearShape> linears_;
  std::vector<LayerNormShape> layernorms_;
};

const char* linear_kind_name(LinearKind kind);

// Where each key/value head is held by several ranks (the workload mesh's kv_copies > 1,
// model/attention.hpp): the elements of the attention weight shard's copied K/V columns, its rows
// by the 2·head_dim columns of the one K and V head, which tp.kv sums once per gradient round.  0
// without copies.  `attention` is the "attention" layer's geometry.
std::int64_t copied_kv_elements(const Geometry& attention, std::int64_t head_dim);

}  // namespace mdtp::cost
