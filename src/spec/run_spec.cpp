#include "spec/run_spec.hpp"

#include <cmath>
#include <sstream>

#include "core/error.hpp"

namespace mdtp {

ModelFamily parse_model_family(std::string_view name) {
  for (ModelFamily k : {ModelFamily::gpt2, ModelFamily::llama})
    if (name == model_family_name(k)) return k;
  throw_error("unknown model family '", name, "'; expected gpt2 or llama");
}

const char* model_family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::gpt2: return "gpt2";
    case ModelFamily::llama: return "llama";
  }
  return "?";
}

StageMapping parse_stage_mapping(std::string_view name) {
  for (StageMapping k : {StageMapping::round_robin, StageMapping::v_shape, StageMapping::mirrored})
    if (name == stage_mapping_name(k)) return k;
  throw_error("unknown stage mapping '", name, "'; expected round-robin, v-shape or mirrored");
}

const char* stage_mapping_name(StageMapping mapping) {
  switch (mapping) {
    case StageMapping::round_robin: return "round-robin";
    case StageMapping::v_shape: return "v-shape";
    case StageMapping::mirrored: return "mirrored";
  }
  return "?";
}

StageMapping stage_mapping_of(ScheduleKind kind) {
  if (is_mirrored(kind)) return StageMapping::mirrored;
  return is_v_shaped(kind) ? StageMapping::v_shape : StageMapping::round_robin;
}

void validate_model(const ModelShape& m) {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads}, {"seq", m.seq}, {"vocab", m.vocab}};
  for (const auto& [name, value] : sizes) require(value > 0, "run spec: model.", name, " must be > 0; got ", value);
  require(m.ffn_hidden >= 0, "run spec: model.ffn_hidden must be >= 0 (0: 4 x hidden); got ", m.ffn_hidden);
  require(m.kv_heads >= 0, "run spec: model.kv_heads must be >= 0 (0: heads); got ", m.kv_heads);
  require(m.hidden % m.heads == 0, "run spec: model.heads=", m.heads, " must divide model.hidden=", m.hidden,
          " (every head has hidden/heads features)");
  require(m.heads % m.kv() == 0, "run spec: model.kv_heads=", m.kv(), " must divide model.heads=", m.heads,
          " (each key/value head serves heads/kv_heads query heads)");
  require(m.norm_eps > 0 && std::isfinite(m.norm_eps), "run spec: model.norm_eps must be > 0; got ", m.norm_eps);
  require(m.rope_theta > 0 && std::isfinite(m.rope_theta), "run spec: model.rope_theta must be > 0; got ",
          m.rope_theta);
  if (m.family == ModelFamily::gpt2)
    require(m.kv() == m.heads, "run spec: a gpt2 model has kv_heads = heads = ", m.heads, "; got kv_heads ", m.kv(),
            " (--model llama takes grouped-query attention)");
  else
    require((m.hidden / m.heads) % 2 == 0, "run spec: llama's rotary embedding needs an even head width; hidden/heads = ",
            m.hidden / m.heads);
}

