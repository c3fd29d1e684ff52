#include "cost/model_flops.hpp"

#include "cost/block_widths.hpp"

namespace mdtp::cost {

namespace {

// The sizes of the header's formulas, as doubles.
struct Sizes {
  double l, h, s, V;
  double q, F, fc1;           // QKV width, MLP width, fc1's width
  double weights;             // W: the block's four weight matrices
  double biases;              // b
  double norm;                // one norm's parameters
  double position, untied;    // 1 where the model has the table, else 0
};

Sizes sizes(const ModelShape& m) {
  const BlockWidths w = block_widths(m);
  Sizes z;
  z.l = static_cast<double>(m.layers);
  z.h = static_cast<double>(m.hidden);
  z.s = static_cast<double>(m.seq);
  z.V = static_cast<double>(m.vocab);
  z.q = static_cast<double>(w.qkv_features > 0 ? w.qkv_features : 3 * m.hidden);
  z.F = static_cast<double>(m.ffn());
  z.fc1 = static_cast<double>(w.fc1_factor) * z.F;
  z.weights = z.h * z.q + z.h * z.h + z.h * z.fc1 + z.F * z.h;
  z.biases = w.linear_bias ? z.q + z.h + z.fc1 + z.h : 0.0;
  z.norm = w.norm_shift ? 2 * z.h : z.h;
  z.position = has_position_table(m) ? 1.0 : 0.0;
  z.untied = m.tied_head ? 0.0 : 1.0;
  return z;
}

}  // namespace

double parameter_count(const ModelShape& model) {
  const Sizes z = sizes(model);
  return z.l * (z.weights + z.biases + 2 * z.norm) + (1 + z.untied) * z.V * z.h + z.position * z.s * z.h + z.norm;
}

double model_flops(const ModelShape& model, std::int64_t global_batch) {
  const Sizes z = sizes(model);
  const double tokens = static_cast<double>(global_batch) * z.s;
  const double looked_up = z.position * z.s * z.h + z.untied * z.V * z.h;
  return tokens * (6 * (parameter_count(model) - looked_up) + 12 * z.l * z.h * z.s);
}

double hardware_flops(const ModelShape& model, std::int64_t global_batch, Recompute recompute) {
  const Sizes z = sizes(model);
  const double tokens = static_cast<double>(global_batch) * z.s;
  const double r = recompute == Recompute::full ? 1 : 0;
  const double r_attention = recompute == Recompute::none ? 0 : 1;
  return tokens * ((3 + r) * z.l * 2 * z.weights + (3 + r_attention) * z.l * 4 * z.h * z.s + 6 * z.V * z.h);
}

double narayanan_flops(const ModelShape& model, std::int64_t global_batch) {
  const double l = static_cast<double>(model.layers), h = static_cast<double>(model.hidden);
  const double s = static_cast<double>(model.seq), V = static_cast<double>(model.vocab);
  return 96.0 * static_cast<double>(global_batch) * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

}  // namespace mdtp::cost
