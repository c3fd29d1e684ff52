#include "zero/gradient_reducer.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"
#include "spec/names.hpp"
#include "tp/replicated_columns.hpp"

namespace mdtp {

GradientReducer::GradientReducer(const ZeroLayout& layout, ZeroBuffers& buffers, const Mesh& mesh,
                                 const Backend& backend)
    : layout_(layout), buffers_(buffers), mesh_(mesh), backend_(backend), rounds_(layout.writers()) {}

void GradientReducer::begin_step() {
  rounds_.reset();
  in_flight_.clear();
  started_count_ = 0;
}

void GradientReducer::unit_ready(int unit) {
  if (buffers_.stage() < 2) return;
  std::vector<Round> now;
  for (const std::size_t b : rounds_.report(unit)) start(b, now);
  if (now.empty()) return;
  // The rounds started at an earlier unit have had that unit's successors' passes to arrive: wait
  // for them and free their full gradients, while the ones just started stay in flight.  Waiting
  // at fixed points (not whenever a request happens to be done) makes the memory held at every
  // point of the step the same in every run, so the model can predict it.
  for (Round& r : in_flight_) complete(r);
  in_flight_ = std::move(now);
}

void GradientReducer::before_open(const std::vector<std::size_t>& buckets) {
  const bool reopens = std::any_of(in_flight_.begin(), in_flight_.end(), [&](const Round& r) {
    return std::find(buckets.begin(), buckets.end(), r.bucket) != buckets.end();
  });
  if (!reopens) return;
  for (Round& r : in_flight_) complete(r);
  in_flight_.clear();
}

void GradientReducer::start(std::size_t b, std::vector<Round>& into) {
  PhaseScope phase(mesh_.ledger(), phase::grad_sync);
  Round r;
  r.bucket = b;
  r.accumulate = rounds_.rounds(b) > 1;  // rounds_ counts this one already
  ++started_count_;
  // Stages 2–3: the parameters let go of the buffer, so a pass after this point (the next
  // micro-batch's, with per_micro_batch) adds into a fresh one rather than under the collective.
  // Stage 1's full gradient is its persistent bucket.
  r.full = buffers_.stage() >= 2 ? buffers_.detach_full_gradients(b) : buffers_.grad_full(b);
  // Copies of a key/value head (Parameter::replicated_columns): their partial gradients are added
  // over their group first, on the full bucket, since the reduce-scatter leaves each rank a
  // different range of it; the sum commutes with the data-parallel one.
  for (const BucketSlot& s : layout_.bucket(b).slots) {
    const Parameter& p = *layout_.params().at(s.param).param;
    if (p.replicated_columns)
      sum_replicated_columns(r.full.row_slice(s.offset, s.offset + s.numel), layout_.shape(s.param).back(),
                             *p.replicated_columns, mesh_, backend_);
  }
  Communicator& group = layout_.shard_comm(b);
  if (group.size() > 1) {
    const Bucket& bucket = layout_.bucket(b);
    // Stage 1's shard is a slot of the full bucket, which a reduce-scatter may not write into, and
    // a later round's sum is added to the earlier ones: both land in a scratch buffer first.
    r.target = buffers_.stage() == 1 || r.accumulate
                   ? backend_.empty({bucket.shard}, bucket.grad_dtype, MemCategory::communication)
                   : buffers_.grad_shard(b);
    r.handle = group.ireduce_scatter(r.full, r.target);
  }
  into.push_back(std::move(r));
}

void GradientReducer::complete(Round& r) {
  PhaseScope phase(mesh_.ledger(), phase::grad_sync);
  Tensor& shard = buffers_.grad_shard(r.bucket);
  // With a shard group of one rank the full bucket is the sum.
  const bool single = layout_.shard_comm(r.bucket).size() == 1;
  if (!single) r.handle.wait();
  const Tensor& sum = single ? r.full : r.target;
  if (buffers_.stage() == 1) {
    if (!single) backend_.copy(sum, shard);
  } else if (r.accumulate) {
    backend_.axpy(1.0, sum, shard);
  } else if (single) {
    backend_.copy(sum, shard);
  }
  r = Round{};  // frees the scratch and (stages 2–3) the full buffer
}

void GradientReducer::finish() {
  // Stage 1's buckets, and any bucket no unit reported for, are reduced once here.
  std::vector<Round> rest;
  for (std::size_t b = 0; b < rounds_.bucket_count(); ++b)
    if (rounds_.rounds(b) == 0) start(b, rest);
  for (Round& r : in_flight_) complete(r);
  for (Round& r : rest) complete(r);
  in_flight_.clear();
  PhaseScope phase(mesh_.ledger(), phase::grad_sync);
  for (std::size_t b = 0; b < rounds_.bucket_count(); ++b)
    for (const std::string& group : layout_.bucket(b).partial_groups)
      mesh_.comm(group).all_reduce(buffers_.grad_shard(b));
}

}  // namespace mdtp
