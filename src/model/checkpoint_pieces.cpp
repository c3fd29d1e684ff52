#include "model/checkpoint_pieces.hpp"

#include "core/error.hpp"

namespace mdtp {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<CheckpointPiece> checkpoint_pieces(const std::string& name, const Shape& full, const ModelShape& config) {
  const std::int64_t rows = full.size() == 1 ? 1 : full[0];
  if (full.size() == 1) return {{name, 0, 1, full}};
  auto piece = [&](std::string piece_name, std::int64_t first, std::int64_t count) {
    return CheckpointPiece{std::move(piece_name), first, count, Shape{count, full[1]}};
  };
  if (config.family == ModelFamily::llama) {
    const std::int64_t d = config.hidden / config.heads, q = config.heads * d, kv = config.kv() * d, F = config.ffn();
    const std::string qkv = "self_attn.qkv_proj.weight", gate_up = "mlp.gate_up_proj.weight";
    if (ends_with(name, qkv)) {
      const std::string base = name.substr(0, name.size() - qkv.size()) + "self_attn.";
      require(rows == q + 2 * kv, name, ": ", rows, " rows; expected (heads + 2·kv_heads)·head_dim = ", q + 2 * kv);
      return {piece(base + "q_proj.weight", 0, q), piece(base + "k_proj.weight", q, kv),
              piece(base + "v_proj.weight", q + kv, kv)};
    }
    if (ends_with(name, gate_up)) {
      const std::string base = name.substr(0, name.size() - gate_up.size()) + "mlp.";
      require(rows == 2 * F, name, ": ", rows, " rows; expected 2·intermediate_size = ", 2 * F);
      return {piece(base + "gate_proj.weight", 0, F), piece(base + "up_proj.weight", F, F)};
    }
  }
  return {piece(name, 0, rows)};
}

}  // namespace mdtp
