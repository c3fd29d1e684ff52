#include "bench/mode_mesh.hpp"

#include <sstream>

#include "core/error.hpp"

namespace mdtp::bench {
namespace {

// Largest q ≥ 2 with q^power · factor dividing world, or 0.
int largest_side(int world, int power, int factor) {
  int best = 0;
  for (int q = 2;; ++q) {
    long long size = factor;
    for (int p = 0; p < power; ++p) size *= q;
    if (size > world) break;
    if (world % size == 0) best = q;
  }
  return best;
}

MeshConfig make_config(int world, int tp, TpMode mode, int depth = 1) {
  MeshConfig c;
  c.world = world;
  c.tp = tp;
  c.tp_mode = mode;
  c.tp_depth = depth;
  return c;
}

int side_of(const MeshConfig& mesh) {  // q of a 2d / 2.5d / 3d grid
  const int per_slab = mesh.tp / mesh.tp_depth;
  if (mesh.tp_mode == TpMode::d3) {
    int q = 1;
    while ((q + 1) * (q + 1) * (q + 1) <= mesh.tp) ++q;
    return q;
  }
  int q = 1;
  while ((q + 1) * (q + 1) <= per_slab) ++q;
  return q;
}

}  // namespace

std::optional<MeshConfig> mesh_for_mode(TpMode mode, int world, int depth) {
  require(world >= 1, "a mesh needs at least one rank; got world=", world);
  require(depth >= 0, "the 2.5D depth must be positive (or 0 to choose); got depth=", depth);
  if (mode == TpMode::none) return make_config(world, 1, TpMode::none);
  if (is_megatron_1d(mode)) {
    if (world < 2) return std::nullopt;
    return make_config(world, world, mode);
  }
  if (mode == TpMode::d2) {
    const int q = largest_side(world, 2, 1);
    if (q == 0) return std::nullopt;
    return make_config(world, q * q, mode);
  }
  if (mode == TpMode::d3) {
    const int q = largest_side(world, 3, 1);
    if (q == 0) return std::nullopt;
    return make_config(world, q * q * q, mode);
  }
  // 2.5d
  if (depth > 0) {
    const int q = largest_side(world, 2, depth);
    if (q == 0) return std::nullopt;
    return make_config(world, depth * q * q, mode, depth);
  }
  int best_tp = 0, best_q = 0, best_d = 0;
  for (int d = 1; d <= world; ++d) {
    for (int q = 2; d * q * q <= world; ++q) {
      if (world % (d * q * q) != 0) continue;
      const int tp = d * q * q;
      const bool better = tp > best_tp || (tp == best_tp && (d >= 2) > (best_d >= 2)) ||
                          (tp == best_tp && (d >= 2) == (best_d >= 2) && q > best_q);
      if (better) best_tp = tp, best_q = q, best_d = d;
    }
  }
  if (best_tp == 0) return std::nullopt;
  return make_config(world, best_tp, mode, best_d);
}

std::vector<TpMode> modes_that_fit(int world, int depth) {
  std::vector<TpMode> out;
  for (TpMode m : {TpMode::d1, TpMode::d1_sp, TpMode::d2, TpMode::d2p5, TpMode::d3})
    if (mesh_for_mode(m, world, depth)) out.push_back(m);
  return out;
}

std::int64_t row_unit(TpMode mode, const MeshConfig& mesh) {
  if (mode == TpMode::d1_sp) return mesh.tp;
  if (mode == TpMode::d2) return side_of(mesh);
  if (mode == TpMode::d2p5) return static_cast<std::int64_t>(side_of(mesh)) * mesh.tp_depth;
  if (mode == TpMode::d3) return static_cast<std::int64_t>(side_of(mesh)) * side_of(mesh);
  return 1;
}

std::int64_t feature_unit(TpMode mode, const MeshConfig& mesh) {
  if (mode == TpMode::d2 || mode == TpMode::d2p5) return side_of(mesh);
  if (mode == TpMode::d3) return static_cast<std::int64_t>(side_of(mesh)) * side_of(mesh);
  if (mode == TpMode::none) return 1;
  return mesh.tp;
}

std::string describe_mesh(TpMode mode, const MeshConfig& mesh) {
  std::ostringstream os;
  os << mode << " tp=" << mesh.tp;
  if (mode == TpMode::d2 || mode == TpMode::d3) os << " (q=" << side_of(mesh) << ")";
  if (mode == TpMode::d2p5) os << " (q=" << side_of(mesh) << ", d=" << mesh.tp_depth << ")";
  const int dp = mesh.world / (mesh.tp * mesh.pp * mesh.cp);
  if (dp > 1) os << " dp=" << dp;
  return os.str();
}

}  // namespace mdtp::bench
