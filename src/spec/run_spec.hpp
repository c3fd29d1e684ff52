#pragma once
// RunSpec: the vocabulary of one training run, as data and nothing else — the model's shape and
// family, the parallel layout and pipeline schedule, ZeRO, activation recomputation, precision and
// the optimizer.  It is what a run is asked to be, before any mesh exists, so the engine, the cost
// model and the planner can all read the same description (and a results file can record it as
// JSON, run_spec_json.hpp) instead of each keeping its own configuration type.
//
// Every member has a default, and the defaults form a valid spec: a small GPT-2 on one rank
// (TrainConfig's kDefaultModel with a concrete vocabulary), so a spec can be written as "the
// defaults, and then these changes".
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "spec/optimizer_kind.hpp"
#include "spec/recompute.hpp"
#include "spec/schedule_kind.hpp"
#include "spec/tp_mode.hpp"

namespace mdtp {

// The block family.  gpt2: LayerNorm with biases, learned positions, GeLU MLP, biases on every
// Linear, ffn 4·hidden, kv = heads, the head tied to the embedding.  llama: RMSNorm, rotary
// position embeddings (Hugging Face's rotate-half form), a SwiGLU MLP of any width, grouped-query
// attention, no biases, the head tied or not.
enum class ModelFamily { gpt2, llama };
ModelFamily parse_model_family(std::string_view name);  // "gpt2" | "llama"
const char* model_family_name(ModelFamily family);

// Which pipeline stage runs which virtual stage: round-robin, stage r runs virtual stages r, r + p,
// r + 2p, … (Megatron's interleaving); V-shaped, stage r runs virtual stages r and 2p − 1 − r
// (ZB-V, DualPipeV), so stage 0 holds both the embedding and the head; mirrored, stage r runs
// position r of a route down the stages and position p − 1 − r of a route up them (DualPipe: two
// copies of the model).  The schedule fixes it (plan/virtual_stage.hpp has the arithmetic).
enum class StageMapping { round_robin, v_shape, mirrored };
StageMapping parse_stage_mapping(std::string_view name);  // "round-robin" | "v-shape" | "mirrored"
const char* stage_mapping_name(StageMapping mapping);
StageMapping stage_mapping_of(ScheduleKind kind);

// The transformer: its family and sizes.  A gpt2 spec keeps kv = heads (validate() refuses
// anything else; the cost model prices any MLP width, the engine runs 4·hidden) and ties its head
// unless told otherwise (Megatron-LM's --untie-embeddings-and-output-weights);
// rope_theta applies to llama only, norm_eps to both.
struct ModelShape {
  std::int64_t layers = 2;  // transformer blocks
  std::int64_t hidden = 64;
  std::int64_t heads = 4;
  std::int64_t seq = 32;    // tokens per sequence
  // The trainer may take the vocabulary from its data; a spec always names one.
  std::int64_t vocab = 64;
  std::int64_t ffn_hidden = 0;  // MLP width; 0: 4·hidden (GPT-2)
  std::int64_t kv_heads = 0;    // key/value heads (grouped-query attention); 0: heads
  ModelFamily family = ModelFamily::gpt2;
  bool tied_head = true;      // the LM head is the token embedding's transpose
  double rope_theta = 10000;  // llama: the rotary base θ (inv_freq_i = θ^(-2i/d))
  double norm_eps = 1e-5;     // LayerNorm's / RMSNorm's ε

  std::int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  std::int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  bool operator==(const ModelShape&) const = default;
};

// The model part of validate(RunSpec): sizes, heads dividing hidden, kv dividing heads, ε and θ,
// and a gpt2 model's kv = heads; one line naming the value (mdtp plan checks the
// model with it before it searches the layouts).
void validate_model(const ModelShape& m);

// How the ranks are laid out and how the pipeline runs.  The world is tp·pp·dp (no context
// parallelism in a run yet); mode and tp together are the TP group (2.5d: tp = depth·q²).
struct ParallelLayout {
  TpMode mode = TpMode::d1;
  int tp = 1;
  int depth = 1;  // 2.5d's d; 1 for every other mode
  int pp = 1;
  int dp = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int micro_batches = 1;  // per step and replica
  int chunks = 1;         // virtual stages per stage (interleaved: v ≥ 2; zb-v, dualpipev: 2)
  int group_size = 0;     // interleaved micro-batch group size N; 0: pp
  // Transformer blocks per model position, in model order (position 0 first, whichever stage runs
  // it) summing to the model's layers (the first and the last may be smaller to make room for the
  // embedding and the head); empty: an even split.  pp·chunks entries (pp under DualPipe's
  // mirrored mapping, where each stage holds two of the pp positions): split_positions().
  std::vector<int> pp_layers;
  StageMapping stage_mapping = StageMapping::round_robin;  // stage_mapping_of(schedule)

