#include "tp/parameter.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>

#include "core/vector_math.hpp"
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

// The per-element state from which both uniforms are drawn.
std::uint64_t element_base(std::uint64_t key, std::int64_t flat_index) {
  return mix(key ^ mix(static_cast<std::uint64_t>(flat_index) * 2 + 1));
}

// Elements per vectorised block (a few KiB of scratch on the stack).
constexpr std::int64_t kDrawBlock = 256;

// mix() and unit_open() on several lanes at once, in GCC's generic vectors (lowered to whatever
// the build targets): the same integer operations, so the same bits.  Four lanes where AVX2
// holds them in one register, two (16 bytes, SSE2) otherwise.
#ifdef __AVX2__
constexpr int kLanes = 4;
#else
constexpr int kLanes = 2;
#endif
using U64xN = std::uint64_t __attribute__((vector_size(8 * kLanes)));
using F64xN = double __attribute__((vector_size(8 * kLanes)));

U64xN mix_lanes(U64xN x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// unit_open on lanes.  AVX2 has no 64-bit integer to double conversion, so the 53-bit integer is
// converted exactly in two parts (each placed in the mantissa of 2^52, which is then
// subtracted); the + 0.5 then rounds exactly as unit_open's does.
F64xN unit_open_lanes(U64xN bits) {
  const U64xN x = bits >> 11, exponent_2_52 = U64xN{} + 0x4330000000000000ULL;
  const F64xN two_52 = F64xN{} + 0x1p52;
  const F64xN hi = std::bit_cast<F64xN>((x >> 26) | exponent_2_52) - two_52;
  const F64xN lo = std::bit_cast<F64xN>((x & 0x3ffffffULL) | exponent_2_52) - two_52;
  return (hi * 0x1p26 + lo + 0.5) * 0x1p-53;
}

// log_u1[j] = u1 and two_pi_u2[j] = 2π·u2 of elements offset + columns[j], j < n.
void draw_uniforms(std::uint64_t key, std::int64_t offset, const std::int64_t* columns, std::int64_t n,
                   double* log_u1, double* two_pi_u2) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    U64xN index;
    std::memcpy(&index, columns + j, sizeof index);
    index += static_cast<std::uint64_t>(offset);
    const U64xN base = mix_lanes(key ^ mix_lanes(index * 2 + 1));
    const F64xN u1 = unit_open_lanes(mix_lanes(base));
    const F64xN u2 = (2.0 * std::numbers::pi) * unit_open_lanes(mix_lanes(base + 1));
    std::memcpy(log_u1 + j, &u1, sizeof u1);
    std::memcpy(two_pi_u2 + j, &u2, sizeof u2);
  }
  for (; j < n; ++j) {
    const std::uint64_t base = element_base(key, offset + columns[j]);
    log_u1[j] = unit_open(mix(base));
    two_pi_u2[j] = 2.0 * std::numbers::pi * unit_open(mix(base + 1));
  }
}

// Whether a value v' computed with SLEEF's log and cos (≤ 1 ulp each) rounds to the same float as
// init_value's v (glibc's, < 1 ulp each).  |v - v'| stays within ~8 ulp of v (the two log and cos
// results differ by ≤ 2 ulp each; sqrt halves the log's; the products add a few roundings), so
// v' decides the float unless it lies within that bound of a float rounding midpoint.  The
// margin taken is 2^-44 relative (~256 ulp, 32× the bound); values near float underflow are
// never decided here.
bool rounds_like_exact(double v) {
  const double a = std::abs(v);
  if (!(a > 0x1p-100 && a < 0x1p100)) return false;
  const float f = static_cast<float>(a);
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const double lo = (static_cast<double>(std::bit_cast<float>(bits - 1)) + f) / 2;  // exact midpoints
  const double hi = (static_cast<double>(std::bit_cast<float>(bits + 1)) + f) / 2;
  const double margin = a * 0x1p-44;
  return std::abs(a - lo) > margin && std::abs(a - hi) > margin;
}

}  // namespace

double init_value(std::uint64_t seed, const std::string& name, std::int64_t flat_index, const InitSpec& init) {
  return InitDraw(seed, name, init).value(flat_index);
}

