#include "tp/parameter.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <numbers>
#include <numeric>
#include <thread>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "core/vector_math.hpp"
#include "mesh/mesh.hpp"
#include "tp/replicated_columns.hpp"

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
// the build targets): the same integer operations, so the same bits.  As many lanes as one
// register of the build's widest vector unit holds: eight (AVX-512), four (AVX2), two (SSE2).
#if defined(__AVX512F__)
constexpr int kLanes = 8;
#elif defined(__AVX2__)
constexpr int kLanes = 4;
#else
constexpr int kLanes = 2;
#endif
using U64xN = std::uint64_t __attribute__((vector_size(8 * kLanes)));
using F64xN = double __attribute__((vector_size(8 * kLanes)));
using I64xN = std::int64_t __attribute__((vector_size(8 * kLanes)));
using U32xN = std::uint32_t __attribute__((vector_size(4 * kLanes)));
using F32xN = float __attribute__((vector_size(4 * kLanes)));

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

bool all_lanes(I64xN mask) {
  std::int64_t all = -1;
  for (int l = 0; l < kLanes; ++l) all &= mask[l];
  return all != 0;
}

// The correctly rounded square root on lanes (as std::sqrt per element).
F64xN sqrt_lanes(F64xN x) {
#if defined(__AVX512F__)
  // The masked form with every lane selected: _mm512_sqrt_pd's undefined pass-through operand
  // trips GCC 12's -Wmaybe-uninitialized.
  const __m512d v = std::bit_cast<__m512d>(x);
  return std::bit_cast<F64xN>(_mm512_mask_sqrt_pd(v, 0xff, v));
#elif defined(__AVX2__)
  return std::bit_cast<F64xN>(_mm256_sqrt_pd(std::bit_cast<__m256d>(x)));
#elif defined(__SSE2__)
  return std::bit_cast<F64xN>(_mm_sqrt_pd(std::bit_cast<__m128d>(x)));
#else
  for (int l = 0; l < kLanes; ++l) x[l] = std::sqrt(x[l]);
  return x;
#endif
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

// Whether values v' computed with SLEEF's log and cos (≤ 1 ulp each) round to the same floats as
// init_value's v (glibc's, < 1 ulp each), lane by lane (all ones where they do).  |v - v'| stays
// within ~8 ulp of v (the two log and cos results differ by ≤ 2 ulp each; sqrt halves the log's;
// the products add a few roundings), so v' decides the float unless it lies within that bound of
// a float rounding midpoint.  The margin taken is 2^-44 relative (~256 ulp, 32x the bound);
// values near float underflow or overflow are never decided here.
I64xN rounds_like_exact(F64xN v) {
  const F64xN a = std::bit_cast<F64xN>(std::bit_cast<U64xN>(v) & 0x7fffffffffffffffULL);
  const I64xN in_range = (a > 0x1p-100) & (a < 0x1p100);
  // Out-of-range lanes are replaced by 1 so that the float arithmetic below stays finite.
  const F64xN safe = in_range ? a : F64xN{} + 1.0;
  const F32xN f = __builtin_convertvector(safe, F32xN);
  const U32xN bits = std::bit_cast<U32xN>(f);
  const F64xN fd = __builtin_convertvector(f, F64xN);
  const F64xN below = __builtin_convertvector(std::bit_cast<F32xN>(bits - 1U), F64xN);
  const F64xN above = __builtin_convertvector(std::bit_cast<F32xN>(bits + 1U), F64xN);
  const F64xN lo = (below + fd) / 2, hi = (above + fd) / 2;  // exact midpoints
  const F64xN margin = safe * 0x1p-44;
  const F64xN to_lo = safe - lo, to_hi = hi - safe;  // f is the nearest float: both ≥ 0
  return in_range & (to_lo > margin) & (to_hi > margin);
}

// The block of the full tensor that this rank's shard holds (a 1-D parameter is one row).
ShardBlock own_block(const Parameter& p, const Mesh& mesh) {
  const bool vector = p.full_shape.size() == 1;
  return shard_block(p.layout, mesh, vector ? 1 : p.full_shape[0], p.full_shape.back(), p.name);
}

Shape block_shape(const Parameter& p, const ShardBlock& b) {
  return p.full_shape.size() == 1 ? Shape{b.cols} : Shape{b.rows, b.cols};
}

// Elements assign_drawn() stores at a time, rounded down to whole rows.
constexpr std::int64_t kDrawPiece = std::int64_t{1} << 16;

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
    // Box–Muller and the rounding check on lanes, whole vectors first; a value the check cannot
    // decide is recomputed by value().
    const auto finish = [&](std::int64_t j, std::int64_t lanes) {
      F64xN log_u1_v = F64xN{}, cos_v = F64xN{};  // lanes past `lanes` stay zero and are not stored
      std::memcpy(&log_u1_v, log_u1 + j, sizeof(double) * static_cast<std::size_t>(lanes));
      std::memcpy(&cos_v, cos_2pi_u2 + j, sizeof(double) * static_cast<std::size_t>(lanes));
      const F64xN v = init_.std * sqrt_lanes(-2.0 * log_u1_v) * cos_v;
      const I64xN exact = rounds_like_exact(v);
      if (lanes == kLanes && all_lanes(exact)) {
        std::memcpy(o + j, &v, sizeof v);
        return;
      }
      for (std::int64_t l = 0; l < lanes; ++l) o[j + l] = exact[l] ? v[l] : value(offset + columns[j0 + j + l]);
    };
    std::int64_t j = 0;
    for (; j + kLanes <= len; j += kLanes) finish(j, kLanes);
    if (j < len) finish(j, len - j);
  }
}