namespace {

void validate_layout(const ParallelLayout& p, const ModelShape& m) {
  const std::pair<const char*, int> sizes[] = {{"tp", p.tp}, {"depth", p.depth}, {"pp", p.pp}, {"dp", p.dp}};
  for (const auto& [name, value] : sizes)
    require(value >= 1, "run spec: parallel.", name, " must be >= 1; got ", value);
  require(p.mode != TpMode::none || p.tp == 1,
          "run spec: parallel.mode none is the serial reference and needs parallel.tp=1; got tp=", p.tp);
  require(p.mode == TpMode::d2p5 || p.depth == 1, "run spec: parallel.depth=", p.depth,
          " applies only to the 2.5d mode, not ", p.mode);
  require(p.micro_batches >= 1, "run spec: parallel.micro_batches must be >= 1; got ", p.micro_batches);
  require(p.chunks >= 1, "run spec: parallel.chunks must be >= 1; got ", p.chunks);
  require(p.group_size >= 0, "run spec: parallel.group_size must be >= 0 (0: pp); got ", p.group_size);
  if (p.schedule == ScheduleKind::interleaved) {
    require(p.chunks >= 2, "run spec: the interleaved schedule needs parallel.chunks >= 2 (one chunk is 1f1b); got ",
            p.chunks);
  } else {
    require(p.chunks == fixed_chunks(p.schedule), "run spec: parallel.chunks=", p.chunks, "; the ",
            schedule_name(p.schedule), " schedule runs ", fixed_chunks(p.schedule), " chunk",
            fixed_chunks(p.schedule) == 1 ? "" : "s", " per stage (only interleaved takes another count)");
    require(p.group_size == 0, "run spec: parallel.group_size=", p.group_size,
            " applies only to the interleaved schedule, not ", schedule_name(p.schedule));
  }
  require(p.stage_mapping == stage_mapping_of(p.schedule), "run spec: parallel.stage_mapping=",
          stage_mapping_name(p.stage_mapping), " does not match the ", schedule_name(p.schedule), " schedule, which runs ",
          stage_mapping_name(stage_mapping_of(p.schedule)));
  // The model's positions: pp x chunks, or pp under DualPipe's mirror (stage r holds r and p-1-r).
  const std::int64_t positions = p.split_positions();
  const bool mirrored = p.stage_mapping == StageMapping::mirrored;
  const std::string parts = mirrored ? "pp = " + std::to_string(p.pp) + " (dualpipe: one count per position)"
                                     : "pp x chunks = " + std::to_string(p.pp) + " x " + std::to_string(p.chunks);
  if (p.pp_layers.empty()) {
    require(m.layers % positions == 0, "run spec: model.layers=", m.layers, " does not split evenly over ", parts,
            "; give parallel.pp_layers");
  } else {
    require(static_cast<std::int64_t>(p.pp_layers.size()) == positions, "run spec: parallel.pp_layers has ",
            p.pp_layers.size(), " entries; expected ", parts, mirrored ? "" : " = " + std::to_string(positions));
    std::int64_t total = 0;
    for (std::size_t k = 0; k < p.pp_layers.size(); ++k) {
      require(p.pp_layers[k] >= 0, "run spec: parallel.pp_layers[", k, "]=", p.pp_layers[k], " must be >= 0");
      total += p.pp_layers[k];
    }
    require(total == m.layers, "run spec: parallel.pp_layers sums to ", total, " blocks; model.layers=", m.layers);
  }
}

void validate_zero(const ZeroOptions& z) {
  require(z.stage >= 0 && z.stage <= 3, "run spec: zero.stage must be 0, 1, 2 or 3; got ", z.stage);
  require(z.bucket_mb > 0 && std::isfinite(z.bucket_mb), "run spec: zero.bucket_mb must be a finite size > 0; got ",
          z.bucket_mb);
  require(!z.offload || z.stage >= 1, "run spec: zero.offload needs ZeRO stage 1, 2 or 3; got stage ", z.stage);
  require(!z.reduce_per_micro_batch || z.stage >= 2,
          "run spec: zero.reduce_per_micro_batch needs ZeRO stage 2 or 3; got stage ", z.stage);
  require(!z.keep_parameters || z.stage == 3, "run spec: zero.keep_parameters needs ZeRO stage 3; got stage ",
          z.stage);
}

void validate_optimizer(const OptimizerSpec& o) {
  require(o.lr > 0, "run spec: optimizer.lr must be > 0; got ", o.lr);
  require(o.beta1 >= 0 && o.beta1 < 1, "run spec: optimizer.beta1 must lie in [0, 1); got ", o.beta1);
  require(o.beta2 >= 0 && o.beta2 < 1, "run spec: optimizer.beta2 must lie in [0, 1); got ", o.beta2);
  require(o.eps > 0, "run spec: optimizer.eps must be > 0; got ", o.eps);
  require(o.weight_decay >= 0, "run spec: optimizer.weight_decay must be >= 0; got ", o.weight_decay);
  require(o.grad_clip >= 0, "run spec: optimizer.grad_clip must be >= 0 (0: no clipping); got ", o.grad_clip);
}

}  // namespace

Precision precision_for(DType params) {
  return {params, is_16bit(params) ? DType::f32 : params, {}};
}

