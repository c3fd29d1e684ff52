#include "model/activation_bytes.hpp"

#include <algorithm>
#include <utility>

#include "model/gpt.hpp"

namespace mdtp {

void set_block_family(ActivationShapes& a, const ModelShape& model, std::int64_t grad_dtype_bytes) {
  const bool llama = model.family == ModelFamily::llama;
  a.mlp_gate_factor = llama ? 2 : 1;  // SwiGLU's gate|up (model/swiglu.hpp), or GeLU
  a.position_rows = !llama;
  a.norm_scratch_bytes = llama ? a.residual_cols * grad_dtype_bytes : 0;
}

ActivationTensorBytes tensor_bytes(const ActivationShapes& a) {
  const std::int64_t d = a.dtype_bytes;
  ActivationTensorBytes t;
  t.E_r = a.residual_rows * a.residual_cols * d;
  t.stats = a.residual_rows * 2 * 8;
  t.E_qkv = a.qkv_rows * a.qkv_cols * d;
  t.E_y = a.qkv_rows * a.core_cols * d;
  t.E_f = a.mlp_rows * a.mlp_cols * d;
  t.E_h = a.mlp_rows * (a.mlp_cols / a.mlp_gate_factor) * d;
  t.norm_scratch = a.norm_scratch_bytes;
  t.probs = a.seq > 0 ? a.qkv_rows / a.seq * a.local_heads * a.seq * a.seq * d : 0;
  t.G = a.head_gathered_rows * a.residual_cols * d;
  t.logits = a.logits_rows * a.vocab_cols * d;
  t.dp = a.tokens * a.vocab_cols * d;
  t.lse = a.logits_rows * 8;
  return t;
}

std::int64_t block_context_bytes(const ActivationTensorBytes& t, bool probabilities) {
  return 2 * (t.E_r + t.stats) + t.E_r + t.E_qkv + (probabilities ? t.probs : 0) + t.E_y + t.E_r + t.E_f + t.E_h;
}

std::vector<UnitActivationBytes> unit_activation_bytes(const ActivationShapes& a, std::int64_t n_layer,
                                                       KeepPolicy policy) {
  const ActivationTensorBytes t = tensor_bytes(a);
  UnitActivationBytes block;
  block.after_forward =
      policy.block_input_only ? t.E_r : block_context_bytes(t, policy.attention_probabilities);
  const auto& l = a.linear_allocs;
  block.after_input = (t.E_r + l[0].dy_gather * t.E_qkv) + (t.E_y + l[1].dy_gather * t.E_r) +
                      (t.E_r + l[2].dy_gather * t.E_f) + (t.E_h + l[3].dy_gather * t.E_r);

  UnitActivationBytes embedding{0, t.E_r};
  UnitActivationBytes head{t.E_r + t.stats + t.G + t.logits + t.lse, t.G + t.dp};

  std::vector<UnitActivationBytes> units(static_cast<std::size_t>(n_layer + 2), block);
  units.front() = embedding;
  units.back() = head;
  return units;
}

namespace {

// Byte ranges of the tensors a context holds.
struct Ranges {
  std::vector<std::pair<const char*, const char*>> spans;
  void add(const Tensor& t) {
    if (!t.defined() || t.numel() == 0) return;
    const char* p = static_cast<const char*>(t.raw_data());
    spans.emplace_back(p, p + t.bytes());
  }
  void add(const LinearSaved& s) {
    for (const Tensor* t : {&s.x, &s.w, &s.dy, &s.dy_gathered}) add(*t);
  }
  void add(const LayerNormSaved& s) {
    add(s.xhat);
    add(s.mean_rstd);
  }
  // The size of the union of the spans.
  std::int64_t union_bytes() {
    std::sort(spans.begin(), spans.end());
    std::int64_t total = 0;
    const char* end = nullptr;
    for (const auto& [b, e] : spans) {
      const char* from = end && b < end ? end : b;
      if (e > from) total += e - from;
      end = end ? std::max(end, e) : e;
    }
    return total;
  }
};

}  // namespace

std::int64_t held_bytes(const ChunkSaved& saved) {
  Ranges r;
  r.add(saved.embedding.dx);
  for (const BlockSaved& b : saved.blocks) {
    r.add(b.ln_1);
    r.add(b.ln_2);
    r.add(b.attn.c_attn);
    r.add(b.attn.c_proj);
    r.add(b.attn.qkv);
    r.add(b.attn.probs);
    r.add(b.mlp.fc1);
    r.add(b.mlp.fc2);
    r.add(b.mlp.pre_activation);
  }
  for (const Tensor& t : saved.block_inputs) r.add(t);
  r.add(saved.ln_f);
  for (const Tensor* t : {&saved.head.gathered, &saved.head.logits, &saved.head.lse, &saved.head.dp}) r.add(*t);
  return r.union_bytes();
}

}  // namespace mdtp
