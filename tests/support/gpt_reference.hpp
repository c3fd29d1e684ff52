#pragma once
// An independent float64 GPT-2 loss for the model tests (its head tied to wte or lm_head.weight of
// its own, as the config says): plain loops over the full logical
// parameters in checkpoint (PyTorch) layout, written from nanoGPT's maths, not from the layers.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "tp/reference.hpp"

namespace mdtp::testing {

using ParamMap = std::map<std::string, std::vector<double>>;

// y = x·Wᵀ + b with W [out, in] (PyTorch layout).
inline Matrix linear_pt(const Matrix& x, const std::vector<double>& w, const std::vector<double>& b, std::int64_t out) {
  Matrix y(x.rows, out);
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[static_cast<std::size_t>(o)];
      for (std::int64_t k = 0; k < x.cols; ++k) s += x.at(i, k) * w[static_cast<std::size_t>(o * x.cols + k)];
      y.at(i, o) = s;
    }
  return y;
}

inline Matrix layernorm_ref(const Matrix& x, const std::vector<double>& g, const std::vector<double>& b) {
  return layernorm(x, g, b, Matrix(x.rows, x.cols)).y;
}

// Mean cross-entropy of the GPT-2 defined by `p` on [B, T] inputs/targets (row-major).
inline double gpt_reference_loss(const ModelShape& c, const ParamMap& p, const std::vector<std::int32_t>& inputs,
                                 const std::vector<std::int32_t>& targets) {
  const std::int64_t H = c.hidden, T = c.seq, N = static_cast<std::int64_t>(inputs.size());
  const std::int64_t nh = c.heads, hd = H / nh;
  auto P = [&](const std::string& k) -> const std::vector<double>& { return p.at(k); };
  Matrix x(N, H);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < H; ++j)
      x.at(i, j) = P("transformer.wte.weight")[static_cast<std::size_t>(inputs[static_cast<std::size_t>(i)] * H + j)] +
                   P("transformer.wpe.weight")[static_cast<std::size_t>((i % T) * H + j)];
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    Matrix a = layernorm_ref(x, P(h + "ln_1.weight"), P(h + "ln_1.bias"));
    Matrix qkv = linear_pt(a, P(h + "attn.c_attn.weight"), P(h + "attn.c_attn.bias"), 3 * H);
    Matrix y(N, H);
    for (std::int64_t s = 0; s < N / T; ++s)
      for (std::int64_t head = 0; head < nh; ++head)
        for (std::int64_t i = 0; i < T; ++i) {
          std::vector<double> w(static_cast<std::size_t>(i + 1));
          double mx = -1e300, sum = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double d = 0.0;
            for (std::int64_t e = 0; e < hd; ++e) d += qkv.at(s * T + i, head * hd + e) * qkv.at(s * T + j, H + head * hd + e);
            w[static_cast<std::size_t>(j)] = d / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, w[static_cast<std::size_t>(j)]);
          }
          for (auto& v : w) sum += v = std::exp(v - mx);
          for (std::int64_t j = 0; j <= i; ++j)
            for (std::int64_t e = 0; e < hd; ++e)
              y.at(s * T + i, head * hd + e) += w[static_cast<std::size_t>(j)] / sum * qkv.at(s * T + j, 2 * H + head * hd + e);
        }
    Matrix o = linear_pt(y, P(h + "attn.c_proj.weight"), P(h + "attn.c_proj.bias"), H);
    for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] += o.v[i];
    Matrix m = linear_pt(layernorm_ref(x, P(h + "ln_2.weight"), P(h + "ln_2.bias")), P(h + "mlp.c_fc.weight"),
                         P(h + "mlp.c_fc.bias"), 4 * H);
    for (auto& v : m.v) v = gelu(v);
    Matrix o2 = linear_pt(m, P(h + "mlp.c_proj.weight"), P(h + "mlp.c_proj.bias"), H);
    for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] += o2.v[i];
  }
  Matrix f = layernorm_ref(x, P("transformer.ln_f.weight"), P("transformer.ln_f.bias"));
  Matrix logits = linear_pt(f, c.tied_head ? P("transformer.wte.weight") : P("lm_head.weight"), {}, c.vocab);
  double loss = 0.0;
  for (std::int64_t i = 0; i < N; ++i) {
    double mx = -1e300, sum = 0.0;
    for (std::int64_t v = 0; v < c.vocab; ++v) mx = std::max(mx, logits.at(i, v));
    for (std::int64_t v = 0; v < c.vocab; ++v) sum += std::exp(logits.at(i, v) - mx);
    loss += mx + std::log(sum) - logits.at(i, targets[static_cast<std::size_t>(i)]);
  }
  return loss / static_cast<double>(N);
}

}  // namespace mdtp::testing
