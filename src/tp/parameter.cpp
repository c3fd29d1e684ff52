#include "tp/parameter.hpp"

#include <cmath>
#include <numbers>

#include "mesh/mesh.hpp"

namespace mdtp {
namespace {

// SplitMix64: a counter-based generator, so any element can be drawn independently of the others.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t name_hash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

double unit_open(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

double init_value(std::uint64_t seed, const std::string& name, std::int64_t flat_index, const InitSpec& init) {
  if (init.kind == InitSpec::Kind::constant) return init.value;
  std::uint64_t base = mix(seed ^ mix(name_hash(name)) ^ mix(static_cast<std::uint64_t>(flat_index) * 2 + 1));
  double u1 = unit_open(mix(base)), u2 = unit_open(mix(base + 1));
  return init.std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);  // Box-Muller
}

void materialize(Parameter& p, const Mesh& mesh, const Backend& backend, DType dtype, std::uint64_t seed,
                 const InitSpec& init) {
  const bool vector = p.full_shape.size() == 1;
  const std::int64_t rows = vector ? 1 : p.full_shape[0], cols = p.full_shape.back();
  ShardBlock b = shard_block(p.layout, mesh, rows, cols, p.name);
  std::vector<double> values(static_cast<std::size_t>(b.rows * b.cols));
  for (std::int64_t i = 0; i < b.rows; ++i)
    for (std::int64_t j = 0; j < b.cols; ++j)
      values[static_cast<std::size_t>(i * b.cols + j)] = init_value(seed, p.name, (b.row0() + i) * cols + b.col0() + j, init);
  Shape shape = vector ? Shape{b.cols} : Shape{b.rows, b.cols};
  p.value = backend.from_f64(values, shape, dtype, MemCategory::parameters);
  p.grad = backend.zeros(shape, dtype, MemCategory::gradients);
}

void bind_to_storage(Parameter& p, Tensor value, Tensor grad, const Backend& backend) {
  require(value.numel() == p.value.numel() && grad.numel() == p.grad.numel(), p.name, ": storage of ",
          value.numel(), " and ", grad.numel(), " elements for a shard of ", p.value.numel());
  require(value.dtype() == p.value.dtype() && grad.dtype() == p.grad.dtype(), p.name, ": storage of dtype ",
          dtype_name(value.dtype()), "/", dtype_name(grad.dtype()), " for a parameter of ", dtype_name(p.value.dtype()));
  value = value.reshaped(p.value.shape());
  grad = grad.reshaped(p.grad.shape());
  backend.copy(p.value, value);
  backend.copy(p.grad, grad);
  p.value = value;
  p.grad = grad;
}

void reduce_gradients(const std::vector<Parameter*>& params, const Mesh& mesh,
                      const std::string& data_parallel_group) {
  for (Parameter* p : params) {
    for (const auto& group : p->partial_grad_over)
      if (mesh.comm(group).size() > 1) mesh.comm(group).all_reduce(p->grad);
    if (!data_parallel_group.empty() && mesh.comm(data_parallel_group).size() > 1)
      mesh.comm(data_parallel_group).all_reduce(p->grad);
  }
}

void zero_gradients(const std::vector<Parameter*>& params, const Backend& backend) {
  for (Parameter* p : params) backend.fill(p->grad, 0.0);
}

double global_grad_norm(const std::vector<Parameter*>& params, const Mesh& mesh, const Backend& backend,
                        const std::string& model_parallel_group) {
  double local = 0.0;
  for (const Parameter* p : params) {
    double copies = 1.0;
    for (const auto& group : p->replicated_over) copies *= mesh.comm(group).size();
    local += backend.sum_squares(p->grad) / copies;
  }
  Tensor total = backend.from_f64({local}, {1}, DType::f64, MemCategory::other);
  Communicator& comm = mesh.comm(model_parallel_group);
  if (comm.size() > 1) comm.all_reduce(total);
  return std::sqrt(backend.to_f64(total)[0]);
}

}  // namespace mdtp
