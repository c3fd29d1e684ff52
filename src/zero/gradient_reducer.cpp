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
  handles_.clear();
  handles_.resize(n);
  targets_.assign(n, Tensor());
  started_count_ = 0;
}

void GradientReducer::unit_ready(int unit) {
  if (buffers_.stage() < 2) return;
  for (std::size_t b = 0; b < outstanding_.size(); ++b) {
    auto& left = outstanding_[b];
    const auto it = std::find(left.begin(), left.end(), unit);
    if (it == left.end()) continue;
    left.erase(it);
    if (left.empty() && !started_[b]) start(b);
  }
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

void GradientReducer::finish() {
  for (std::size_t b = 0; b < started_.size(); ++b)
    if (!started_[b]) start(b);
  PhaseScope phase(mesh_.ledger(), "grad-sync");
  for (std::size_t b = 0; b < started_.size(); ++b) {
    Tensor& shard = buffers_.grad_shard(b);
    if (layout_.shard_comm(b).size() == 1) {
      if (buffers_.stage() >= 2) backend_.copy(buffers_.grad_full(b), shard);
    } else {
      handles_[b].wait();
      if (buffers_.stage() == 1) backend_.copy(targets_[b], shard);
    }
    targets_[b] = Tensor();
    for (const std::string& group : layout_.bucket(b).partial_groups) mesh_.comm(group).all_reduce(shard);
    buffers_.release_full_gradients(b);
  }
}

}  // namespace mdtp
