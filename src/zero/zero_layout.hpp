#pragma once
// ZeroLayout: the bucket plan of one GptModel on one rank, and what the engine derives from it —
// which buckets a unit reads and writes, which group a bucket is sharded over and which part of
// it a rank owns, and how many copies of each element exist (for the norm).  Local: no
// communication.
//
// Stages 1–3 of a 2.5D mesh treat the depth slabs as data-parallel replicas of the weights that
// are partial over tp.dep: their buckets are sharded over dp × depth (kDpDepthGroup), so tp.dep
// is no partial group of theirs (docs/zero.md §5).  Stage 0 keeps the all-reduce over tp.dep.
#include <cstdint>
#include <vector>

#include "model/gpt.hpp"
#include "plan/bucket_plan.hpp"
#include "zero/zero_config.hpp"

namespace mdtp {

class Communicator;

// The part of a bucket's shard that holds (a part of) one parameter.
struct ShardSegment {
  std::size_t param = 0;            // index in ZeroLayout::params()
  std::int64_t param_offset = 0;    // first element inside the parameter
  std::int64_t shard_offset = 0;    // first element inside the shard
  std::int64_t numel = 0;
};

class ZeroLayout {
 public:
  // Plans the model's parameters (as they are now: every rank must call it before any parameter
  // is moved).  Partial groups of one rank are left out: they need no reduction.
  ZeroLayout(GptModel& model, const Mesh& mesh, const ZeroConfig& config);

  const BucketPlan& plan() const { return plan_; }
  std::size_t bucket_count() const { return plan_.buckets.size(); }
  const Bucket& bucket(std::size_t b) const { return plan_.buckets.at(b); }
  // The model's parameters, in GptModel::parameters() order (the plan's input order).
  const std::vector<ModelParam>& params() const { return params_; }
  const Shape& shape(std::size_t param) const { return shapes_.at(param); }
  int unit(std::size_t param) const { return units_.at(param); }
  // The number of ranks holding each element of the parameter's gradient shard between
  // finish_gradients and step: Π sizes of replicated_over, divided by the replica group a bucket
  // is sharded over besides dp (2.5D weights: each element lives in one shard of dp × depth).
  double copies(std::size_t param) const { return copies_.at(param); }
  // The group bucket b is sharded over (the data-parallel group, or dp × depth for 2.5D weights),
  // its communicator (looked up once here, for every part of the engine), and this rank's shard
  // of it (its rank there).
  const std::string& shard_group(std::size_t b) const { return shard_groups_.at(b); }
  Communicator& shard_comm(std::size_t b) const { return *shard_comms_.at(b); }
  int shard_rank(std::size_t b) const { return shard_ranks_.at(b); }

  // Buckets whose values unit u reads in its forward and in its backward-input pass: its own
  // parameters', and, for the head of a model that also holds the embedding, the tied wte's.  The
  // embedding's backward-input pass reads no weight (its whole backward is a weight pass).
  const std::vector<std::size_t>& forward_reads(int u) const { return forward_reads_.at(static_cast<std::size_t>(u)); }
  const std::vector<std::size_t>& backward_reads(int u) const { return backward_reads_.at(static_cast<std::size_t>(u)); }
  // The units whose weight pass adds into bucket b's gradients (its parameters' units, and the head
  // for a tied wte): the bucket is complete once each of them reported grads_ready.
  const std::vector<int>& writers(std::size_t b) const { return writers_.at(b); }
  const std::vector<std::vector<int>>& writers() const { return writers_; }  // of every bucket
  // The buckets unit u's passes add gradients into (the inverse of writers): stages 2–3 allocate
  // their full gradient buffers before the unit's first backward-input pass of a step.
  const std::vector<std::size_t>& writes(int u) const { return writes_.at(static_cast<std::size_t>(u)); }
  // The unit the same chunk runs after u in a pass of `direction` (+1 forward, -1 backward), or -1.
  int next_unit(int u, int direction) const;

  // The parameter pieces inside shard `shard_rank` of bucket b (padding excluded).
  std::vector<ShardSegment> segments(std::size_t b, int shard_rank) const;
  // Where parameter `param` lies: its bucket and its first element there.
  std::size_t bucket_index(std::size_t param) const { return plan_.place.at(param).bucket; }
  std::int64_t offset(std::size_t param) const;

  // The mesh the shards are cut on and the model's initialisation seed (ZeRO-3 draws each shard's
  // initial values itself: zero/zero_buffers.hpp).
  const Mesh& mesh() const { return *mesh_; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::vector<ModelParam> params_;
  std::vector<Shape> shapes_;
  std::vector<int> units_;
  std::vector<double> copies_;
  BucketPlan plan_;
  std::vector<std::string> shard_groups_;
  std::vector<Communicator*> shard_comms_;
  std::vector<int> shard_ranks_;
  std::vector<std::vector<std::size_t>> forward_reads_, backward_reads_;
  std::vector<std::vector<int>> writers_;
  std::vector<std::vector<std::size_t>> writes_;
  std::vector<UnitRange> chunks_;
  const Mesh* mesh_ = nullptr;
  std::uint64_t seed_ = 0;
};

}  // namespace mdtp
