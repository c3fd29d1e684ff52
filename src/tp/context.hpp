#pragma once
// What every tensor-parallel layer is built with: the mesh (its communicators), the backend (its
// compute and memory accounting), the element types and the initialisation seed.  Passed to
// constructors, never held in a global.
#include <cstdint>

#include "core/backend.hpp"

namespace mdtp {

class Mesh;

struct TpOptions {
  // 3D Linear: keep the all-gathered X and W for backward (fewer collectives, q× activation
  // memory) instead of keeping only the shards and gathering them again in backward.
  bool keep_gathered_3d = false;
};

struct TpContext {
  const Mesh& mesh;
  const Backend& backend;
  DType dtype = DType::f64;
  std::uint64_t seed = 1234;
  TpOptions options{};
  // Parameters are created without storage (value and grad undefined; name, shapes, layout and
  // InitSpecs known): ZeRO stage 3 allocates and initialises only each rank's data-parallel shard
  // (zero/zero_buffers.hpp), so no rank ever holds its whole tensor-parallel shard of the model.
  bool defer_parameters = false;
  // The gradients' dtype: of every gradient buffer and every gradient sum (the partial sums inside
  // the modes, the data-parallel reduction).  The parameters' dtype unless set; mixed-precision
  // training keeps bf16/f16 parameters' gradients in f32 (or, as Megatron allows, in the 16-bit
  // dtype itself).
  DType grad_dtype = dtype;
};

}  // namespace mdtp
