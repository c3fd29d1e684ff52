#include "cost/step_config.hpp"

#include <sstream>

#include "core/error.hpp"

namespace mdtp::cost {

void validate(const StepConfig& c) {
  const ModelShape& m = c.spec.model;
  require(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0 && m.vocab > 0,
          "the model needs layers, hidden, heads, seq and vocab > 0; got layers=", m.layers, " hidden=", m.hidden,
          " heads=", m.heads, " seq=", m.seq, " vocab=", m.vocab);
  require(m.hidden % m.heads == 0, "hidden=", m.hidden, " must be divisible by heads=", m.heads);
  require(c.spec.layout.tp >= 1 && c.spec.layout.pp >= 1 && c.spec.layout.dp >= 1 && c.spec.layout.depth >= 1, "tp, pp, dp and depth must be >= 1; got tp=", c.spec.layout.tp,
          " pp=", c.spec.layout.pp, " dp=", c.spec.layout.dp, " depth=", c.spec.layout.depth);
  require(c.spec.layout.mode == TpMode::d2p5 || c.spec.layout.depth == 1, "depth=", c.spec.layout.depth, " applies only to the 2.5d mode, not ", c.spec.layout.mode);
  require(c.spec.global_batch > 0 && c.micro_batch() > 0, "global batch and micro-batch must be > 0; got global_batch=",
          c.spec.global_batch, " micro_batch=", c.micro_batch());
  require(c.spec.global_batch % (c.micro_batch() * c.spec.layout.dp) == 0, "global batch ", c.spec.global_batch,
          " must be divisible by micro-batch x dp = ", c.micro_batch(), " x ", c.spec.layout.dp);
  require(m.layers % c.spec.layout.pp == 0, "layers=", m.layers, " must be divisible by pp=", c.spec.layout.pp, " (equal stages)");
  if (c.spec.layout.schedule == ScheduleKind::interleaved) {
    require(c.spec.layout.chunks >= 2, "the interleaved schedule needs chunks >= 2; got chunks=", c.spec.layout.chunks);
    require(c.spec.layout.pp >= 2, "the interleaved schedule needs pp >= 2; got pp=", c.spec.layout.pp);
    require(m.layers % (static_cast<std::int64_t>(c.spec.layout.pp) * c.spec.layout.chunks) == 0, "layers=", m.layers,
            " must be divisible by pp x chunks = ", c.spec.layout.pp, " x ", c.spec.layout.chunks, " (equal model chunks)");
    require(c.microbatches() % c.spec.layout.pp == 0, "the interleaved schedule needs micro-batches m=", c.microbatches(),
            " to be a multiple of pp=", c.spec.layout.pp);
  } else {
    require(c.spec.layout.schedule != ScheduleKind::zb_h1 || c.microbatches() >= c.spec.layout.pp, "the zb-h1 schedule needs at least pp=",
            c.spec.layout.pp, " micro-batches; got m=", c.microbatches());
    require(c.spec.layout.chunks == 1, "chunks=", c.spec.layout.chunks, " applies only to the interleaved schedule, not ",
            schedule_name(c.spec.layout.schedule));
  }
  require(c.spec.zero.stage >= 0 && c.spec.zero.stage <= 3, "ZeRO stage must be 0, 1, 2 or 3; got ", c.spec.zero.stage);
  require(!c.spec.zero.reduce_per_micro_batch || c.spec.zero.stage >= 2,
          "reducing the gradients per micro-batch needs ZeRO stage 2 or 3; got zero=", c.spec.zero.stage);
  require(!c.spec.zero.keep_parameters || c.spec.zero.stage == 3,
          "keeping the gathered parameters for the step needs ZeRO stage 3; got zero=", c.spec.zero.stage);
  require(c.dtype() == DType::bf16 || c.dtype() == DType::f16 || c.dtype() == DType::f32,
          "the step model takes dtype bf16, f16 or f32); got ", dtype_name(c.dtype()));
  require(c.overlap.bucket_bytes > 0, "the gradient bucket must be > 0 bytes; got ", c.overlap.bucket_bytes);
}

std::string describe(const StepConfig& c) {
  std::ostringstream os;
  os << tp_mode_name(c.spec.layout.mode) << " tp=" << c.spec.layout.tp;
  if (c.spec.layout.mode == TpMode::d2p5) os << " d=" << c.spec.layout.depth;
  os << " pp=" << c.spec.layout.pp << " dp=" << c.spec.layout.dp << " " << schedule_name(c.spec.layout.schedule);
  if (c.spec.layout.schedule == ScheduleKind::interleaved) os << " v=" << c.spec.layout.chunks;
  os << " mb=" << c.micro_batch() << " zero=" << c.spec.zero.stage;
  if (c.spec.zero.reduce_per_micro_batch) os << " reduce-per-micro-batch";
  if (c.spec.zero.keep_parameters) os << " keep-params";
  os << " recompute=" << recompute_name(c.spec.recompute) << " " << dtype_name(c.dtype());
  if (!c.attention_keeps_probabilities) os << " streaming-attention";
  return os.str();
}

std::string zero_label(const StepConfig& c) {
  return std::to_string(c.spec.zero.stage) + (c.spec.zero.reduce_per_micro_batch ? "m" : "") + (c.spec.zero.keep_parameters ? "k" : "");
}

}  // namespace mdtp::cost
