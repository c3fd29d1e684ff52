#include "cost/layer_costs.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "cost/attention_core.hpp"
#include "cost/collective_sms.hpp"
#include "cost/compute_model.hpp"
#include "cost/engine_kernels.hpp"
#include "cost/geometry.hpp"
#include "cost/kernel_time.hpp"
#include "cost/summa_pipeline.hpp"
#include "mesh/topology.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

PassCost UnitCosts::recompute(Recompute r) const {
  switch (r) {
    case Recompute::none: return {};
    case Recompute::selective: return attention_core;
    case Recompute::full: return forward;
  }
  return {};
}

double ActivationBytes::kept(Recompute r) const {
  switch (r) {
    case Recompute::none: return core + rest;
    case Recompute::selective: return rest;
    case Recompute::full: return input;
  }
  return 0.0;
}

void add_kernels(UnitCosts& unit, const UnitKernels& kernels, const Cluster& cluster) {
  const auto add = [&](PassCost& pass, const std::vector<KernelCall>& list) {
    for (const KernelCall& call : list) {
      // The attention core is priced with its GEMMs (attention_core.hpp), not as a streaming kernel.
      if (call.kind == "attention_forward" || call.kind == "attention_backward") continue;
      pass.stream_bytes += call.bytes;
      pass.stream_seconds += stream_seconds(call.bytes, cluster);
    }
  };
  add(unit.forward, kernels.forward);
  add(unit.backward_input, kernels.backward_input);
  add(unit.backward_weight, kernels.backward_weight);
}

void add_calls(PassCost& pass, const std::vector<PlannedCall>& calls, const Topology& topology, const TimeModel& model) {
  for (const auto& call : calls) {
    const double seconds = predict_call(call, topology, model).seconds;
    pass.comm_seconds += seconds;
    if (userbuffers_hold_sms(call)) pass.comm_on_sms_seconds += seconds;
    pass.comm_bytes += static_cast<double>(call.elements) * static_cast<double>(dtype_size(call.dtype));
  }
}

namespace {

Workload unit_workload(const std::string& layer, const ModelShape& model, TpMode mode, int tp, int depth,
                       std::int64_t micro_batch, DType dtype, std::optional<DType> grad_dtype, int gpus_per_node) {
  Workload w;
  w.mode = mode;
  w.mesh.world = tp;
  w.mesh.tp = tp;
  w.mesh.tp_mode = mode;
  w.mesh.tp_depth = depth;
  w.mesh.ranks_per_node = gpus_per_node;
  w.layer = layer;
  w.rows = micro_batch * model.seq;
  w.hidden = model.hidden;
  w.ffn_hidden = model.ffn();
  const int head_split = head_split_ranks(mode, tp, depth);
  w.block = block_widths(model, head_split);
  w.mesh.kv_copies = kv_copies_for(model.kv(), head_split);
  w.dtype = dtype;
  w.grad_dtype = grad_dtype;
  return w;
}

// The GEMMs of a Linear layer list, timed one by one and sorted into F, B, W.
void add_gemms(UnitCosts& unit, const std::vector<PlannedGemm>& gemms, DType dtype, const Cluster& cluster) {
  for (const auto& g : gemms) {
    PassCost& pass = g.what == "Y=XW" ? unit.forward : g.what == "dW=XtdY" ? unit.backward_weight : unit.backward_input;
    pass.gemm_flops += g.flops();
    pass.gemm_seconds += g.count * gemm_kernel_seconds(g.m, g.n, g.k, dtype, cluster);
  }
}

// The collectives of plan_step sorted into F, B and W (the weight pass's: SUMMA's dW product and
// 3D's dW reduce-scatter, where the engine issues them; 1d-sp's re-gather of X stays in B, where
// Megatron starts it, under the dX GEMM) and the once-per-step gradient sums.
void add_plan(UnitCosts& unit, std::vector<PlannedCall>& grad_sync, const Workload& w, const Topology& topology,
              const TimeModel& model) {
  std::vector<PlannedCall> forward, backward, weight;
  for (const auto& call : plan_step(w)) {
    if (call.phase == phase::forward) forward.push_back(call);
    else if (call.phase == phase::backward) (call.weight_pass ? weight : backward).push_back(call);
    else grad_sync.push_back(call);
  }
  add_calls(unit.forward, forward, topology, model);
  add_calls(unit.backward_input, backward, topology, model);
  add_calls(unit.backward_weight, weight, topology, model);
}

double sum_params(const Geometry& g) {
  double n = 0.0;
  for (const auto& p : g.params()) n += static_cast<double>(p.elements);
  return n;
}

// The ZeRO bucket plan's fold (plan/bucket_plan.hpp, fold_replica_group): parameters partial
// over tp.dep get the combined dp × depth shard group.
double sum_depth_replica_params(const Geometry& g) {
  double n = 0.0;
  for (const auto& p : g.params())
    if (std::find(p.partial_grad_over.begin(), p.partial_grad_over.end(), "tp.dep") != p.partial_grad_over.end())
      n += static_cast<double>(p.elements);
  return n;
}

}  // namespace