  int world() const { return tp * pp * dp; }
  // The parts the model is cut into: pp·chunks, or pp under a mirrored mapping.
  int split_positions() const { return stage_mapping == StageMapping::mirrored ? pp : pp * chunks; }
  bool operator==(const ParallelLayout&) const = default;
};

// ZeRO over the dp group (docs/zero.md): stage 0 is the unsharded optimizer.
struct ZeroOptions {
  int stage = 0;            // 1: optimizer state sharded; 2: + gradients; 3: + parameters
  double bucket_mb = 25.0;  // cap of one flat bucket, MiB
  bool offload = false;     // stages 1–3: master weights, moments and the update in host memory
  bool keep_parameters = false;  // stage 3: gather each unit's parameters once per step, not per pass
  // Stages 2–3: reduce-scatter after every micro-batch (DeepSpeed's way), not once per step.
  bool reduce_per_micro_batch = false;
  bool operator==(const ZeroOptions&) const = default;
};

// The dtype parameters and activations are stored in, and the one gradients are kept and reduced
// in: the gradient buffers, the weight gradients' partial sums inside the modes and the
// data-parallel reduction (never fewer bytes than the parameters; 16-bit gradients only in the
// parameters' own format).  Under bf16/f16 the optimizer keeps f32 master weights and moments.
// Loss scaling for f16 training (bf16 has f32's exponent range and needs none): Megatron's
// DynamicGradScaler with its defaults — start at 2^32; after an overflow (a non-finite gradient
// norm) skip the step, and once `hysteresis` overflows have been counted since the scale last grew,
// halve it (not below `min`); after `window` clean steps in a row, double it and restore the
// hysteresis — or a fixed scale (`fixed` > 0; 1 runs unscaled).
struct LossScaling {
  double fixed = 0.0;              // > 0: this scale throughout (f16 only); 0: dynamic under f16, none otherwise
  double initial = 4294967296.0;   // 2^32
  double min = 1.0;
  std::int64_t window = 1000;      // clean steps before the scale doubles
  int hysteresis = 2;              // overflows counted before the scale halves
  bool operator==(const LossScaling&) const = default;
};

struct Precision {
  DType params = DType::f32;
  DType grad_reduce = DType::f32;
  LossScaling loss_scaling;
  bool operator==(const Precision&) const = default;
};
// Parameters in `params`, gradients kept and reduced in f32 under bf16 and f16 (Megatron's
// accumulate_allreduce_grads_in_fp32, its default under bf16; --grad-reduce-dtype chooses the
// 16-bit dtype instead), else in the parameters' dtype.
Precision precision_for(DType params);

// The optimizer and its hyper-parameters; the defaults are zero/optimizer.hpp's OptimizerSpec's.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // AdamW's decoupled decay, on parameters of 2+ dimensions
  double grad_clip = 0.0;     // global-norm clipping; 0: none
  bool operator==(const OptimizerSpec&) const = default;
};

struct RunSpec {
  ModelShape model;
  std::int64_t global_batch = 8;  // sequences per step, over all replicas and micro-batches
  ParallelLayout layout;
  ZeroOptions zero;
  Recompute recompute = Recompute::none;
  Precision precision;
  OptimizerSpec optimizer;
  double dropout = 0.0;  // mdtp's engine runs without dropout; the cost model counts its masks
  std::uint64_t seed = 1234;  // initial parameters and data order
  bool operator==(const RunSpec&) const = default;
  // b, the sequences of one micro-batch on one replica: global_batch / (dp · micro_batches).
  std::int64_t micro_batch_size() const {
    return global_batch / (std::int64_t{layout.dp} * layout.micro_batches);
  }
};

// Refuses (an mdtp::Error naming the member, its value and what was expected) a spec no engine
// could run: sizes that are not positive or do not divide, a schedule option its schedule lacks, a
// ZeRO option its stage lacks, a layer split that does not fit, … .  Rules that need a mesh (a
// square TP size for 2d, …) stay with the mesh, which names them.
void validate(const RunSpec& spec);

// One line for logs: "GPT l=2 h=64 a=4 s=32 V=64 B=8 | 1d tp=1 pp=1 dp=1 1f1b m=1 | zero=0
// recompute=none f32 | adamw lr=0.001 | seed=1234"; members at their GPT-2 defaults are left out.
std::string describe(const RunSpec& spec);

}  // namespace mdtp
