#include "train/nonfinite_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/memory.hpp"
#include "run/rank_stats.hpp"
#include "zero/nonfinite.hpp"

namespace mdtp {

std::string locate_nonfinite_gradient(ZeroEngine& engine, const Mesh& mesh, const Backend& backend, MPI_Comm world,
                                      bool reduced) {
  const auto& params = engine.parameters();
  std::optional<NonFiniteHit> hit;
  const bool enabled = mesh.ledger().enabled();
  mesh.ledger().set_enabled(false);  // a diagnosis, not training traffic
  for (std::size_t i = 0; i < params.size(); ++i) {
    // tp_shard is collective over dp: every rank asks for every parameter, found or not.
    Tensor grad = reduced ? engine.tp_shard(i, ZeroTensor::grad) : params[i].param->grad;
    if (hit || !grad.defined()) continue;
    if (grad.device() != DeviceKind::host || (grad.dtype() != DType::f32 && grad.dtype() != DType::f64)) {
      const std::vector<double> values = backend.to_f64(grad);  // to the host, as f64
      Tensor host = Tensor::empty(grad.shape(), DType::f64, std::make_shared<HostAllocator>(), MemCategory::other);
      std::copy(values.begin(), values.end(), host.data<double>());
      grad = host;
    }
    hit = first_nonfinite({{params[i].name(), grad}});
  }
  mesh.ledger().set_enabled(enabled);

  const int rank = mesh.rank();
  const double mine = hit ? -static_cast<double>(rank) : -std::numeric_limits<double>::infinity();
  const double best = run::mean_max_over_ranks(mine, world, mesh.wait_policy()).max;
  if (best == -std::numeric_limits<double>::infinity()) return "no gradient element is non-finite";
  const int winner = static_cast<int>(-best);
  const std::string text = hit ? fmt::format("'{}' element {} = {} (world rank {})", hit->tensor, hit->element,
                                             nonfinite_name(hit->value), rank)
                               : std::string();
  return run::broadcast_string(text, winner, world, mesh.wait_policy());
}

}  // namespace mdtp
