#include "zero/zero_layout.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

void add_unique(std::vector<std::size_t>& list, std::size_t value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
}

}  // namespace

ZeroLayout::ZeroLayout(GptModel& model, const Mesh& mesh, const ZeroConfig& config) {
  const int units = unit_count(model.config());
  const int dp = mesh.comm(config.data_parallel_group).size();

  std::vector<BucketInput> inputs;
  for (int u = 0; u < units; ++u)
    for (const ModelParam& p : model.unit_parameters(u)) {
      const Parameter& param = *p.param;
      // A deferred parameter (ZeRO-3) has no value yet: its shard's shape and the model's dtypes.
      const Shape shape = shard_shape(param, mesh);
      const TpContext& ctx = model.mode().context();
      const DType dtype = param.value.defined() ? param.value.dtype() : ctx.dtype;
      const DType grad_dtype = param.grad.defined() ? param.grad.dtype() : ctx.grad_dtype;
      BucketInput in{param.name, shape_numel(shape), {}, param.decays, dtype, u, "", 0, grad_dtype};
      for (const std::string& g : param.partial_grad_over)
        if (mesh.comm(g).size() > 1) in.partial_groups.push_back(g);
      double copies = 1.0;
      for (const std::string& g : param.replicated_over) copies *= mesh.comm(g).size();
      inputs.push_back(std::move(in));
      params_.push_back(p);
      shapes_.push_back(shape);
      units_.push_back(u);
      copies_.push_back(copies);
    }
  // The checkpoint interface indexes parameters as GptModel::parameters() does.
  const std::vector<ModelParam>& listed = model.parameters();
  require(listed.size() == params_.size(), "ZeRO: the model lists ", listed.size(), " parameters but its units hold ",
          params_.size());
  for (std::size_t i = 0; i < listed.size(); ++i)
    require(listed[i].param == params_[i].param, "ZeRO: parameter ", listed[i].name(),
            " is not in unit order in GptModel::parameters()");

  // 2.5D: the depth copies of a weight are data-parallel replicas (see the header).
  if (config.stage >= 1 && config.data_parallel_group == group::dp && mesh.has_comm(kDpDepthGroup)) {
    const int depth = mesh.comm(group::tp_dep).size();
    fold_replica_group(inputs, group::tp_dep, depth, kDpDepthGroup, dp);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].shard_group.empty()) copies_[i] /= depth;
  }

  BucketOptions options;
  options.dp = dp;
  options.cap_bytes = bucket_cap_bytes(config.bucket_mb);
  options.align_bytes = config.align_bytes;
  options.unit_aligned = config.stage == 3;
  plan_ = plan_buckets(inputs, options);
  for (const Bucket& b : plan_.buckets) {
    shard_groups_.push_back(b.shard_group.empty() ? config.data_parallel_group : b.shard_group);
    shard_comms_.push_back(&mesh.comm(shard_groups_.back()));
    shard_ranks_.push_back(shard_comms_.back()->rank());
  }

  forward_reads_.resize(static_cast<std::size_t>(units));
  for (std::size_t i = 0; i < params_.size(); ++i)
    add_unique(forward_reads_[static_cast<std::size_t>(units_[i])], bucket_index(i));
  writers_.resize(plan_.buckets.size());
  for (std::size_t b = 0; b < plan_.buckets.size(); ++b) writers_[b] = plan_.buckets[b].units;
  const int head = units - 1;
  // The tied word embedding: the head of a model that also holds the embedding reads it in place of
  // a copy of its own (model/gpt.hpp), so the head's passes need the embedding's bucket.
  if (model.holds(0) && model.holds(head) && model.config().tied_head)
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (units_[i] == 0 && params_[i].name() == word_embedding_name(model.config())) {
        const std::size_t b = bucket_index(i);
        add_unique(forward_reads_[static_cast<std::size_t>(head)], b);
        if (std::find(writers_[b].begin(), writers_[b].end(), head) == writers_[b].end()) writers_[b].push_back(head);
      }
  writes_.resize(static_cast<std::size_t>(units));
  for (std::size_t b = 0; b < writers_.size(); ++b)
    for (const int u : writers_[b]) add_unique(writes_.at(static_cast<std::size_t>(u)), b);
  backward_reads_ = forward_reads_;
  backward_reads_[0].clear();
  for (const ModelChunk& c : model.chunks()) chunks_.push_back(c.units());
  mesh_ = &mesh;
  seed_ = model.mode().context().seed;
}

int ZeroLayout::next_unit(int u, int direction) const {
  for (const UnitRange& r : chunks_)
    if (r.first <= u && u <= r.last) {
      const int next = u + direction;
      return next >= r.first && next <= r.last ? next : -1;
    }
  return -1;
}

std::int64_t ZeroLayout::offset(std::size_t param) const {
  const BucketPlace& at = plan_.place.at(param);
  return plan_.buckets[at.bucket].slots[at.slot].offset;
}

std::vector<ShardSegment> ZeroLayout::segments(std::size_t b, int shard_rank) const {
  const Bucket& bucket = plan_.buckets.at(b);
  const std::int64_t lo = shard_rank * bucket.shard, hi = lo + bucket.shard;
  std::vector<ShardSegment> out;
  for (const BucketSlot& s : bucket.slots) {
    const std::int64_t first = std::max(lo, s.offset), last = std::min(hi, s.offset + s.numel);
    if (first < last) out.push_back(ShardSegment{s.param, first - s.offset, first - lo, last - first});
  }
  return out;
}

}  // namespace mdtp
