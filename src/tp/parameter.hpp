#pragma once
// Parameter: a trainable tensor as every mode shares it.  It carries its logical name and full
// shape, its layout (so optimizers, ZeRO and checkpoints never care about the mode), and two lists
// of mesh groups:
//  - replicated_over: groups over which the value is identical (a global norm counts it once);
//  - partial_grad_over: groups over which backward leaves *partial* gradients that must be summed
//    (e.g. 2.5D weights over tp.dep, LayerNorm γ in 2D over tp.col).  A replicated parameter whose
//    gradient is computed from replicated data (a 1D row-parallel bias) is not partial.
// A parameter may also hold a block of columns that other ranks hold copies of while the rest of
// its shard is its own (replicated_columns, tp/replicated_columns.hpp).
// Linear weights are stored in compute orientation [in, out] (Y = X·W); checkpoints transpose to
// PyTorch's [out, in].
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tp/context.hpp"
#include "tp/layout.hpp"

namespace mdtp {

// How initial values are drawn.  Values depend on (seed, name, global element index) only, so a
// parameter starts identical in every mode and on every mesh.
struct InitSpec {
  enum class Kind { normal, constant } kind = Kind::normal;
  double std = 0.02;
  double value = 0.0;
  bool operator==(const InitSpec&) const = default;
};

// What materialize() drew into a parameter's value.
struct InitRecord {
  std::uint64_t seed = 0;
  InitSpec init{};
};

// Columns [first, first + count) of a 2-D shard that the ranks of `group` hold as copies of the same
// logical columns, while the rest of each rank's shard differs: a key/value head held by several
// ranks beside their own query heads (model/attention.hpp).  Each copy's gradient is partial, and
// summed over the group before the data-parallel sum; a global norm counts the columns once.
struct ReplicatedColumns {
  std::string group;
  std::int64_t first = 0, count = 0;
};

struct Parameter {
  std::string name;
  Shape full_shape;  // [in, out] for a weight, [n] for a bias or a LayerNorm parameter
  Layout layout;     // a 1-D parameter uses the column groups only
  Tensor value;
  Tensor grad;
  std::vector<std::string> replicated_over;
  std::vector<std::string> partial_grad_over;
  std::optional<ReplicatedColumns> replicated_columns;
  bool decays = false;  // weight decay applies (weights of 2+ dimensions)
  // Set by materialize(): value holds init_value(seed, name, ·, init) of its shard.  The model's
  // initialize() (model/model_param.hpp) then skips drawing the same values again, and clears it;
  // code that writes value in between must clear it too.
  std::optional<InitRecord> drawn;
};

// The value of the full tensor's element `flat_index` (row-major over full_shape): seed, name and
// index hashed (SplitMix64), then Box–Muller.
double init_value(std::uint64_t seed, const std::string& name, std::int64_t flat_index, const InitSpec& init);

// init_value for one tensor, with the name hashed once instead of per element.
class InitDraw {
 public:
  InitDraw(std::uint64_t seed, const std::string& name, const InitSpec& init);
  double value(std::int64_t flat_index) const;  // init_value(seed, name, flat_index, init), bitwise

  // out[j] = value(offset + columns[j]) for j < n, as it will be stored in `stored` (f32 or f64).
  // f64 takes libm's log and cos per element: init_value bitwise.  f32 takes a vectorised
  // Box–Muller (core/vector_math.hpp), whose doubles may differ from init_value's in the last
  // bits but round to the same floats: an element within the two libraries' error bound of a
  // float rounding boundary is recomputed by value() (an estimated two in a million).
  void fill(std::int64_t offset, const std::int64_t* columns, std::int64_t n, DType stored, double* out) const;

 private:
  std::uint64_t key_;  // seed ^ mix(hash(name))
  InitSpec init_;
};

// The shape of this rank's tensor-parallel shard of p ([cols] for a 1-D parameter); an mdtp::Error
// when the layout does not divide the full shape.
Shape shard_shape(const Parameter& p, const Mesh& mesh);

// Allocates value (ctx.dtype) and grad (ctx.grad_dtype) of this rank's shard, both zero, with
// nothing drawn (drawn unset).  With ctx.defer_parameters nothing is allocated: value and grad stay undefined.
void allocate_zeroed(Parameter& p, const TpContext& ctx);

// Allocates value (initialised from ctx.seed) and grad (zeros) of this rank's shard; with
// ctx.defer_parameters nothing is allocated or drawn (the shard is still checked to divide).
void materialize(Parameter& p, const TpContext& ctx, const InitSpec& init);

// Writes `value` (row-major, rows of `row` elements) from the f64 values that `draw(first, n, out)`
// gives for its elements [first, first + n), some whole rows at a time (about 64 Ki elements,
// 512 KiB of doubles: within a core's L2): no f64 copy of the whole tensor (a GPT-2 wte's would be
// 300 MB beside its 150 MB of floats), and each piece is converted while it is in cache.
// Up to `threads` pieces are drawn at once (this rank's share of its node's cores:
// NodeOccupancy::cores_per_rank, so that N ranks on a node do not start N × cores threads), so
// `draw` must be safe to call from several threads (a pure function of its range); the values do
// not depend on how many there are.
void assign_drawn(const Backend& backend, Tensor& value, std::int64_t row, int threads,
                  const std::function<void(std::int64_t first, std::int64_t n, double* out)>& draw);

// Moves a parameter into storage it does not own (a ZeRO bucket): `value` and `grad` must be
// tensors of its shard's element count (e.g. views into flat buffers, Tensor::row_slice of a 1-D
// tensor, reshaped); the current value and gradient are copied in, and from then on the layers
// read and accumulate straight into the views (they never cache a parameter's tensors).
void bind_to_storage(Parameter& p, Tensor value, Tensor grad, const Backend& backend);

// Sums partial gradients over each parameter's partial_grad_over groups (one all-reduce each), its
// replicated columns over their group (tp/replicated_columns.hpp), then, when `data_parallel_group` is not empty, over that group too.
void reduce_gradients(const std::vector<Parameter*>& params, const Mesh& mesh, const Backend& backend,
                      const std::string& data_parallel_group = "");

void zero_gradients(const std::vector<Parameter*>& params, const Backend& backend);

// Global ‖grad‖₂ over all parameters of the model, each element counted once: local squares (those
// of replicated columns only on the first rank of their group), divided by the replication count
// (replicated_over), all-reduced over `model_parallel_group`, the
// mesh group whose ranks hold distinct elements ("tp-pp": every tensor-parallel shard of every
// pipeline stage; a ZeRO engine adds the data-parallel shards).
double global_grad_norm(const std::vector<Parameter*>& params, const Mesh& mesh, const Backend& backend,
                        const std::string& model_parallel_group);

}  // namespace mdtp
