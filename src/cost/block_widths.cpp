#include "cost/block_widths.hpp"

#include <algorithm>

namespace mdtp::cost {

BlockWidths block_widths(const ModelShape& m, int head_split) {
  BlockWidths w;
  if (m.family == ModelFamily::gpt2) return w;
  // Llama: Q has `heads` heads of d = H/heads features, K and V `kv` heads each; the gate and up
  // projections are fused into one fc1 of 2F (tp/mlp.hpp); no biases; RMSNorm has γ only;
  // rotary positions rotate Q and K in place.
  w.qkv_features = (m.heads + 2 * std::max<std::int64_t>(m.kv(), head_split)) * (m.hidden / m.heads);
  w.fc1_factor = 2;
  w.linear_bias = false;
  w.norm_shift = false;
  w.rotary = true;
  return w;
}

bool has_position_table(const ModelShape& m) { return m.family == ModelFamily::gpt2; }

}  // namespace mdtp::cost