Shape shard_shape(const Parameter& p, const Mesh& mesh) { return block_shape(p, own_block(p, mesh)); }

void allocate_zeroed(Parameter& p, const TpContext& ctx) {
  const Shape shape = shard_shape(p, ctx.mesh);
  p.drawn.reset();
  if (ctx.defer_parameters) {
    p.value = Tensor();
    p.grad = Tensor();
    return;
  }
  p.value = ctx.backend.zeros(shape, ctx.dtype, MemCategory::parameters);
  p.grad = ctx.backend.zeros(shape, ctx.grad_dtype, MemCategory::gradients);
}

void materialize(Parameter& p, const TpContext& ctx, const InitSpec& init) {
  if (ctx.defer_parameters) {
    allocate_zeroed(p, ctx);
    return;
  }
  const Backend& backend = ctx.backend;
  const ShardBlock b = own_block(p, ctx.mesh);
  const Shape shape = block_shape(p, b);
  p.value = backend.empty(shape, ctx.dtype, MemCategory::parameters);
  if (init.kind == InitSpec::Kind::constant) {
    backend.fill(p.value, init.value);
  } else if (p.value.holds_values()) {  // a synthetic tensor (a simulated cluster's) draws nothing
    const InitDraw draw(ctx.seed, p.name, init);
    const std::int64_t cols = p.full_shape.back();
    std::vector<std::int64_t> columns(static_cast<std::size_t>(b.cols));
    std::iota(columns.begin(), columns.end(), b.col0());
    // Pieces of whole shard rows: each row is one fill() over the shard's columns.
    assign_drawn(backend, p.value, b.cols, ctx.mesh.occupancy().cores_per_rank(),
                 [&](std::int64_t first, std::int64_t n, double* out) {
      for (std::int64_t k = 0; k < n; k += b.cols)
        draw.fill((b.row0() + (first + k) / b.cols) * cols, columns.data(), b.cols, ctx.dtype, out + k);
    });
  }
  p.grad = backend.zeros(shape, ctx.grad_dtype, MemCategory::gradients);
  p.drawn = InitRecord{ctx.seed, init};
}

