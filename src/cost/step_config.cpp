#include "cost/step_config.hpp"

#include <sstream>

#include "core/error.hpp"
#include "plan/schedule.hpp"
#include "plan/virtual_stage.hpp"
#include "spec/optimizer_kind.hpp"

namespace mdtp::cost {

void validate(const StepConfig& c) {
  const ModelShape& m = c.spec.model;
  const ParallelLayout& l = c.spec.layout;
  require(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0 && m.vocab > 0,
          "the model needs layers, hidden, heads, seq and vocab > 0; got layers=", m.layers, " hidden=", m.hidden,
          " heads=", m.heads, " seq=", m.seq, " vocab=", m.vocab);
  require(m.hidden % m.heads == 0, "hidden=", m.hidden, " must be divisible by heads=", m.heads);
  require(m.kv() > 0 && m.heads % m.kv() == 0, "kv_heads=", m.kv(), " must divide heads=", m.heads);
  require(l.tp >= 1 && l.pp >= 1 && l.dp >= 1 && l.depth >= 1, "tp, pp, dp and depth must be >= 1; got tp=", l.tp,
          " pp=", l.pp, " dp=", l.dp, " depth=", l.depth);
  require(!c.overlap.param_gather || c.overlap.dp_gradients,
          "overlapping the parameter gather needs the gradient reduction overlapped too (Megatron's "
          "--overlap-param-gather needs --overlap-grad-reduce); drop --no-dp-overlap or --overlap-param-gather");
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
    require(m.layers % l.split_positions() == 0, "layers=", m.layers, " must be divisible by ",
            l.stage_mapping == StageMapping::mirrored ? "pp = " : "pp x chunks = ", l.split_positions(),
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
    require(l.chunks == fixed_chunks(l.schedule), "chunks=", l.chunks, "; the ", schedule_name(l.schedule),
            " schedule runs ", fixed_chunks(l.schedule), " per stage (only interleaved takes another count)");
    require(l.stage_mapping == stage_mapping_of(l.schedule), "the ", schedule_name(l.schedule),
            " schedule runs the stage mapping ", stage_mapping_name(stage_mapping_of(l.schedule)), ", not ",
            stage_mapping_name(l.stage_mapping));
    // The schedule's own rules (ZB-H1/H2: m >= p; ZB-V: pp >= 2; DualPipeV: m >= 2 pp), from the
    // one function that builds it.
    if (l.pp > 1 || is_v_shaped(l.schedule)) (void)make_schedule(l.schedule, l.pp, l.micro_batches, l.chunks);
  }
  const int zero = c.spec.zero.stage;
  require(zero >= 0 && zero <= 3, "ZeRO stage must be 0, 1, 2 or 3; got ", zero);
  require(!c.spec.zero.reduce_per_micro_batch || zero >= 2,
          "reducing the gradients per micro-batch needs ZeRO stage 2 or 3; got zero=", zero);
  require(!c.spec.zero.keep_parameters || zero == 3,
          "keeping the gathered parameters for the step needs ZeRO stage 3; got zero=", zero);
  require(!c.spec.zero.offload || zero >= 1, "zero.offload needs ZeRO stage 1, 2 or 3; got zero=", zero);
  validate_offload_pricing(c);
  require(c.dtype() == DType::bf16 || c.dtype() == DType::f16 || c.dtype() == DType::f32,
          "the step model takes dtype bf16, f16 or f32; got ", dtype_name(c.dtype()));
  require(c.overlap.bucket_bytes > 0, "the gradient bucket must be > 0 bytes; got ", c.overlap.bucket_bytes);
}

void validate_offload_pricing(const StepConfig& c) {
  // ZeRO-Offload is priced as DeepSpeed runs it (offload_cost.hpp); mdtp's engine stages its host
  // copies through f64 (zero/zero_buffers.cpp), which --engine-kernels does not price.
  require(!c.spec.zero.offload || !c.engine_kernels,
          "zero.offload with --engine-kernels: the step model prices DeepSpeed's offload (CPU Adam, PCIe "
          "copies), not mdtp's engine's host path; drop one of them");
}

StagePartition StepConfig::partition() const { return stage_partition(spec); }

std::int64_t StepConfig::stage_blocks(int stage) const {
  const ParallelLayout& l = spec.layout;
  // An even split: layers / positions per position, chunks positions per stage (layers / pp, but
  // twice that under DualPipe, whose stages hold two positions each).
  if (l.pp_layers.empty()) return spec.model.layers / l.split_positions() * l.chunks;
  std::int64_t n = 0;
  const StageMap map(l.stage_mapping, l.pp, l.chunks);
  for (int chunk = 0; chunk < l.chunks; ++chunk)
    n += l.pp_layers.at(static_cast<std::size_t>(map.position(map.virtual_stage(stage, chunk))));
  return n;
}

namespace {

// Whether one of stage r's chunks runs the first position (the embedding) or the last (the head).
bool runs_end(const ParallelLayout& l, int stage, bool last) {
  const StageMap map(l.stage_mapping, l.pp, l.chunks);
  for (int chunk = 0; chunk < l.chunks; ++chunk) {
    const int vs = map.virtual_stage(stage, chunk);
    if (last ? map.last(vs) : map.first(vs)) return true;
  }
  return false;
}

}  // namespace

bool StepConfig::holds_embedding(int stage) const { return runs_end(spec.layout, stage, false); }

bool StepConfig::holds_head(int stage) const { return runs_end(spec.layout, stage, true); }

bool StepConfig::head_copies_wte(int stage) const {
  return spec.model.tied_head && holds_head(stage) && !holds_embedding(stage);
}

bool StepConfig::pipeline_sends_can_scatter() const {
  const auto& l = spec.layout;
  return l.mode == TpMode::d1 && l.tp > 1 && l.pp > 1;
}

bool StepConfig::head_holds_wte_copy() const {
  for (int r = 0; r < spec.layout.pp; ++r)
    if (head_copies_wte(r)) return true;
  return false;
}

std::string describe(const StepConfig& c) {
  std::ostringstream os;
  const ParallelLayout& l = c.spec.layout;
  os << tp_mode_name(l.mode) << " tp=" << l.tp;
  if (c.spec.layout.mode == TpMode::d2p5) os << " d=" << c.spec.layout.depth;
  os << " pp=" << c.spec.layout.pp << " dp=" << c.spec.layout.dp << " " << schedule_name(c.spec.layout.schedule);
  if (c.spec.layout.schedule == ScheduleKind::interleaved) os << " v=" << c.spec.layout.chunks;
  if (l.group_size > 0) os << " N=" << l.group_size;
  if (!l.pp_layers.empty()) {
    os << " layers=";
    for (std::size_t k = 0; k < l.pp_layers.size(); ++k) os << (k ? "," : "") << l.pp_layers[k];
  }
  os << " mb=" << c.micro_batch() << " zero=" << c.spec.zero.stage;
  if (c.spec.zero.reduce_per_micro_batch) os << " reduce-per-micro-batch";
  if (c.spec.zero.keep_parameters) os << " keep-params";
  if (c.spec.zero.offload) os << " offload";
  os << " recompute=" << recompute_name(c.spec.recompute) << " " << dtype_name(c.dtype());
  if (c.spec.optimizer.kind != OptimizerKind::adamw) os << " " << optimizer_kind_name(c.spec.optimizer.kind);
  // The head's tie only where it departs from the family's own (gpt2 tied, llama untied): it moves
  // the parameter count, the head's gradient and, across stages, the tied copy's all-reduce.
  const bool family_ties = c.spec.model.family == ModelFamily::gpt2;
  if (c.spec.model.tied_head != family_ties) os << (c.spec.model.tied_head ? " tied-head" : " untied-head");
  if (!c.attention_keeps_probabilities) os << " streaming-attention";
  if (!c.gradient_accumulation_fusion) os << " unfused-grad-accumulation";
  if (c.cross_entropy_fusion) os << " fused-cross-entropy";
  if (c.pipeline_sends_can_scatter() && !c.pipeline_sends_scattered()) os << " whole-p2p-sends";
  if (!c.grad_nan_check && c.megatron_gradient_buffer()) os << " no-grad-nan-check";
  if (c.engine_kernels) os << " engine-kernels";
  if (!c.overlap.tp_backward && is_megatron_1d(l.mode)) os << " tp-backward-waits";
  return os.str();
}

std::string zero_label(const StepConfig& c) {
  return std::to_string(c.spec.zero.stage) + (c.spec.zero.reduce_per_micro_batch ? "m" : "") +
         (c.spec.zero.keep_parameters ? "k" : "") + (c.spec.zero.offload ? "o" : "");
}

}  // namespace mdtp::cost
