#include "pipeline/boundary.hpp"

#include "mesh/mesh.hpp"
#include "spec/names.hpp"
#include "tp/linear.hpp"

namespace mdtp {

BoundaryLink::BoundaryLink(const GptModel& model, const Mesh& mesh)
    : mesh_(mesh), backend_(model.mode().context().backend), dtype_(model.mode().context().dtype) {
  const ModelSplit& split = model.split();
  const ModelShape& config = model.config();
  const ShardBlock b =
      shard_block(split.residual, mesh, model.micro_batch() * config.seq, config.hidden, "pipeline boundary");
  rows_ = b.rows;
  cols_ = b.cols;
  std::vector<std::string> used = split.residual.row_groups;
  used.insert(used.end(), split.residual.col_groups.begin(), split.residual.col_groups.end());
  replicated_over_ = complement_group(model.mode().tp_axes(), used);
  if (!replicated_over_.empty() && mesh.comm(replicated_over_).size() > 1) {
    Communicator& r = mesh.comm(replicated_over_);
    require(rows_ % r.size() == 0, "pipeline boundary: the ", rows_, " rows of a micro-batch's residual stream ",
            "must divide over the ", r.size(), " ranks of ", replicated_over_,
            " that hold it whole (they send a slice each); choose a micro-batch whose b·T they divide");
    slices_ = r.size();
    slice_ = r.rank();
  }
}

BoundaryLink::Transfer BoundaryLink::send(const Tensor& x, int peer, int tag) const {
  require(x.rows() == rows_ && x.cols() == cols_, "pipeline boundary: sending a tensor of shape ",
          shape_string(x.shape()), "; the residual shard is [", rows_, ", ", cols_, "]");
  const std::int64_t part = rows_ / slices_;
  Transfer t{x.row_slice(part * slice_, part * (slice_ + 1)), {}};
  t.handle = mesh_.comm(group::pp).isend(t.buffer, peer, tag);
  return t;
}

BoundaryLink::Transfer BoundaryLink::post_receive(int peer, int tag) const {
  Transfer t{backend_.empty({rows_ / slices_, cols_}, dtype_, MemCategory::communication), {}};
  t.handle = mesh_.comm(group::pp).irecv(t.buffer, peer, tag);
  return t;
}

Tensor BoundaryLink::complete(Transfer& receive) const {
  receive.handle.wait();
  if (slices_ == 1) return receive.buffer;
  Tensor whole = backend_.empty({rows_, cols_}, dtype_, MemCategory::activations);
  mesh_.comm(replicated_over_).all_gather(receive.buffer, whole);
  return whole;
}

}  // namespace mdtp
