#pragma once
// An independent float64 Llama decoder (Hugging Face's modeling_llama: RMSNorm, rotate-half RoPE,
// grouped-query attention, SwiGLU MLP, no biases) for the model tests: plain loops over the full
// logical parameters in checkpoint (PyTorch) layout, written from the maths, not from the layers.
// tests/model/llama_numpy_port.py is the second reference, a numpy port of transformers' own code
// checked against transformers itself; the two agree to rounding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/gpt_reference.hpp"

namespace mdtp::testing {

struct LlamaShape {
  std::int64_t layers, hidden, heads, kv_heads, ffn, seq, vocab;
  double rope_theta;
  double norm_eps;
  bool tied_head;  // lm_head is model.embed_tokens.weight (no lm_head.weight in the map)
};

// y = w · x / sqrt(mean(x²) + eps) per row; no mean subtracted and no bias, unlike LayerNorm.
inline Matrix rmsnorm_ref(const Matrix& x, const std::vector<double>& w, double eps) {
  Matrix y(x.rows, x.cols);
  for (std::int64_t i = 0; i < x.rows; ++i) {
    double ms = 0.0;
    for (std::int64_t j = 0; j < x.cols; ++j) ms += x.at(i, j) * x.at(i, j);
    const double r = 1.0 / std::sqrt(ms / static_cast<double>(x.cols) + eps);
    for (std::int64_t j = 0; j < x.cols; ++j) y.at(i, j) = w[static_cast<std::size_t>(j)] * (x.at(i, j) * r);
  }
  return y;
}

// Rotates every d-wide head of x [N, n·d] in place by its row's position (row % T) in the
// rotate-half form: the pairs are (e, e + d/2), not adjacent lanes as in the original RoPE paper,
// which is what Hugging Face checkpoints' q_proj/k_proj rows are ordered for.
inline void rope_ref(Matrix& x, std::int64_t d, std::int64_t T, double theta) {
  const std::int64_t half = d / 2;
  for (std::int64_t i = 0; i < x.rows; ++i) {
    const double pos = static_cast<double>(i % T);
    for (std::int64_t h = 0; h < x.cols / d; ++h)
      for (std::int64_t e = 0; e < half; ++e) {
        const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(e) / static_cast<double>(d));
        const double c = std::cos(pos * inv_freq), s = std::sin(pos * inv_freq);
        const double x1 = x.at(i, h * d + e), x2 = x.at(i, h * d + half + e);
        x.at(i, h * d + e) = x1 * c - x2 * s;         // x1·cos + (−x2)·sin: rotate_half puts −x2 first
        x.at(i, h * d + half + e) = x2 * c + x1 * s;  // x2·cos + x1·sin
      }
  }
}

// Logits [N, vocab] (row-major) of the Llama defined by `p` on [B, T] inputs, T = c.seq.
inline std::vector<double> llama_reference_logits(const LlamaShape& c, const ParamMap& p,
                                                  const std::vector<std::int32_t>& inputs) {
  const std::int64_t H = c.hidden, T = c.seq, N = static_cast<std::int64_t>(inputs.size());
  const std::int64_t nh = c.heads, nkv = c.kv_heads, d = H / nh, group = nh / nkv;
  auto P = [&](const std::string& k) -> const std::vector<double>& { return p.at(k); };
  const std::vector<double>& embed = P("model.embed_tokens.weight");
  Matrix x(N, H);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < H; ++j)
      x.at(i, j) = embed[static_cast<std::size_t>(inputs[static_cast<std::size_t>(i)] * H + j)];
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    Matrix a = rmsnorm_ref(x, P(L + "input_layernorm.weight"), c.norm_eps);
    Matrix q = linear_pt(a, P(L + "self_attn.q_proj.weight"), {}, nh * d);
    Matrix k = linear_pt(a, P(L + "self_attn.k_proj.weight"), {}, nkv * d);
    Matrix v = linear_pt(a, P(L + "self_attn.v_proj.weight"), {}, nkv * d);
    rope_ref(q, d, T, c.rope_theta);
    rope_ref(k, d, T, c.rope_theta);  // V is not rotated
    Matrix y(N, nh * d);
    for (std::int64_t s = 0; s < N / T; ++s)
      for (std::int64_t head = 0; head < nh; ++head) {
        const std::int64_t kvh = head / group;  // consecutive query heads share a K/V head
        for (std::int64_t i = 0; i < T; ++i) {
          std::vector<double> w(static_cast<std::size_t>(i + 1));
          double mx = -1e300, sum = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double dot = 0.0;
            for (std::int64_t e = 0; e < d; ++e) dot += q.at(s * T + i, head * d + e) * k.at(s * T + j, kvh * d + e);
            w[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(d));
            mx = std::max(mx, w[static_cast<std::size_t>(j)]);
          }
          for (auto& u : w) sum += u = std::exp(u - mx);
          for (std::int64_t j = 0; j <= i; ++j)
            for (std::int64_t e = 0; e < d; ++e)
              y.at(s * T + i, head * d + e) += w[static_cast<std::size_t>(j)] / sum * v.at(s * T + j, kvh * d + e);
        }
      }
    Matrix o = linear_pt(y, P(L + "self_attn.o_proj.weight"), {}, H);
    for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] += o.v[i];
    Matrix h = rmsnorm_ref(x, P(L + "post_attention_layernorm.weight"), c.norm_eps);
    Matrix g = linear_pt(h, P(L + "mlp.gate_proj.weight"), {}, c.ffn);
    const Matrix u = linear_pt(h, P(L + "mlp.up_proj.weight"), {}, c.ffn);
    for (std::size_t i = 0; i < g.v.size(); ++i) g.v[i] = g.v[i] / (1.0 + std::exp(-g.v[i])) * u.v[i];  // silu(gate)·up
    Matrix o2 = linear_pt(g, P(L + "mlp.down_proj.weight"), {}, H);
    for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] += o2.v[i];
  }
  Matrix f = rmsnorm_ref(x, P("model.norm.weight"), c.norm_eps);
  return linear_pt(f, c.tied_head ? embed : P("lm_head.weight"), {}, c.vocab).v;
}

// Mean cross-entropy over all N = inputs.size() tokens ([B, T] row-major, whole sequences).
inline double llama_reference_loss(const LlamaShape& c, const ParamMap& p, const std::vector<std::int32_t>& inputs,
                                   const std::vector<std::int32_t>& targets) {
  const std::int64_t N = static_cast<std::int64_t>(inputs.size()), V = c.vocab;
  const std::vector<double> logits = llama_reference_logits(c, p, inputs);
  auto at = [&](std::int64_t i, std::int64_t v) { return logits[static_cast<std::size_t>(i * V + v)]; };
  double loss = 0.0;
  for (std::int64_t i = 0; i < N; ++i) {
    double mx = -1e300, sum = 0.0;
    for (std::int64_t v = 0; v < V; ++v) mx = std::max(mx, at(i, v));
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(at(i, v) - mx);
    loss += mx + std::log(sum) - at(i, targets[static_cast<std::size_t>(i)]);
  }
  return loss / static_cast<double>(N);
}

}  // namespace mdtp::testing
