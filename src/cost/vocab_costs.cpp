// The vocabulary units of the model (model/embedding.hpp, model/lm_head.hpp, model_split.hpp): the
// vocabulary-parallel embedding on the first stage and the final norm + LM head + cross-entropy
// on the last, per micro-batch on one rank.  A tied head multiplies by the embedding's table, an
// untied one (Llama's lm_head.weight) by a table of its own of the same shape and split, so the
// calls and GEMMs are the same; only the parameters the head's stage holds differ.  With the
// residual's rows over the group spanning R, its columns over C and the vocabulary over S
// (docs/theory.md §2.6):
//
//   embedding  F  reduce-scatter over R of [rows, h/|C|]  (R empty: all-reduce over S of [rows, h])
//              W  all-gather dX over R (its whole backward is a weight pass)
//   head       F  all-gather X over R; G·wteᵀ [rows, V/|S|]; reduce-scatter over C by rows;
//                 cross-entropy: all-reduce MAX over S of [rows/|C|] f64, all-reduce SUM of
//                 [rows/|C|, 2] f64
//              B  all-gather dlogits over C; dG = dP·wte; reduce-scatter over R (all-reduce over S)
//              W  wte.grad += dPᵀ·G
//
// Streaming: the lookup reads one row of every table (the words; GPT-2's positions too) and writes
// [rows, h/|C|] ((tables + 1)·δ per element: 3δ for GPT-2, 2δ for Llama, whose positions are
// rotary), its backward scatter-adds into fp32 gradient rows (δ + 8); the cross-entropy reads the
// logits twice (max, then exp-sum) and keeps an fp32 softmax ((2δ + 4) per logit), its backward reads that and
// writes dlogits ((4 + δ) per logit): one fused kernel each way (the step model adds what
// Megatron's unfused fp32 operations move beyond that: step_config.hpp); the final norm is a block norm.
#include <string>

#include "cost/block_widths.hpp"
#include "cost/engine_kernels.hpp"
#include "cost/geometry.hpp"
#include "cost/kernel_time.hpp"
#include "cost/layer_costs.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

namespace {

struct VocabGroups {
  std::string rows, cols, vocab;  // spans of R, C, S; "" for none
};

VocabGroups vocab_groups(TpMode mode) {
  switch (mode) {
    case TpMode::none: return {"", "", ""};
    case TpMode::d1: return {"", "", group::tp};
    case TpMode::d1_sp: return {group::tp, "", group::tp};
    case TpMode::d2: return {"tp.col", "tp.row", "tp.col"};
    case TpMode::d2p5: return {"tp.col-dep", "tp.row", "tp.col-dep"};
    case TpMode::d3: return {"tp.input-weight", "tp.output", "tp.input-weight"};
  }
  return {};
}

}  // namespace