InitDraw::InitDraw(std::uint64_t seed, const std::string& name, const InitSpec& init)
    : key_(seed ^ mix(name_hash(name))), init_(init) {}

double InitDraw::value(std::int64_t flat_index) const {
  if (init_.kind == InitSpec::Kind::constant) return init_.value;
  const std::uint64_t base = element_base(key_, flat_index);
  double u1 = unit_open(mix(base)), u2 = unit_open(mix(base + 1));
  return init_.std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);  // Box-Muller
}

void InitDraw::fill(std::int64_t offset, const std::int64_t* columns, std::int64_t n, DType stored,
                    double* out) const {
  if (init_.kind == InitSpec::Kind::constant || stored != DType::f32) {
    for (std::int64_t j = 0; j < n; ++j) out[j] = value(offset + columns[j]);
    return;
  }
  alignas(64) double log_u1[kDrawBlock], cos_2pi_u2[kDrawBlock];
  for (std::int64_t j0 = 0; j0 < n; j0 += kDrawBlock) {
    const std::int64_t len = std::min(kDrawBlock, n - j0);
    draw_uniforms(key_, offset, columns + j0, len, log_u1, cos_2pi_u2);
    array_log(log_u1, log_u1, len);
    array_cos(cos_2pi_u2, cos_2pi_u2, len);
    double* o = out + j0;
    Eigen::Map<Eigen::ArrayXd>(o, len) =
        init_.std * (-2.0 * Eigen::Map<Eigen::ArrayXd>(log_u1, len)).sqrt() * Eigen::Map<Eigen::ArrayXd>(cos_2pi_u2, len);
    for (std::int64_t j = 0; j < len; ++j)
      if (!rounds_like_exact(o[j])) o[j] = value(offset + columns[j0 + j]);
  }
}

Shape shard_shape(const Parameter& p, const Mesh& mesh) {
  const bool vector = p.full_shape.size() == 1;
  const std::int64_t rows = vector ? 1 : p.full_shape[0], cols = p.full_shape.back();
  const ShardBlock b = shard_block(p.layout, mesh, rows, cols, p.name);
  return vector ? Shape{b.cols} : Shape{b.rows, b.cols};
}

void allocate_zeroed(Parameter& p, const TpContext& ctx) {
  const Shape shape = shard_shape(p, ctx.mesh);
  p.drawn.reset();
  if (ctx.defer_parameters) {
    p.value = Tensor();
    p.grad = Tensor();
    return;
  }
  p.value = ctx.backend.zeros(shape, ctx.dtype, MemCategory::parameters);
  p.grad = ctx.backend.zeros(shape, ctx.dtype, MemCategory::gradients);
}

void materialize(Parameter& p, const TpContext& ctx, const InitSpec& init) {
  if (ctx.defer_parameters) {
    allocate_zeroed(p, ctx);
    return;
  }
  const Backend& backend = ctx.backend;
  const bool vector = p.full_shape.size() == 1;
  const std::int64_t rows = vector ? 1 : p.full_shape[0], cols = p.full_shape.back();
  const ShardBlock b = shard_block(p.layout, ctx.mesh, rows, cols, p.name);
  const Shape shape = vector ? Shape{b.cols} : Shape{b.rows, b.cols};
  p.value = backend.empty(shape, ctx.dtype, MemCategory::parameters);
  if (init.kind == InitSpec::Kind::constant) {
    backend.fill(p.value, init.value);
  } else {
    const InitDraw draw(ctx.seed, p.name, init);
    std::vector<std::int64_t> columns(static_cast<std::size_t>(b.cols));
    std::iota(columns.begin(), columns.end(), b.col0());
    std::vector<double> values(static_cast<std::size_t>(b.rows * b.cols));
    for (std::int64_t i = 0; i < b.rows; ++i)
      draw.fill((b.row0() + i) * cols, columns.data(), b.cols, ctx.dtype, values.data() + i * b.cols);
    backend.assign_f64(p.value, values);
  }
  p.grad = backend.zeros(shape, ctx.dtype, MemCategory::gradients);
  p.drawn = InitRecord{ctx.seed, init};
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
