#include "zero/parameter_gatherer.hpp"

#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {

ParameterGatherer::ParameterGatherer(const ZeroLayout& layout, ZeroBuffers& buffers, const Mesh& mesh,
                                     const Backend& backend, bool keep_for_step)
    : layout_(layout), buffers_(buffers), mesh_(mesh), backend_(backend), keep_(keep_for_step), users_(layout.bucket_count(), 0), prefetched_(layout.bucket_count(), false),
      pending_(layout.bucket_count()), incoming_(layout.bucket_count()) {}

ParameterGatherer::~ParameterGatherer() {
  // A gather in flight writes into `incoming_`: let it land before the buffers go.
  for (CommHandle& h : pending_)
    if (h.active()) h.wait();
}

void ParameterGatherer::start(std::size_t b) {
  if (buffers_.values_materialised(b) || pending_[b].active()) return;
  const Bucket& bucket = layout_.bucket(b);
  PhaseScope phase(mesh_.ledger(), phase::param_gather);
  incoming_[b] = backend_.empty({bucket.padded}, bucket.dtype, MemCategory::parameters);
  Communicator& group = layout_.shard_comm(b);
  if (group.size() == 1) {
    backend_.copy(buffers_.value_shard(b), incoming_[b]);
    return;
  }
  const std::int64_t lo = layout_.shard_rank(b) * bucket.shard;
  // In place: this rank's slot of the full buffer receives its own shard first (NCCL's rule).
  Tensor slot = incoming_[b].row_slice(lo, lo + bucket.shard);
  backend_.copy(buffers_.value_shard(b), slot);
  pending_[b] = group.iall_gather(slot, incoming_[b]);
}

void ParameterGatherer::complete(std::size_t b) {
  if (buffers_.values_materialised(b)) return;
  if (!incoming_[b].defined()) start(b);
  if (pending_[b].active()) pending_[b].wait();
  buffers_.bind_values(b, std::move(incoming_[b]));
  incoming_[b] = Tensor();
}

void ParameterGatherer::acquire(const std::vector<std::size_t>& buckets) {
  for (std::size_t b : buckets) start(b);  // all gathers in flight before the first wait
  for (std::size_t b : buckets) {
    complete(b);
    ++users_[b];
    prefetched_[b] = false;
  }
}

void ParameterGatherer::release(const std::vector<std::size_t>& buckets) {
  for (std::size_t b : buckets) {
    if (users_[b] > 0) --users_[b];
    free_if_unused(b);
  }
}

void ParameterGatherer::prefetch(const std::vector<std::size_t>& buckets) {
  for (std::size_t b : buckets) {
    prefetched_[b] = true;
    start(b);
  }
}

void ParameterGatherer::free_if_unused(std::size_t b) {
  if (keep_ || users_[b] > 0 || prefetched_[b]) return;
  buffers_.release_values(b);
}

void ParameterGatherer::release_all() {
  for (std::size_t b = 0; b < users_.size(); ++b) {
    if (pending_[b].active()) pending_[b].wait();
    incoming_[b] = Tensor();
    users_[b] = 0;
    prefetched_[b] = false;
    if (buffers_.values_materialised(b)) buffers_.release_values(b);
  }
}

}  // namespace mdtp