LayerCosts layer_costs(const ModelShape& model, TpMode mode, int tp, int depth, std::int64_t micro_batch, DType dtype,
                       const Cluster& cluster, const KernelOptions& options) {
  const bool dropout = options.dropout, streaming_attention = options.streaming_attention,
             engine_kernels = options.engine_kernels;
  const std::optional<DType> grad_dtype = options.grad_dtype;
  const TimeModel time_model = cluster_time_model(cluster);
  auto workload = [&](const char* layer) {
    return unit_workload(layer, model, mode, tp, depth, micro_batch, dtype, grad_dtype, cluster.gpus_per_node);
  };
  const Workload attention_w = workload("attention"), mlp_w = workload("mlp"), ln_w = workload("layernorm");
  const Geometry attention(attention_w), mlp(mlp_w), ln(ln_w);
  const Topology& topology = ln.topology();

  LayerCosts out;
  UnitCosts& block = out.block;
  add_gemms(block, plan_gemms(attention_w), dtype, cluster);
  add_gemms(block, plan_gemms(mlp_w), dtype, cluster);
  add_plan(block, out.block_grad_sync, attention_w, topology, time_model);
  add_plan(block, out.block_grad_sync, mlp_w, topology, time_model);
  for (int i = 0; i < 2; ++i) add_plan(block, out.block_grad_sync, ln_w, topology, time_model);
  // What SUMMA's own GEMMs hide of the collectives just listed (2D, 2.5D; summa_pipeline.hpp).
  for (const Geometry* g : {&attention, &mlp}) {
    const SummaHidden hidden = summa_hidden_seconds(*g, time_model, cluster);
    block.forward.comm_seconds -= hidden.forward;
    block.backward_input.comm_seconds -= hidden.backward_input;
    block.backward_weight.comm_seconds -= hidden.backward_weight;
  }
  // Copies of a key/value head (model/attention.hpp): the attention weight's copied K/V columns,
  // rows × 2·d, all-reduced over tp.kv once per step.
  if (const std::int64_t elements = copied_kv_elements(attention, model.hidden / model.heads); elements > 0)
    out.block_grad_sync.push_back(PlannedCall{phase::grad_sync, group::tp_kv, CollectiveOp::all_reduce,
                                              attention_w.mesh.kv_copies, elements, attention_w.gradient_dtype()});
  PassCost sync;
  add_calls(sync, out.block_grad_sync, topology, time_model);
  out.block_grad_sync_seconds = sync.comm_seconds;

  // The attention core runs per local head on whole local sequences (model/attention.hpp): c_attn's
  // output columns split over g ranks, each holding heads/g query heads and kv/g key/value heads.
  const LinearShape& c_attn = attention.linears()[0];
  const LinearShape& c_proj = attention.linears()[1];
  const std::int64_t s = model.seq, d_head = model.hidden / model.heads, kv = model.kv();
  require(c_attn.y.cols > 0 && c_attn.out_features % c_attn.y.cols == 0, "c_attn's output shard of ", c_attn.y.cols,
          " columns does not split its ", c_attn.out_features, " columns evenly");
  const std::int64_t qkv_split = c_attn.out_features / c_attn.y.cols;
  require(model.heads % qkv_split == 0 && (kv % qkv_split == 0 || qkv_split % kv == 0), "heads=", model.heads,
          " must be divisible by the QKV column split ", qkv_split, " of mode ", mode, " on tp=", tp,
          " (every rank holds whole heads), and kv_heads=", kv, " must divide or be divisible by it");
  require(c_attn.y.rows % s == 0, "a rank holds ", c_attn.y.rows, " rows of attention's input under mode ", mode,
          " on tp=", tp, "; they must be whole sequences of seq=", s, " (raise the micro-batch ", micro_batch, ")");
  const std::int64_t heads_local = model.heads / qkv_split, seqs_local = c_attn.y.rows / s;
  const std::int64_t products = heads_local * seqs_local;

  // Streaming traffic (header comment), in bytes.
  const double delta = static_cast<double>(dtype_size(dtype)), mu = dropout ? 1.0 : 0.0;
  const double E_r = static_cast<double>(ln.layernorms()[0].x.numel());
  const double E_c = static_cast<double>(c_proj.x.numel());
  const LinearShape& fc1 = mlp.linears()[0];
  const LinearShape& fc2 = mlp.linears()[1];
  const double E_f = static_cast<double>(fc1.y.numel());  // the activation's input (GeLU: F; SwiGLU: gate|up 2F)
  const double E_h = static_cast<double>(fc2.x.numel());  // its output, fc2's input (F)
  const double E_A = static_cast<double>(products) * static_cast<double>(s) * static_cast<double>(s);
  // Rotary embeddings rotate this rank's Q and K in place: read and write both, forward and on
  // their gradients backward.
  const double E_qk = block_widths(model).rotary
                          ? static_cast<double>(seqs_local * s * (heads_local + kv / qkv_split) * d_head)
                          : 0.0;
  const double forward_bytes = 2 * 2 * E_r * delta + 2 * (3 * delta + mu) * E_r + 2 * E_c * delta +
                               (E_f + E_h) * delta + 2 * E_qk * delta;
  const double backward_bytes = 2 * 3 * E_r * delta + 2 * (3 * delta + mu) * E_r + 2 * E_c * delta +
                                (2 * E_f + E_h) * delta + 2 * E_qk * delta;
  // Kernels launched per pass outside the attention core, each paying the GPU's per-kernel
  // overhead: two LayerNorms, two bias+dropout+add, the context transpose, bias+activation and the
  // rotary rotation (Megatron's fused kernels; the backward runs one per forward kernel).
  const int pass_kernels = 6 + (E_qk > 0 ? 1 : 0);

  // The attention core, forward and backward (attention_core.hpp).
  const AttentionCoreCosts core =
      attention_core_costs({s, d_head, heads_local, std::max<std::int64_t>(1, kv / qkv_split), seqs_local}, dtype,
                           dropout, streaming_attention, cluster);
  const PassCost& core_forward = core.forward;
  const PassCost& core_backward = core.backward;
  block.attention_core = core_forward;
  block.forward += core_forward;
  block.backward_input += core_backward;
  out.block_kernels = engine_block_kernels(attention, mlp, ln, block_widths(model).fc1_factor == 2,
                                           !block_widths(model).norm_shift, E_qk, core);
  if (engine_kernels) {
    add_kernels(block, out.block_kernels, cluster);  // the attention core already counted above
  } else {
    block.forward.stream_bytes += forward_bytes;
    block.forward.stream_seconds += stream_seconds(forward_bytes, cluster, pass_kernels);
    block.backward_input.stream_bytes += backward_bytes;
    block.backward_input.stream_seconds += stream_seconds(backward_bytes, cluster, pass_kernels);
  }

  // Kept activations (Korthikanti et al. 2022, itemised; header comment).
  ActivationBytes& a = out.block_activations;
  a.rest = delta * (2 * E_r + static_cast<double>(c_attn.x.numel() + c_attn.y.numel() + c_proj.x.numel() +
                                                  fc1.x.numel() + fc1.y.numel() + fc2.x.numel())) +
           2 * mu * E_r;
  a.core = E_A * delta + (dropout ? E_A * (mu + delta) : 0.0);
  a.input = E_r * delta;

  out.block_params = sum_params(attention) + sum_params(mlp) + 2 * sum_params(ln);
  out.block_param_tensors =
      static_cast<int>(attention.params().size() + mlp.params().size() + 2 * ln.params().size());
  out.block_depth_replica_params =
      sum_depth_replica_params(attention) + sum_depth_replica_params(mlp) + 2 * sum_depth_replica_params(ln);
  out.boundary_elements = E_r;
  out.tp_link = topology.link_class(group::tp);

  const VocabCosts v = vocab_costs(model, ln_w, cluster, engine_kernels);
  out.embedding_kernels = v.embedding_kernels;
  out.head_kernels = v.head_kernels;
  out.embedding = v.embedding;
  out.head = v.head;
  out.embedding_params = v.embedding_params;
  out.head_params = v.head_params;
  out.wte_params = v.wte_params;
  out.head_activation_bytes = v.head_activation_bytes;
  out.head_logits = v.head_logits;
  return out;
}

LayerCosts layer_costs(const StepConfig& c, const Cluster& cluster) {
  return layer_costs(c.spec.model, c.spec.layout.mode, c.spec.layout.tp, c.spec.layout.depth, c.micro_batch(),
                     c.dtype(), cluster,
                     {.dropout = c.dropout(),
                      .streaming_attention = !c.attention_keeps_probabilities,
                      .engine_kernels = c.engine_kernels,
                      .grad_dtype = c.grad_dtype()});
}

}  // namespace mdtp::cost