void assign_drawn(const Backend& backend, Tensor& value, std::int64_t row, int threads,
                  const std::function<void(std::int64_t first, std::int64_t n, double* out)>& draw) {
  require(threads >= 1, "assign_drawn needs threads >= 1; got ", threads);
  const std::int64_t total = value.numel(), width = std::max<std::int64_t>(1, row);
  const std::int64_t piece = std::max<std::int64_t>(1, kDrawPiece / width) * width;
  const std::int64_t pieces = (total + piece - 1) / piece;
  if (pieces == 0) return;
  // Drawing dominates building a large model (a GPT of a few billion parameters takes minutes on
  // one core: each value is a hash, a log and a cosine), so up to one piece per core of this
  // rank's share is drawn at once.  A piece's values depend on its range alone, so the result is
  // the same on any number of threads; the backend is called from this thread only, in piece order.
  const std::int64_t workers = std::min<std::int64_t>(threads, pieces);
  std::vector<std::vector<double>> values(static_cast<std::size_t>(workers));
  const Tensor flat = value.reshaped({total});
  for (std::int64_t p0 = 0; p0 < pieces; p0 += workers) {
    const std::int64_t batch = std::min(workers, pieces - p0);
    std::vector<std::exception_ptr> failures(static_cast<std::size_t>(batch));
    const auto draw_piece = [&](std::int64_t b) {
      const std::int64_t first = (p0 + b) * piece, n = std::min(piece, total - first);
      std::vector<double>& out = values[static_cast<std::size_t>(b)];
      out.resize(static_cast<std::size_t>(n));
      try {
        draw(first, n, out.data());
      } catch (...) {
        failures[static_cast<std::size_t>(b)] = std::current_exception();
      }
    };
    std::vector<std::thread> helpers;
    for (std::int64_t b = 1; b < batch; ++b) helpers.emplace_back(draw_piece, b);
    draw_piece(0);
    for (std::thread& t : helpers) t.join();
    for (const std::exception_ptr& failure : failures)
      if (failure) std::rethrow_exception(failure);
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t first = (p0 + b) * piece;
      const std::vector<double>& out = values[static_cast<std::size_t>(b)];
      Tensor part = flat.row_slice(first, first + static_cast<std::int64_t>(out.size()));
      backend.assign_f64(part, out);
    }
  }
}

void bind_to_storage(Parameter& p, Tensor value, Tensor grad, const Backend& backend) {
  require(value.numel() == p.value.numel() && grad.numel() == p.grad.numel(), p.name, ": storage of ",
          value.numel(), " and ", grad.numel(), " elements for a shard of ", p.value.numel());
  require(value.dtype() == p.value.dtype() && grad.dtype() == p.grad.dtype(), p.name, ": storage of dtype ",
          dtype_name(value.dtype()), "/", dtype_name(grad.dtype()), " for a parameter of ", dtype_name(p.value.dtype()),
          "/", dtype_name(p.grad.dtype()));
  value = value.reshaped(p.value.shape());
  grad = grad.reshaped(p.grad.shape());
  backend.copy(p.value, value);
  backend.copy(p.grad, grad);
  p.value = value;
  p.grad = grad;
}

void reduce_gradients(const std::vector<Parameter*>& params, const Mesh& mesh, const Backend& backend,
                      const std::string& data_parallel_group) {
  for (Parameter* p : params) {
    for (const auto& group : p->partial_grad_over)
      if (mesh.comm(group).size() > 1) mesh.comm(group).all_reduce(p->grad);
    if (p->replicated_columns)
      sum_replicated_columns(p->grad, p->grad.cols(), *p->replicated_columns, mesh, backend);
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
    double squares = backend.sum_squares(p->grad);
    if (p->replicated_columns)
      squares -= uncounted_squares(p->grad, 0, p->grad.cols(), *p->replicated_columns, mesh, backend);
    local += squares / copies;
  }
  Tensor total = backend.from_f64({local}, {1}, DType::f64, MemCategory::other);
  Communicator& comm = mesh.comm(model_parallel_group);
  if (comm.size() > 1) comm.all_reduce(total);
  return std::sqrt(backend.to_f64(total)[0]);
}

}  // namespace mdtp