VocabCosts vocab_costs(const ModelShape& model, const Workload& ln_w, const Cluster& cluster, bool engine_kernels) {
  const TimeModel time_model = cluster_time_model(cluster);
  const Geometry ln(ln_w);
  const Topology& topology = ln.topology();
  const VocabGroups g = vocab_groups(ln_w.mode);
  auto size = [&](const std::string& group) { return group.empty() ? 1 : ln.group_size(group); };
  const std::int64_t C = size(g.cols), S = size(g.vocab);
  const std::int64_t rows = ln_w.rows, h = model.hidden, h_c = h / C;
  const std::int64_t vocab_local = (model.vocab + S - 1) / S, logit_rows = rows / C;
  const DType dt = ln_w.dtype;
  const double delta = static_cast<double>(dtype_size(dt));

  VocabCosts out;
  auto call = [&](std::vector<PlannedCall>& list, const char* phase, const std::string& group, CollectiveOp op,
                  std::int64_t elements, DType dtype) {
    if (!group.empty() && ln.group_size(group) > 1)
      list.push_back(PlannedCall{phase, group, op, ln.group_size(group), elements, dtype});
  };

  // Embedding.
  std::vector<PlannedCall> e_forward, e_weight;
  if (!g.rows.empty()) {
    call(e_forward, phase::forward, g.rows, CollectiveOp::reduce_scatter, rows * h_c, dt);
    call(e_weight, phase::backward, g.rows, CollectiveOp::all_gather, rows * h_c, dt);
  } else {
    call(e_forward, phase::forward, g.vocab, CollectiveOp::all_reduce, rows * h, dt);
  }
  add_calls(out.embedding.forward, e_forward, topology, time_model);
  add_calls(out.embedding.backward_weight, e_weight, topology, time_model);
  const double lookup = static_cast<double>(rows * h_c);
  const bool positions = has_position_table(model);
  out.embedding_kernels = engine_embedding_kernels(lookup, lookup / static_cast<double>(size(g.rows)), positions, dt);
  if (engine_kernels) {
    add_kernels(out.embedding, out.embedding_kernels, cluster);
  } else {
    out.embedding.forward.stream_bytes = (positions ? 3 : 2) * delta * lookup;
    out.embedding.backward_weight.stream_bytes = (delta + 8) * lookup;
    for (PassCost* p : {&out.embedding.forward, &out.embedding.backward_weight})
      p->stream_seconds = stream_seconds(p->stream_bytes, cluster);
  }

  // Final LayerNorm + head + cross-entropy.
  std::vector<PlannedCall> h_forward, h_backward;
  for (const auto& c : plan_step(ln_w))
    if (c.phase == phase::forward) h_forward.push_back(c);
    else if (c.phase == phase::backward) h_backward.push_back(c);
  call(h_forward, phase::forward, g.rows, CollectiveOp::all_gather, rows * h_c, dt);
  call(h_forward, phase::forward, g.cols, CollectiveOp::reduce_scatter, rows * vocab_local, dt);
  call(h_forward, phase::forward, g.vocab, CollectiveOp::all_reduce, logit_rows, DType::f64);
  call(h_forward, phase::forward, g.vocab, CollectiveOp::all_reduce, logit_rows * 2, DType::f64);
  call(h_backward, phase::backward, g.cols, CollectiveOp::all_gather, rows * vocab_local, dt);
  if (!g.rows.empty()) call(h_backward, phase::backward, g.rows, CollectiveOp::reduce_scatter, rows * h_c, dt);
  else call(h_backward, phase::backward, g.vocab, CollectiveOp::all_reduce, rows * h, dt);
  add_calls(out.head.forward, h_forward, topology, time_model);
  add_calls(out.head.backward_input, h_backward, topology, time_model);

  auto gemm = [&](PassCost& p, std::int64_t m, std::int64_t n, std::int64_t k) {
    p.gemm_flops += 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    p.gemm_seconds += gemm_kernel_seconds(m, n, k, dt, cluster);
  };
  gemm(out.head.forward, rows, vocab_local, h_c);         // P = G·wteᵀ
  gemm(out.head.backward_input, rows, h_c, vocab_local);  // dG = dP·wte
  gemm(out.head.backward_weight, vocab_local, h_c, rows); // wte.grad += dPᵀ·G
  const double logits = static_cast<double>(logit_rows * vocab_local);
  const double E_r = static_cast<double>(ln.layernorms()[0].x.numel());
  out.head_kernels = engine_head_kernels(ln, !block_widths(model).norm_shift, static_cast<double>(logit_rows), logits);
  if (engine_kernels) {
    add_kernels(out.head, out.head_kernels, cluster);
  } else {
    out.head.forward.stream_bytes = (2 * delta + 4) * logits + 2 * E_r * delta;
    out.head.backward_input.stream_bytes = (4 + delta) * logits + 3 * E_r * delta;
    for (PassCost* p : {&out.head.forward, &out.head.backward_input})
      p->stream_seconds = stream_seconds(p->stream_bytes, cluster);
  }

  out.wte_params = static_cast<double>(vocab_local * h_c);
  out.embedding_params = out.wte_params + (positions ? static_cast<double>(model.seq * h_c) : 0.0);
  double final_norm = 0.0;
  for (const ParamShard& p : ln.layernorms()[0].params) final_norm += static_cast<double>(p.elements);
  out.head_params = final_norm + (model.tied_head ? 0.0 : out.wte_params);
  out.head_logits = logits;
  out.head_activation_bytes = E_r * delta + static_cast<double>(rows * h_c) * delta + 4 * logits;
  return out;
}

}  // namespace mdtp::cost
