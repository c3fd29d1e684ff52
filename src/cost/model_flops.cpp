#include "cost/model_flops.hpp"

namespace mdtp::cost {

namespace {
struct Doubles {
  double l, h, a, s, V;
};
Doubles doubles(const ModelShape& m) {
  return {static_cast<double>(m.layers), static_cast<double>(m.hidden), static_cast<double>(m.heads),
          static_cast<double>(m.seq), static_cast<double>(m.vocab)};
}
}  // namespace

double parameter_count(const ModelShape& model) {
  const auto [l, h, a, s, V] = doubles(model);
  return l * (12 * h * h + 13 * h) + V * h + s * h + 2 * h;
}

double model_flops(const ModelShape& model, std::int64_t global_batch) {
  const auto [l, h, a, s, V] = doubles(model);
  const double tokens = static_cast<double>(global_batch) * s;
  const double n_used = parameter_count(model) - s * h;
  return tokens * (6 * n_used + 12 * l * h * s);
}

double hardware_flops(const ModelShape& model, std::int64_t global_batch, Recompute recompute) {
  const auto [l, h, a, s, V] = doubles(model);
  const double tokens = static_cast<double>(global_batch) * s;
  const double r = recompute == Recompute::full ? 1 : 0;
  const double r_attention = recompute == Recompute::none ? 0 : 1;
  return tokens * ((3 + r) * l * 24 * h * h + (3 + r_attention) * l * 4 * h * s + 6 * V * h);
}

double narayanan_flops(const ModelShape& model, std::int64_t global_batch) {
  const auto [l, h, a, s, V] = doubles(model);
  return 96.0 * static_cast<double>(global_batch) * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

}  // namespace mdtp::cost
