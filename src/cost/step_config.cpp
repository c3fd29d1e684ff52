#include "cost/step_config.hpp"

#include <sstream>

#include "core/error.hpp"

namespace mdtp::cost {

void validate(const StepConfig& c) {
  const ModelShape& m = c.spec.model;
  const ParallelLayout& l = c.spec.layout;
  require(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0 && m.vocab > 0,
          "the model needs layers, hidden, heads, seq and vocab > 0; got layers=", m.layers, " hidden=", m.hidden,
          " heads=", m.heads, " seq=", m.seq, " vocab=", m.vocab);
  require(m.hidden % m.heads == 0, "hidden=", m.hidden, " must be divisible by heads=", m.heads);
  require(l.tp >= 1 && l.pp >= 1 && l.dp >= 1 && l.depth >= 1, "tp, pp, dp and depth must be >= 1; got tp=", l.tp,
          " pp=", l.pp, " dp=", l.dp, " depth=", l.depth);
  require(l.mode == TpMode::d2p5 || l.depth == 1, "depth=", l.depth, " applies only to the 2.5d mode, not ", l.mode);
  require(c.spec.global_batch > 0 && l.micro_batches >= 1 && c.micro_batch() > 0,
          "global batch and micro-batch must be > 0; got global_batch=", c.spec.global_batch,
          " micro_batch=", c.micro_batch());
  require(c.spec.global_batch % (c.micro_batch() * l.dp) == 0, "global batch ", c.spec.global_batch,
          " must be divisible by micro-batch x dp = ", c.micro_batch(), " x ", l.dp);
  // The blocks per virtual stage: given (--pp-layers), or an even split the layers must allow.
  if (l.pp_layers.empty()) {
    require(m.layers % l.pp == 0, "layers=", m.layers, " must be divisible by pp=", l.pp,
            " (equal stages; --pp-layers gives an uneven split)");
    require(m.layers % (static_cast<std::int64_t>(l.pp) * l.chunks) == 0, "layers=", m.layers,
            " must be divisible by pp x chunks = ", l.pp, " x ", l.chunks,
            " (equal model chunks; --pp-layers gives an uneven split)");
  } else {
    (void)c.partition();  // StagePartition refuses, naming the values, a split that does not fit
  }
  if (l.schedule == ScheduleKind::interleaved) {
    require(l.chunks >= 2, "the interleaved schedule needs chunks >= 2; got chunks=", l.chunks);
    require(l.pp >= 2, "the interleaved schedule needs pp >= 2; got pp=", l.pp);
    require(c.microbatches() % l.pp == 0, "the interleaved schedule needs micro-batches m=", c.microbatches(),
            " to be a multiple of pp=", l.pp);
  } else {
    require(l.schedule != ScheduleKind::zb_h1 || c.microbatches() >= l.pp, "the zb-h1 schedule needs at least pp=",
            l.pp, " micro-batches; got m=", c.microbatches());
    require(l.chunks == 1, "chunks=", l.chunks, " applies only to the interleaved schedule, not ",
            schedule_name(l.schedule));
  }
  const int zero = c.spec.zero.stage;
  require(zero >= 0 && zero <= 3, "ZeRO stage must be 0, 1, 2 or 3; got ", zero);
  require(!c.spec.zero.reduce_per_micro_batch || zero >= 2,
          "reducing the gradients per micro-batch needs ZeRO stage 2 or 3; got zero=", zero);
  require(!c.spec.zero.keep_parameters || zero == 3,
          "keeping the gathered parameters for the step needs ZeRO stage 3; got zero=", zero);
  require(c.dtype() == DType::bf16 || c.dtype() == DType::f16 || c.dtype() == DType::f32,
          "the step model takes dtype bf16, f16 or f32; got ", dtype_name(c.dtype()));
  require(c.overlap.bucket_bytes > 0, "the gradient bucket must be > 0 bytes; got ", c.overlap.bucket_bytes);
}

StagePartition StepConfig::partition() const {
  const ParallelLayout& l = spec.layout;
  return StagePartition(static_cast<int>(spec.model.layers), l.pp, l.chunks, l.pp_layers);
}

std::int64_t StepConfig::stage_blocks(int stage) const {
  const ParallelLayout& l = spec.layout;
  if (l.pp_layers.empty()) return spec.model.layers / l.pp;
  std::int64_t n = 0;
  for (int chunk = 0; chunk < l.chunks; ++chunk) n += l.pp_layers.at(static_cast<std::size_t>(chunk * l.pp + stage));
  return n;
}

std::string describe(const StepConfig& c) {
  std::ostringstream os;
  const ParallelLayout& l = c.spec.layout;
  os << tp_mode_name(l.mode) << " tp=" << l.tp;
  if (c.spec.layout.mode == TpMode::d2p5) os << " d=" << c.spec.layout.depth;
  os << " pp=" << c.spec.layout.pp << " dp=" << c.spec.layout.dp << " " << schedule_name(c.spec.layout.schedule);
  if (c.spec.layout.schedule == ScheduleKind::interleaved) os << " v=" << c.spec.layout.chunks;
  if (!l.pp_layers.empty()) {
    os << " layers=";
    for (std::size_t k = 0; k < l.pp_layers.size(); ++k) os << (k ? "," : "") << l.pp_layers[k];
  }
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
