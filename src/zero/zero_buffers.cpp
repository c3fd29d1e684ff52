#include "zero/zero_buffers.hpp"

#include <utility>

namespace mdtp {

void transfer(const Backend& from, const Tensor& src, const Backend& to, Tensor& dst) {
  if (from.device() == DeviceKind::host && to.device() == DeviceKind::host) {
    to.convert(src, dst);  // a copy when the dtypes agree
    return;
  }
  to.assign_f64(dst, from.to_f64(src));
}

void copy_elements(const Backend& from, const Tensor& src, std::int64_t src_offset, const Backend& to, Tensor& dst,
                   std::int64_t dst_offset, std::int64_t n) {
  const Tensor piece = src.reshaped({src.numel()}).row_slice(src_offset, src_offset + n);
  Tensor target = dst.reshaped({dst.numel()}).row_slice(dst_offset, dst_offset + n);
  transfer(from, piece, to, target);
}

ZeroBuffers::ZeroBuffers(const ZeroLayout& layout, int stage, const Backend& backend)
    : layout_(layout), backend_(backend), stage_(stage) {
  require(stage >= 1 && stage <= 3, "ZeroBuffers: stage 1, 2 or 3; got stage=", stage);
  const std::size_t n = layout.bucket_count();
  value_full_.resize(n);
  value_shard_.resize(n);
  grad_full_.resize(n);
  grad_shard_.resize(n);
  for (std::size_t b = 0; b < n; ++b) {
    const Bucket& bucket = layout.bucket(b);
    const int rank = layout.shard_rank(b);
    const std::int64_t lo = rank * bucket.shard, hi = lo + bucket.shard;
    if (stage_ < 3) {
      value_full_[b] = backend.zeros({bucket.padded}, bucket.dtype, MemCategory::parameters);
      for (const BucketSlot& s : bucket.slots)
        copy_elements(backend, layout.params()[s.param].param->value, 0, backend, value_full_[b], s.offset, s.numel);
      bind(b, value_full_[b], false);
      value_shard_[b] = value_full_[b].row_slice(lo, hi);
    } else {
      value_shard_[b] = backend.zeros({bucket.shard}, bucket.dtype, MemCategory::parameters);
      fill_shard(b, rank);
    }
    if (stage_ == 1) {
      grad_full_[b] = backend.zeros({bucket.padded}, bucket.grad_dtype, MemCategory::gradients);
      bind(b, grad_full_[b], true);
      grad_shard_[b] = grad_full_[b].row_slice(lo, hi);
    } else {
      grad_shard_[b] = backend.zeros({bucket.shard}, bucket.grad_dtype, MemCategory::gradients);
    }
  }
  // Parameters no bucket materialises hold nothing: the model's own storage is freed here.
  for (std::size_t b = 0; b < n; ++b)
    for (const BucketSlot& s : layout.bucket(b).slots) {
      Parameter& p = *layout.params()[s.param].param;
      if (stage_ == 3) p.value = Tensor();
      if (stage_ >= 2) p.grad = Tensor();
    }
}

void ZeroBuffers::fill_shard(std::size_t b, int rank) {
  // Deferred parameters (no storage: TpContext::defer_parameters) get the initial values of exactly
  // the elements this shard holds, drawn as the model's initialize() would draw them; padding stays
  // zero.  A parameter that has storage (a model built whole) is copied.  A synthetic shard (a
  // simulated cluster's, holding no values) draws nothing.
  std::vector<double> drawn;
  for (const ShardSegment& s : layout_.segments(b, rank)) {
    const ModelParam& p = layout_.params()[s.param];
    if (p.param->value.defined() || !value_shard_[b].holds_values()) continue;
    if (drawn.empty()) drawn.assign(static_cast<std::size_t>(layout_.bucket(b).shard), 0.0);
    initial_values(p, layout_.mesh(), layout_.seed(), layout_.bucket(b).dtype, s.param_offset, s.numel,
                   drawn.data() + s.shard_offset);
  }
  if (!drawn.empty()) backend_.assign_f64(value_shard_[b], drawn);
  for (const ShardSegment& s : layout_.segments(b, rank)) {
    const Parameter& p = *layout_.params()[s.param].param;
    if (p.value.defined()) copy_elements(backend_, p.value, s.param_offset, backend_, value_shard_[b], s.shard_offset, s.numel);
  }
}

void ZeroBuffers::bind(std::size_t b, const Tensor& full, bool gradient) {
  for (const BucketSlot& s : layout_.bucket(b).slots) {
    Parameter& p = *layout_.params()[s.param].param;
    Tensor view = full.row_slice(s.offset, s.offset + s.numel).reshaped(layout_.shape(s.param));
    (gradient ? p.grad : p.value) = view;
  }
}

void ZeroBuffers::bind_values(std::size_t b, Tensor full) {
  require(full.numel() == layout_.bucket(b).padded, "ZeRO: a gathered bucket of ", full.numel(), " elements for bucket ",
          b, " of ", layout_.bucket(b).padded);
  value_full_[b] = std::move(full);
  bind(b, value_full_[b], false);
}

void ZeroBuffers::release_values(std::size_t b) {
  for (const BucketSlot& s : layout_.bucket(b).slots) layout_.params()[s.param].param->value = Tensor();
  value_full_[b] = Tensor();
}

void ZeroBuffers::begin_gradients() {
  for (std::size_t b = 0; b < grad_full_.size(); ++b) {
    if (stage_ == 1) backend_.fill(grad_full_[b], 0.0);
    else if (grad_full_[b].defined()) detach_full_gradients(b);  // left by a step that was not finished: freed
  }
}

void ZeroBuffers::open_gradients(const std::vector<std::size_t>& buckets) {
  if (stage_ == 1) return;
  for (const std::size_t b : buckets) {
    if (grad_full_.at(b).defined()) continue;
    const Bucket& bucket = layout_.bucket(b);
    grad_full_[b] = backend_.zeros({bucket.padded}, bucket.grad_dtype, MemCategory::gradients);
    bind(b, grad_full_[b], true);
  }
}

Tensor ZeroBuffers::detach_full_gradients(std::size_t b) {
  if (stage_ == 1) return grad_full_.at(b);
  for (const BucketSlot& s : layout_.bucket(b).slots) layout_.params()[s.param].param->grad = Tensor();
  return std::exchange(grad_full_.at(b), Tensor());
}

}  // namespace mdtp
