#include "cost/memory_model.hpp"

#include <cmath>

#include "cost/geometry.hpp"
#include "core/error.hpp"

namespace mdtp::cost {

namespace {

std::vector<MemoryItem> linear_kept(const Geometry& g, const LinearShape& s, std::int64_t element) {
  if (s.kind == LinearKind::cube_3d && g.keep_gathered_3d() && g.q() > 1) {
    const std::int64_t q = g.q();
    return {{s.name + ": X(j,k) gathered", (s.full_rows / q) * (s.in_features / q) * element},
            {s.name + ": W(k,i) gathered", (s.in_features / q) * (s.out_features / q) * element}};
  }
  // With q = 1 the "gathered" X is the shard itself and W's is the parameter: only X is extra.
  return {{s.name + ": X", s.x.numel() * element}};
}

}  // namespace

MemoryEstimate estimate_memory(const Workload& workload, double optimizer_bytes_per_param) {
  require(optimizer_bytes_per_param >= 0.0 && std::isfinite(optimizer_bytes_per_param),
          "optimizer bytes per parameter must be a finite number >= 0; got ", optimizer_bytes_per_param);
  Geometry g(workload);
  const auto element = static_cast<std::int64_t>(dtype_size(workload.dtype));
  MemoryEstimate m;
  for (const auto& p : g.params()) m.parameter_elements += p.elements;
  m.parameter_bytes = m.parameter_elements * element;
  m.gradient_bytes = m.parameter_bytes;
  m.optimizer_bytes = std::llround(static_cast<double>(m.parameter_elements) * optimizer_bytes_per_param);

  const auto& linears = g.linears();
  for (std::size_t i = 0; i < linears.size(); ++i) {
    auto items = linear_kept(g, linears[i], element);
    m.kept.insert(m.kept.end(), items.begin(), items.end());
    if (workload.layer == "mlp" && i == 0)  // Mlp keeps fc1's output for the activation's backward
      m.kept.push_back({"mlp: activation input", linears[0].y.numel() * element});
  }
  if (!linears.empty()) m.output_bytes = linears.back().y.numel() * element;
  for (const auto& n : g.layernorms()) {
    m.kept.push_back({"ln: x̂", n.x.numel() * element});
    m.kept.push_back({"ln: mean,rstd (f64)", n.x.rows * 2 * static_cast<std::int64_t>(dtype_size(DType::f64))});
    m.output_bytes = n.x.numel() * element;
  }
  for (const auto& item : m.kept) m.activation_bytes += item.bytes;
  return m;
}

}  // namespace mdtp::cost
