#pragma once
// ModelParam: a Parameter as the model sees it — how it is initialised and how its stored shard
// maps to the logical (nanoGPT, PyTorch-layout) tensor that checkpoints hold.  Three differences
// between storage and logic are possible:
//  - logical_columns: the fused attention weight stores its columns head-grouped (column block b
//    of the TP split holds the Q, K and V heads of block b), so storage column c is logical
//    column logical_columns[c].  Initial values are drawn by the LOGICAL index, so every mode and
//    mesh starts from the same model.  Where ranks hold copies of a key/value head, several
//    storage columns map to one logical column, and the tensor has logical_cols < stored columns.
//  - logical_rows: the vocabulary-parallel embedding pads V up to a multiple of the split; rows
//    from logical_rows on are zero padding, absent from checkpoints.
//  - linear_weight: Linear weights are stored [in, out]; PyTorch (and checkpoints) use [out, in].
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "tp/parameter.hpp"

namespace mdtp {

struct ModelParam {
  Parameter* param = nullptr;
  InitSpec init{};
  std::vector<std::int64_t> logical_columns;  // empty: identity
  std::int64_t logical_cols = -1;             // -1: the stored columns (full_shape.back())
  std::int64_t logical_rows = -1;             // -1: every stored row
  bool linear_weight = false;

  const std::string& name() const { return param->name; }
  // The full shape in the checkpoint ([out, in] for Linear weights, [V, H] for wte).
  Shape checkpoint_shape() const;
};

// Builds a ModelParam (every field named, so call sites stay readable).
inline ModelParam model_param(Parameter* param, InitSpec init, bool linear_weight = false,
                              std::vector<std::int64_t> logical_columns = {}, std::int64_t logical_rows = -1,
                              std::int64_t logical_cols = -1) {
  ModelParam p;
  p.logical_cols = logical_cols;
  p.param = param;
  p.init = init;
  p.linear_weight = linear_weight;
  p.logical_columns = std::move(logical_columns);
  p.logical_rows = logical_rows;
  return p;
}

// Writes param->value (this rank's shard) from init_value over logical indices ([in, out]
// row-major for weights); padding rows are zero.  Gradients are zeroed.
void initialize(const ModelParam& p, const Mesh& mesh, const Backend& backend, std::uint64_t seed);

// The initial values initialize() gives the elements [first, first + n) of this rank's shard
// (row-major over the shard), as they will be stored in `stored` (f32 or f64), into out[0, n):
// what ZeRO-3 draws for the part of a parameter its data-parallel shard holds, bit for bit the
// same as initialize() draws for the whole shard.
void initial_values(const ModelParam& p, const Mesh& mesh, std::uint64_t seed, DType stored, std::int64_t first,
                    std::int64_t n, double* out);

// Reads the block [row0, row0 + rows) × [col0, col0 + cols) of a parameter's checkpoint tensor
// (checkpoint_shape(); a 1-D tensor is one row), row-major.
using CheckpointBlockReader =
    std::function<std::vector<double>(std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols)>;
// The checkpoint's values of the elements [first, first + n) of this rank's shard into out[0, n),
// reading only the blocks of the checkpoint tensor that hold the shard rows those elements cover
// (one block per run of consecutive logical columns); padding rows are zero.  No communication.
void checkpoint_values(const ModelParam& p, const Mesh& mesh, std::int64_t first, std::int64_t n,
                       const CheckpointBlockReader& read, double* out);

// The full logical tensor of `shard` (the parameter's value, gradient or an optimizer moment in the
// parameter's layout), row-major in checkpoint_shape().  Collective over the "tp" group.
std::vector<double> gather_logical(const ModelParam& p, const Tensor& shard, const Mesh& mesh, const Backend& backend);
// The inverse: sets `shard` from the full logical tensor (every rank passes the same values); no
// communication.
void scatter_logical(const ModelParam& p, const std::vector<double>& full, Tensor& shard, const Mesh& mesh,
                     const Backend& backend);

}  // namespace mdtp
