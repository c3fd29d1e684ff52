#include "zero/gradient_reducer.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"

namespace mdtp {

GradientReducer::GradientReducer(const ZeroLayout& layout, ZeroBuffers& buffers, const Mesh& mesh,
                                 const Backend& backend)
    : layout_(layout), buffers_(buffers), mesh_(mesh), backend_(backend) {
  begin_step();
}

void GradientReducer::begin_step() {
  const std::size_t n = layout_.bucket_count();
  outstanding_.assign(n, {});
  for (std::size_t b = 0; b < n; ++b) outstanding_[b] = layout_.writers(b);
  started_.assign(n, false);
  completed_.assign(n, false);
  in_flight_.clear();
  handles_.clear();
  handles_.resize(n);
  targets_.assign(n, Tensor());
  started_count_ = 0;
}

void GradientReducer::unit_ready(int unit) {
  if (buffers_.stage() < 2) return;
  std::vector<std::size_t> now;
  for (std::size_t b = 0; b < outstanding_.size(); ++b) {
    auto& left = outstanding_[b];
    const auto it = std::find(left.begin(), left.end(), unit);
    if (it == left.end()) continue;
    left.erase(it);
    if (left.empty() && !started_[b]) {
      start(b);
      now.push_back(b);
    }
  }
  if (now.empty()) return;
  // The buckets started at an earlier unit have had that unit's successors' passes to arrive: wait
  // for them and free their full gradients, while the ones just started stay in flight.  Waiting
  // at fixed points (not whenever a request happens to be done) makes the memory held at every
  // point of the step the same in every run, so the model can predict it
  // (plan/gradient_peak.hpp).
  for (const std::size_t b : in_flight_) complete(b);
  in_flight_ = std::move(now);
}

void GradientReducer::start(std::size_t b) {
  PhaseScope phase(mesh_.ledger(), "grad-sync");
  started_[b] = true;
  ++started_count_;
  Communicator& group = layout_.shard_comm(b);
  if (group.size() == 1) return;  // the full bucket is the shard: nothing to sum
  const Bucket& bucket = layout_.bucket(b);
  // Stage 1's shard is a slot of the full bucket, which a reduce-scatter may not write into: it
  // lands in a scratch buffer and is copied back.
  targets_[b] = buffers_.stage() == 1 ? backend_.empty({bucket.shard}, bucket.dtype, MemCategory::communication)
                                      : buffers_.grad_shard(b);
  handles_[b] = group.ireduce_scatter(buffers_.grad_full(b), targets_[b]);
}

void GradientReducer::complete(std::size_t b) {
  PhaseScope phase(mesh_.ledger(), "grad-sync");
  Tensor& shard = buffers_.grad_shard(b);
  if (layout_.shard_comm(b).size() == 1) {
    if (buffers_.stage() >= 2) backend_.copy(buffers_.grad_full(b), shard);
  } else {
    handles_[b].wait();
    if (buffers_.stage() == 1) backend_.copy(targets_[b], shard);
  }
  targets_[b] = Tensor();
  buffers_.release_full_gradients(b);
  completed_[b] = true;
}

void GradientReducer::finish() {
  for (std::size_t b = 0; b < started_.size(); ++b)
    if (!started_[b]) start(b);
  for (std::size_t b = 0; b < started_.size(); ++b)
    if (!completed_[b]) complete(b);
  in_flight_.clear();
  PhaseScope phase(mesh_.ledger(), "grad-sync");
  for (std::size_t b = 0; b < started_.size(); ++b)
    for (const std::string& group : layout_.bucket(b).partial_groups)
      mesh_.comm(group).all_reduce(buffers_.grad_shard(b));
}

}  // namespace mdtp
