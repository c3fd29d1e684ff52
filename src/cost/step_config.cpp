#include "cost/step_config.hpp"

#include <sstream>

#include "core/error.hpp"

namespace mdtp::cost {

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& name) {
  for (auto r : {Recompute::none, Recompute::selective, Recompute::full})
    if (name == recompute_name(r)) return r;
  throw_error("unknown recomputation '", name, "'; expected none, selective or full");
}

void validate(const StepConfig& c) {
  const GptShape& m = c.model;
  require(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0 && m.vocab > 0,
          "the model needs layers, hidden, heads, seq and vocab > 0; got layers=", m.layers, " hidden=", m.hidden,
          " heads=", m.heads, " seq=", m.seq, " vocab=", m.vocab);
  require(m.hidden % m.heads == 0, "hidden=", m.hidden, " must be divisible by heads=", m.heads);
  require(c.tp >= 1 && c.pp >= 1 && c.dp >= 1 && c.depth >= 1, "tp, pp, dp and depth must be >= 1; got tp=", c.tp,
          " pp=", c.pp, " dp=", c.dp, " depth=", c.depth);
  require(c.mode == TpMode::d2p5 || c.depth == 1, "depth=", c.depth, " applies only to the 2.5d mode, not ", c.mode);
  require(c.global_batch > 0 && c.micro_batch > 0, "global batch and micro-batch must be > 0; got global_batch=",
          c.global_batch, " micro_batch=", c.micro_batch);
  require(c.global_batch % (c.micro_batch * c.dp) == 0, "global batch ", c.global_batch,
          " must be divisible by micro-batch x dp = ", c.micro_batch, " x ", c.dp);
  require(m.layers % c.pp == 0, "layers=", m.layers, " must be divisible by pp=", c.pp, " (equal stages)");
  if (c.schedule == ScheduleKind::interleaved) {
    require(c.chunks >= 2, "the interleaved schedule needs chunks >= 2; got chunks=", c.chunks);
    require(c.pp >= 2, "the interleaved schedule needs pp >= 2; got pp=", c.pp);
    require(m.layers % (static_cast<std::int64_t>(c.pp) * c.chunks) == 0, "layers=", m.layers,
            " must be divisible by pp x chunks = ", c.pp, " x ", c.chunks, " (equal model chunks)");
    require(c.microbatches() % c.pp == 0, "the interleaved schedule needs micro-batches m=", c.microbatches(),
            " to be a multiple of pp=", c.pp);
  } else {
    require(c.schedule != ScheduleKind::zb_h1 || c.microbatches() >= c.pp, "the zb-h1 schedule needs at least pp=",
            c.pp, " micro-batches; got m=", c.microbatches());
    require(c.chunks == 1, "chunks=", c.chunks, " applies only to the interleaved schedule, not ",
            schedule_name(c.schedule));
  }
  require(c.zero >= 0 && c.zero <= 3, "ZeRO stage must be 0, 1, 2 or 3; got ", c.zero);
  require(!c.zero_reduce_per_micro_batch || c.zero >= 2,
          "reducing the gradients per micro-batch needs ZeRO stage 2 or 3; got zero=", c.zero);
  require(!c.zero_keep_parameters || c.zero == 3,
          "keeping the gathered parameters for the step needs ZeRO stage 3; got zero=", c.zero);
  require(c.dtype == DType::bf16 || c.dtype == DType::f16 || c.dtype == DType::f32,
          "the step model takes dtype bf16, f16 or f32; got ", dtype_name(c.dtype));
  require(c.overlap.bucket_bytes > 0, "the gradient bucket must be > 0 bytes; got ", c.overlap.bucket_bytes);
}

std::string describe(const StepConfig& c) {
  std::ostringstream os;
  os << tp_mode_name(c.mode) << " tp=" << c.tp;
  if (c.mode == TpMode::d2p5) os << " d=" << c.depth;
  os << " pp=" << c.pp << " dp=" << c.dp << " " << schedule_name(c.schedule);
  if (c.schedule == ScheduleKind::interleaved) os << " v=" << c.chunks;
  os << " mb=" << c.micro_batch << " zero=" << c.zero;
  if (c.zero_reduce_per_micro_batch) os << " reduce-per-micro-batch";
  if (c.zero_keep_parameters) os << " keep-params";
  os << " recompute=" << recompute_name(c.recompute) << " " << dtype_name(c.dtype);
  if (!c.attention_keeps_probabilities) os << " streaming-attention";
  return os.str();
}

std::string zero_label(const StepConfig& c) {
  return std::to_string(c.zero) + (c.zero_reduce_per_micro_batch ? "m" : "") + (c.zero_keep_parameters ? "k" : "");
}

}  // namespace mdtp::cost