void validate(const RunSpec& s) {
  validate_model(s.model);
  validate_layout(s.layout, s.model);
  const std::int64_t per_step = static_cast<std::int64_t>(s.layout.dp) * s.layout.micro_batches;
  require(s.global_batch > 0, "run spec: global_batch must be > 0; got ", s.global_batch);
  require(s.global_batch % per_step == 0, "run spec: global_batch=", s.global_batch,
          " must be divisible by dp x micro_batches = ", s.layout.dp, " x ", s.layout.micro_batches);
  validate_zero(s.zero);
  require(dtype_size(s.precision.grad_reduce) >= dtype_size(s.precision.params), "run spec: precision.grad_reduce=",
          dtype_name(s.precision.grad_reduce), " is narrower than precision.params=", dtype_name(s.precision.params),
          "; gradients are reduced in the parameters' dtype or a wider one");
  const LossScaling& l = s.precision.loss_scaling;
  require(std::isfinite(l.fixed) && l.fixed >= 0, "run spec: precision.loss_scale must be >= 0 (0: dynamic under f16); got ",
          l.fixed);
  require(l.fixed == 0 || s.precision.params == DType::f16, "run spec: precision.loss_scale=", l.fixed,
          " applies to f16 training only; got ", dtype_name(s.precision.params),
          s.precision.params == DType::bf16 ? " (bf16 has f32's exponent range and needs no loss scaling)" : "");
  require(std::isfinite(l.min) && l.min > 0 && std::isfinite(l.initial) && l.initial >= l.min,
          "run spec: the dynamic loss scale needs 0 < min_loss_scale <= initial_loss_scale; got ", l.min, " and ",
          l.initial);
  require(l.window >= 1, "run spec: precision.loss_scale_window must be >= 1 step; got ", l.window);
  require(l.hysteresis >= 1, "run spec: precision.hysteresis must be >= 1; got ", l.hysteresis);
  require(!is_16bit(s.precision.grad_reduce) || s.precision.grad_reduce == s.precision.params,
          "run spec: precision.grad_reduce=", dtype_name(s.precision.grad_reduce), " with precision.params=",
          dtype_name(s.precision.params), "; 16-bit gradients are the parameters' own format (or use f32)");
  validate_optimizer(s.optimizer);
  require(s.dropout >= 0 && s.dropout < 1, "run spec: dropout must lie in [0, 1); got ", s.dropout);
}

std::string describe(const RunSpec& s) {
  const ModelShape& m = s.model;
  const ParallelLayout& p = s.layout;
  std::ostringstream os;
  os << (m.family == ModelFamily::gpt2 ? "GPT" : "Llama") << " l=" << m.layers << " h=" << m.hidden << " a=" << m.heads << " s=" << m.seq << " V=" << m.vocab;
  if (m.ffn_hidden > 0) os << " ffn=" << m.ffn_hidden;
  if (m.kv_heads > 0) os << " kv=" << m.kv_heads;
  if (m.family == ModelFamily::llama) os << (m.tied_head ? " tied-head" : "") << " theta=" << m.rope_theta;
  os << " B=" << s.global_batch << " | " << p.mode << " tp=" << p.tp;
  if (p.mode == TpMode::d2p5) os << " d=" << p.depth;
  os << " pp=" << p.pp << " dp=" << p.dp << " " << schedule_name(p.schedule) << " m=" << p.micro_batches;
  if (p.schedule == ScheduleKind::interleaved) os << " v=" << p.chunks;
  if (p.group_size > 0) os << " N=" << p.group_size;
  if (!p.pp_layers.empty()) {
    os << " layers=";
    for (std::size_t k = 0; k < p.pp_layers.size(); ++k) os << (k ? "," : "") << p.pp_layers[k];
  }
  os << " | zero=" << s.zero.stage;
  if (s.zero.stage > 0) os << " bucket=" << s.zero.bucket_mb << "MiB";
  if (s.zero.offload) os << " offload";
  if (s.zero.reduce_per_micro_batch) os << " reduce-per-micro-batch";
  if (s.zero.keep_parameters) os << " keep-params";
  os << " recompute=" << recompute_name(s.recompute) << " " << dtype_name(s.precision.params);
  if (s.precision.grad_reduce != s.precision.params) os << " (grads " << dtype_name(s.precision.grad_reduce) << ")";
  if (s.precision.params == DType::f16) {
    if (s.precision.loss_scaling.fixed > 0) os << " loss-scale=" << s.precision.loss_scaling.fixed;
    else os << " dynamic-loss-scale";
  }
  if (s.dropout > 0) os << " dropout=" << s.dropout;
  os << " | " << optimizer_kind_name(s.optimizer.kind) << " lr=" << s.optimizer.lr;
  if (s.optimizer.grad_clip > 0) os << " clip=" << s.optimizer.grad_clip;
  os << " | seed=" << s.seed;
  return os.str();
}

}  // namespace mdtp
