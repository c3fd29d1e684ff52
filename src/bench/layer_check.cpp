#include "bench/layer_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "comm/bookkeeping_collectives.hpp"
#include "modes/registry.hpp"
#include "run/rank_stats.hpp"
#include "bench/step_inputs.hpp"
#include "spec/names.hpp"
#include "tp/parameter.hpp"

namespace mdtp::bench {
namespace {

double relative_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  if (std::isnan(diff)) return INFINITY;
  return scale > 0.0 ? diff / scale : diff;
}

// The full [rows, cols] tensor from this rank's shard of its replica's rows: gathered over the TP
// group, then the replicas' row blocks concatenated over "dp" (in replica order = row order).
std::vector<double> gather_activation(const Tensor& shard, const Layout& layout, const Mesh& mesh,
                                      const Backend& backend, std::int64_t rows, std::int64_t cols) {
  const ReplicaRows replica = replica_rows(mesh, rows);
  Tensor mine = gather_full(shard, layout, mesh, backend, replica.rows, cols);
  Communicator& dp = mesh.comm(group::dp);
  if (dp.size() == 1) return backend.to_f64(mine);
  Tensor all = backend.empty({replica.global, cols}, shard.dtype(), MemCategory::communication);
  dp.all_gather(mine, all);
  return backend.to_f64(all);
}

std::vector<double> gather_parameter_grad(const Parameter& p, const Mesh& mesh, const Backend& backend) {
  const bool vector = p.full_shape.size() == 1;
  Tensor full = gather_full(p.grad, p.layout, mesh, backend, vector ? 1 : p.full_shape[0], p.full_shape.back());
  return backend.to_f64(full);
}

// The serial step on this rank alone, over the global batch of all `replicas`: its own one-rank
// mesh over MPI_COMM_SELF, mode "none".
std::map<std::string, std::vector<double>> serial_reference(cost::Workload w, int replicas, std::uint64_t seed,
                                                            std::uint64_t input_seed) {
  w.rows *= replicas;
  MeshConfig config;  // world = tp = 1
  CommLedger ledger;
  Mesh mesh(config, MPI_COMM_SELF, ledger);
  auto backend = make_host_backend();
  auto mode = make_tp_mode(TpMode::none, TpContext{mesh, *backend, w.dtype, seed, w.options});
  auto layer = make_layer_under_test(*mode, w);
  Tensor x = make_full_input(kInputName, input_seed, *backend, w.dtype, w.rows, layer->in_features());
  Tensor dy = make_full_input(kOutputGradName, input_seed, *backend, w.dtype, w.rows, layer->out_features());
  std::map<std::string, std::vector<double>> out;
  out["Y"] = backend->to_f64(layer->forward(x));
  out["dX"] = backend->to_f64(layer->backward(dy));
  reduce_gradients(layer->parameters(), mesh, *backend);
  for (Parameter* p : layer->parameters()) out[p->name + ".grad"] = backend->to_f64(p->grad);
  return out;
}

}  // namespace

double CheckResult::worst() const {
  double w = 0.0;
  for (const auto& e : errors) w = std::max(w, e.relative_error);
  return w;
}

double check_tolerance(DType dtype) { return dtype == DType::f64 ? 1e-10 : 1e-4; }

CheckResult check_against_serial(LayerUnderTest& layer, const Tensor& y, const Tensor& dx, const Mesh& mesh,
                                 const Backend& backend, const cost::Workload& workload, std::uint64_t seed,
                                 std::uint64_t input_seed, MPI_Comm world) {
  std::map<std::string, std::vector<double>> got;
  got["Y"] = gather_activation(y, layer.output_layout(), mesh, backend, workload.rows, layer.out_features());
  got["dX"] = gather_activation(dx, layer.input_layout(), mesh, backend, workload.rows, layer.in_features());
  for (Parameter* p : layer.parameters()) got[p->name + ".grad"] = gather_parameter_grad(*p, mesh, backend);

  CheckResult result;
  result.ran = true;
  result.tolerance = check_tolerance(workload.dtype);
  // Rank 0 computes the reference while the others wait in the broadcast below (politely).
  std::vector<double> errors(got.size(), 0.0);
  if (mesh.rank() == 0) {
    // A failure here must not leave the other ranks waiting: it becomes a failed check.
    std::map<std::string, std::vector<double>> ref;
    try {
      ref = serial_reference(workload, mesh.topology().dp(), seed, input_seed);
    } catch (const Error& e) {
      std::fprintf(stderr, "mdtp: the serial reference failed: %s\n", e.what());
    }
    std::size_t k = 0;
    for (const auto& [name, values] : got) {
      auto it = ref.find(name);
      errors[k++] = it == ref.end() ? INFINITY : relative_error(values, it->second);
    }
  }
  bookkeeping_broadcast(errors.data(), static_cast<int>(errors.size()), MPI_DOUBLE, 0, world, mesh.wait_policy(),
                        WaitLabel{group::world, "broadcast (layer check)", static_cast<std::int64_t>(errors.size()),
                                  nullptr});
  std::size_t k = 0;
  for (const auto& entry : got) {
    result.errors.push_back({entry.first, errors[k]});
    result.passed = result.passed && errors[k] <= result.tolerance;
    ++k;
  }
  return result;
}

}  // namespace mdtp::bench
