#pragma once
// ZeroBuffers: the flat tensors of every bucket on one rank and the parameters bound into them
// (docs/zero.md §3).  What exists between steps, per stage:
//
//   stage   values                          gradients
//   1       full bucket (parameters)        full bucket; this rank's shard is a view of it
//   2       full bucket                     the shard only (the full bucket exists from the
//                                           first backward pass that writes into it until its
//                                           reduce-scatter completes)
//   3       the shard only; a unit's full   as stage 2
//           buckets while it runs
//
// A parameter's value and gradient are views into these (Parameter::value / grad, reshaped to the
// parameter's shape), or undefined while its bucket is not materialised.  Stage 3 therefore
// leaves the model's parameters without values between uses: read them through the engine.
#include <vector>

#include "zero/zero_layout.hpp"

namespace mdtp {

class ZeroBuffers {
 public:
  // Moves the model's current values in (stage 3 keeps this rank's shard and frees the rest) and
  // zeroes the gradients.  At stage 3 a model built without parameter storage
  // (TpContext::defer_parameters) is initialised shard by shard: each rank allocates and draws only
  // the elements of its shards, so no rank ever holds its whole tensor-parallel shard of the model.
  // Local: no communication.
  ZeroBuffers(const ZeroLayout& layout, int stage, const Backend& backend);
  ZeroBuffers(const ZeroBuffers&) = delete;
  ZeroBuffers& operator=(const ZeroBuffers&) = delete;

  int stage() const { return stage_; }
  // This rank's shard of bucket b's values: what the optimizer updates.
  Tensor& value_shard(std::size_t b) { return value_shard_.at(b); }
  // Bucket b's full values: always at stages 1–2, while gathered at stage 3 (else undefined).
  Tensor& value_full(std::size_t b) { return value_full_.at(b); }
  bool values_materialised(std::size_t b) const { return value_full_.at(b).defined(); }
  // Stage 3: bind the parameters of bucket b to a gathered full buffer, or release it.
  void bind_values(std::size_t b, Tensor full);
  void release_values(std::size_t b);

  // This rank's shard of bucket b's (reduced) gradient.
  Tensor& grad_shard(std::size_t b) { return grad_shard_.at(b); }
  const Tensor& grad_full(std::size_t b) const { return grad_full_.at(b); }
  // The start of a step: stage 1 zeroes its full gradients; stages 2–3 hold none yet.
  void begin_gradients();
  // Stages 2–3: zeroed full gradient buffers for the buckets not yet open in this step, bound to
  // the parameters (before the first pass that adds into them); a no-op at stage 1.
  void open_gradients(const std::vector<std::size_t>& buckets);
  // Stages 2–3: unbind bucket b's full gradient and hand it over (to the reduction that reads it);
  // the bucket counts as not open, so the next pass that writes into it opens a fresh one.
  Tensor detach_full_gradients(std::size_t b);

 private:
  void bind(std::size_t b, const Tensor& full, bool gradient);
  // Stage 3: sets value_shard_[b] (zeros) from the model: drawn or copied (see the constructor).
  void fill_shard(std::size_t b, int rank);
  const ZeroLayout& layout_;
  const Backend& backend_;
  int stage_;
  std::vector<Tensor> value_full_, value_shard_, grad_full_, grad_shard_;
};

// Copies `src` (on `from`) into `dst` (on `to`), same element count, converting to dst's dtype
// (narrowing rounds once, to nearest even): a backend conversion (or copy) when both live in host
// memory, else through the backends' float64 transfers (exact for every dtype's values).
void transfer(const Backend& from, const Tensor& src, const Backend& to, Tensor& dst);
// Copies `n` elements between flat ranges of two tensors (any shapes, same dtype).
void copy_elements(const Backend& from, const Tensor& src, std::int64_t src_offset, const Backend& to, Tensor& dst,
                   std::int64_t dst_offset, std::int64_t n);

}  // namespace mdtp
