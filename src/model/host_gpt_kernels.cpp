// The host implementation of GptKernels: attention by GEMMs (model/host_attention.cpp), the
// cross-entropy's exps vectorised (core/vector_math.hpp) with f64 statistics, the embedding as row
// copies.  Arguments arrive validated by the GptKernels front.
//
// bf16/f16 storage follows the host backend's rule (core/host_low_precision.hpp): the f32 kernel
// runs on widened copies — one sequence at a time for attention, blocks of rows for the
// cross-entropy — and each result is rounded once on the way out.  The copies are workspace of the
// backend's allocator, freed block by block.  The embedding's lookup copies 16-bit rows as they
// are; its gradient adds 16-bit rows into an f32 (or 16-bit) table gradient in token order.
#include "model/gpt_kernels.hpp"

#include "core/eigen_core.hpp"  // before the other headers: see there

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/convert.hpp"
#include "core/vector_math.hpp"
#include "model/host_attention.hpp"

namespace mdtp {
namespace {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;

std::size_t at(std::int64_t row, std::int64_t cols, std::int64_t col) {
  return static_cast<std::size_t>(row * cols + col);
}

// Rows of bytes: any dtype (the zero of every dtype is all zero bits).
void host_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row, Tensor& out) {
  const std::int64_t rows = table.rows();
  const std::size_t row_bytes = static_cast<std::size_t>(table.cols()) * dtype_size(table.dtype());
  const auto* src = static_cast<const unsigned char*>(table.raw_data());
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t r = ids[i] - first_row;
    unsigned char* row = dst + i * row_bytes;
    if (r >= 0 && r < rows) std::memcpy(row, src + static_cast<std::size_t>(r) * row_bytes, row_bytes);
    else std::memset(row, 0, row_bytes);
  }
}

template <class T>
void host_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                        Tensor& table_grad) {
  const std::int64_t cols = table_grad.cols(), rows = table_grad.rows();
  const T* g = dy.data<T>();
  T* dst = table_grad.data<T>();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t r = ids[i] - first_row;
    if (r < 0 || r >= rows) continue;
    const T* src = g + static_cast<std::int64_t>(i) * cols;
    for (std::int64_t j = 0; j < cols; ++j) dst[r * cols + j] += src[j];
  }
}

// 16-bit dy into a table gradient of dy's dtype or f32: each row widened, added in f32, and (for
// a 16-bit gradient) rounded once per token, in token order.
void host_embedding_backward_16bit(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                                   Tensor& table_grad) {
  const std::int64_t cols = table_grad.cols(), rows = table_grad.rows();
  const std::size_t n = static_cast<std::size_t>(cols), es = dtype_size(dy.dtype()), gs = dtype_size(table_grad.dtype());
  std::vector<float> g(n), acc(n);
  const auto* src = static_cast<const unsigned char*>(dy.raw_data());
  auto* dst = static_cast<unsigned char*>(table_grad.raw_data());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t r = ids[i] - first_row;
    if (r < 0 || r >= rows) continue;
    widen_to_f32(dy.dtype(), src + i * n * es, g.data(), n);
    unsigned char* row = dst + static_cast<std::size_t>(r) * n * gs;
    if (table_grad.dtype() == DType::f32) {
      Row<float>(reinterpret_cast<float*>(row), cols) += ConstRow<float>(g.data(), cols);
      continue;
    }
    widen_to_f32(table_grad.dtype(), row, acc.data(), n);
    Row<float>(acc.data(), cols) += ConstRow<float>(g.data(), cols);
    narrow_from_f32(acc.data(), table_grad.dtype(), row, n);
  }
}

template <class T>
void host_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) {
  const std::int64_t cols = logits.cols();
  double* mx = row_max.data<double>();
  for (std::int64_t i = 0; i < logits.rows(); ++i)
    mx[i] = valid_cols == 0 ? -std::numeric_limits<double>::infinity()
                            : static_cast<double>(ConstRow<T>(logits.data<T>() + i * cols, valid_cols).maxCoeff());
}

// Σ_valid exp(logit - max) in f64 from exps computed in T (vectorised), and the target's logit.
template <class T>
void host_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                            std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  const double* mx = row_max.data<double>();
  double* out = sums.data<double>();
  // Eigen's own (aligned) storage: its vectorised sum peels elements up to the first aligned
  // address, so a buffer whose alignment varied from run to run (std::vector's) would vary the
  // summation order and break bitwise reproducibility.
  Eigen::Array<T, 1, Eigen::Dynamic> e(valid_cols);
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    Row<T> ei(e.data(), valid_cols);
    ei = ConstRow<T>(l + i * cols, valid_cols) - static_cast<T>(mx[i]);
    array_exp(e.data(), e.data(), valid_cols);
    const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
    out[2 * i] = valid_cols == 0 ? 0.0 : ei.template cast<double>().sum();
    out[2 * i + 1] = t >= 0 && t < valid_cols ? static_cast<double>(l[at(i, cols, t)]) : 0.0;
  }
}

// The exponent logit - lse is formed in f64 (lse is f64 and need not be a T), then rounded to T.
template <class T>
void host_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                        std::span<const std::int32_t> targets, std::int64_t col0, double scale, Tensor& dlogits) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  const double* z = lse.data<double>();
  T* d = dlogits.data<T>();
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    T* row = d + i * cols;
    Row<T> g(row, valid_cols);
    g = (ConstRow<T>(l + i * cols, valid_cols).template cast<double>() - z[i]).template cast<T>();
    array_exp(row, row, valid_cols);
    const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
    if (t >= 0 && t < valid_cols) row[t] -= T(1);
    g *= static_cast<T>(scale);
    std::fill(row + valid_cols, row + cols, T(0));
  }
}

// One dispatch on the element type per op: f32 or f64 (16-bit operands take the widened path).
template <class Fn>
void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) fn(float{});
  else fn(double{});
}

const unsigned char* bytes_at(const Tensor& t, std::int64_t element) {
  return static_cast<const unsigned char*>(t.raw_data()) + element * static_cast<std::int64_t>(dtype_size(t.dtype()));
}

// An f32 workspace copy of elements [first, first + numel(shape)) of `t`, and the way back.
Tensor widened(const Backend& be, const Tensor& t, std::int64_t first, const Shape& shape) {
  Tensor w = be.empty(shape, DType::f32, MemCategory::workspace);
  widen_to_f32(t.dtype(), bytes_at(t, first), w.data<float>(), static_cast<std::size_t>(w.numel()));
  return w;
}

void narrow_into(const Tensor& w, Tensor& t, std::int64_t first) {
  narrow_from_f32(w.data<float>(), t.dtype(), const_cast<unsigned char*>(bytes_at(t, first)),
                  static_cast<std::size_t>(w.numel()));
}

// Rows per block of the 16-bit cross-entropy: about 1 Mi f32 elements of logits.
std::int64_t xent_rows_per_block(std::int64_t cols) { return std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(cols, 1)); }

// The rotary embedding of one row's Q and K heads (`width` elements, heads d wide) in place.
template <class T>
void rotate_row(T* x, std::int64_t width, std::int64_t d, const double* cos_row, const double* sin_row) {
  const std::int64_t half = d / 2;
  for (std::int64_t h0 = 0; h0 < width; h0 += d)
    for (std::int64_t j = 0; j < half; ++j) {
      const double a = x[h0 + j], b = x[h0 + half + j], c = cos_row[j], s = sin_row[j];
      x[h0 + j] = static_cast<T>(a * c - b * s);
      x[h0 + half + j] = static_cast<T>(b * c + a * s);
    }
}

class HostGptKernels final : public GptKernels {
 public:
  using GptKernels::GptKernels;

 protected:
  void do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                            Tensor& out) const override {
    host_embedding_forward(table, ids, first_row, out);
  }
  void do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                             Tensor& table_grad) const override {
    if (is_16bit(dy.dtype())) return host_embedding_backward_16bit(dy, ids, first_row, table_grad);
    dispatch(dy.dtype(), [&](auto zero) { host_embedding_backward<decltype(zero)>(dy, ids, first_row, table_grad); });
  }
  void do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                            Tensor& probs) const override {
    if (is_16bit(qkv.dtype())) return attention_forward_16bit(qkv, seq_len, n_head, y, probs);
    dispatch(qkv.dtype(), [&](auto zero) { host_attention_forward<decltype(zero)>(qkv, seq_len, n_head, y, probs); });
  }
  void do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                             std::int64_t n_head, Tensor& dqkv) const override {
    if (is_16bit(qkv.dtype())) return attention_backward_16bit(dy, qkv, probs, seq_len, n_head, dqkv);
    const std::int64_t block = std::min(kAttentionBlock, seq_len);
    Tensor scratch = backend().empty({block, seq_len}, qkv.dtype(), MemCategory::workspace);
    dispatch(qkv.dtype(), [&](auto zero) {
      host_attention_backward<decltype(zero)>(dy, qkv, probs, seq_len, n_head, dqkv, scratch);
    });
  }
  void do_rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads, double theta,
               bool inverse) const override {
    const std::int64_t d = qkv.cols() / (n_head + 2 * kv_heads), half = d / 2;
    // cos and sin of every (position, pair) once per call, in f64: [seq_len, half] each.
    std::vector<double> cos_table(static_cast<std::size_t>(seq_len * half)), sin_table(cos_table.size());
    for (std::int64_t j = 0; j < half; ++j) {
      const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(d));
      for (std::int64_t t = 0; t < seq_len; ++t) {
        const double angle = static_cast<double>(t) * inv_freq;
        cos_table[static_cast<std::size_t>(t * half + j)] = std::cos(angle);
        sin_table[static_cast<std::size_t>(t * half + j)] = inverse ? -std::sin(angle) : std::sin(angle);
      }
    }
    // Q and K heads are the first n_head + kv_heads d-wide column blocks.
    const std::int64_t rotated = (n_head + kv_heads) * d;
    if (is_16bit(qkv.dtype())) {
      for (std::int64_t r = 0; r < qkv.rows(); ++r) {
        Tensor row = widened(backend(), qkv, r * qkv.cols(), {1, rotated});
        rotate_row(row.data<float>(), rotated, d, &cos_table[static_cast<std::size_t>((r % seq_len) * half)],
                   &sin_table[static_cast<std::size_t>((r % seq_len) * half)]);
        narrow_into(row, qkv, r * qkv.cols());
      }
      return;
    }
    dispatch(qkv.dtype(), [&](auto zero) {
      using T = decltype(zero);
      for (std::int64_t r = 0; r < qkv.rows(); ++r)
        rotate_row(qkv.data<T>() + r * qkv.cols(), rotated, d, &cos_table[static_cast<std::size_t>((r % seq_len) * half)],
                   &sin_table[static_cast<std::size_t>((r % seq_len) * half)]);
    });
  }
  void do_swiglu_forward(const Tensor& gate_up, Tensor& y) const override {
    by_element_type(gate_up, [&](const auto* gu, std::int64_t rows, std::int64_t c, auto store) {
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < c; ++j) {
          const double g = gu[i * 2 * c + j], u = gu[i * 2 * c + c + j];
          store(y, i * c + j, g / (1.0 + std::exp(-g)) * u);
        }
    });
  }
  void do_swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const override {
    const std::vector<double> dys = backend().to_f64(dy);
    by_element_type(gate_up, [&](const auto* gu, std::int64_t rows, std::int64_t c, auto store) {
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < c; ++j) {
          const double g = gu[i * 2 * c + j], u = gu[i * 2 * c + c + j], d = dys[static_cast<std::size_t>(i * c + j)];
          const double sig = 1.0 / (1.0 + std::exp(-g)), silu = g * sig;
          store(dgate_up, i * 2 * c + j, d * u * sig * (1.0 + g * (1.0 - sig)));
          store(dgate_up, i * 2 * c + c + j, d * silu);
        }
    });
  }
  void do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const override {
    if (is_16bit(logits.dtype())) {
      return by_row_blocks(logits, [&](const Tensor& l, std::int64_t r0, std::int64_t) {
        Tensor mx = row_max.row_slice(r0, r0 + l.rows());
        host_xent_row_max<float>(l, valid_cols, mx);
      });
    }
    dispatch(logits.dtype(), [&](auto zero) { host_xent_row_max<decltype(zero)>(logits, valid_cols, row_max); });
  }
  void do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                            std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const override {
    if (is_16bit(logits.dtype())) {
      return by_row_blocks(logits, [&](const Tensor& l, std::int64_t r0, std::int64_t rows) {
        Tensor part = sums.row_slice(r0, r0 + rows);
        host_xent_partial_sums<float>(l, valid_cols, row_max.row_slice(r0, r0 + rows),
                                      targets.subspan(static_cast<std::size_t>(r0), static_cast<std::size_t>(rows)),
                                      col0, part);
      });
    }
    dispatch(logits.dtype(), [&](auto zero) {
      host_xent_partial_sums<decltype(zero)>(logits, valid_cols, row_max, targets, col0, sums);
    });
  }
  void do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                        std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                        Tensor& dlogits) const override {
    if (is_16bit(logits.dtype())) {
      return by_row_blocks(logits, [&](const Tensor& l, std::int64_t r0, std::int64_t rows) {
        Tensor d = backend().empty(l.shape(), DType::f32, MemCategory::workspace);
        host_xent_backward<float>(l, valid_cols, lse.row_slice(r0, r0 + rows),
                                  targets.subspan(static_cast<std::size_t>(r0), static_cast<std::size_t>(rows)), col0,
                                  scale, d);
        narrow_into(d, dlogits, r0 * logits.cols());
      });
    }
    dispatch(logits.dtype(), [&](auto zero) {
      host_xent_backward<decltype(zero)>(logits, valid_cols, lse, targets, col0, scale, dlogits);
    });
  }

 private:
  // fn(f32 copy of logits rows [r0, r0 + rows), r0, rows) over blocks of rows.
  template <class Fn>
  void by_row_blocks(const Tensor& logits, Fn&& fn) const {
    const std::int64_t cols = logits.cols(), rb = xent_rows_per_block(cols);
    for (std::int64_t r0 = 0; r0 < logits.rows(); r0 += rb) {
      const std::int64_t rows = std::min(rb, logits.rows() - r0);
      fn(widened(backend(), logits, r0 * cols, {rows, cols}), r0, rows);
    }
  }

  // fn(pointer to gate_up's elements as f32/f64 (16-bit: a widened copy), rows, c, store) where
  // store(tensor, index, double) writes one element in the tensor's dtype.  The SwiGLU kernels are
  // element-wise in f64 arithmetic: a Llama run on the host is for checking, not for speed.
  template <class Fn>
  void by_element_type(const Tensor& gate_up, Fn&& fn) const {
    const std::int64_t rows = gate_up.rows(), c = gate_up.cols() / 2;
    if (is_16bit(gate_up.dtype())) {
      Tensor w = widened(backend(), gate_up, 0, gate_up.shape());
      fn(static_cast<const float*>(w.data<float>()), rows, c, [](Tensor& t, std::int64_t i, double v) {
        const float f = static_cast<float>(v);
        narrow_from_f32(&f, t.dtype(), const_cast<unsigned char*>(bytes_at(t, i)), 1);
      });
      return;
    }
    dispatch(gate_up.dtype(), [&](auto zero) {
      using T = decltype(zero);
      fn(gate_up.data<T>(), rows, c, [](Tensor& t, std::int64_t i, double v) { t.data<T>()[i] = static_cast<T>(v); });
    });
  }

  // One sequence at a time: its qkv rows and its heads' probabilities widened, the f32 kernel, its
  // y rows and probabilities rounded back (y from the f32 probabilities, before their rounding).
  void attention_forward_16bit(const Tensor& qkv, std::int64_t T, std::int64_t n_head, Tensor& y, Tensor& probs) const {
    const std::int64_t C3 = qkv.cols(), C = y.cols(), per_seq = n_head * T * T;
    for (std::int64_t s = 0; s < qkv.rows() / T; ++s) {
      Tensor x = widened(backend(), qkv, s * T * C3, {T, C3});
      Tensor ys = backend().empty({T, C}, DType::f32, MemCategory::workspace);
      Tensor ps = backend().empty({per_seq}, DType::f32, MemCategory::workspace);
      host_attention_forward<float>(x, T, n_head, ys, ps);
      narrow_into(ys, y, s * T * C);
      narrow_into(ps, probs, s * per_seq);
    }
  }

  void attention_backward_16bit(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t T,
                                std::int64_t n_head, Tensor& dqkv) const {
    const std::int64_t C3 = qkv.cols(), C = dy.cols(), per_seq = n_head * T * T;
    Tensor scratch = backend().empty({std::min(kAttentionBlock, T), T}, DType::f32, MemCategory::workspace);
    for (std::int64_t s = 0; s < qkv.rows() / T; ++s) {
      Tensor x = widened(backend(), qkv, s * T * C3, {T, C3});
      Tensor g = widened(backend(), dy, s * T * C, {T, C});
      Tensor p = widened(backend(), probs, s * per_seq, {per_seq});
      Tensor dx = backend().empty({T, C3}, DType::f32, MemCategory::workspace);
      host_attention_backward<float>(g, x, p, T, n_head, dx, scratch);
      narrow_into(dx, dqkv, s * T * C3);
    }
  }
};

}  // namespace

std::unique_ptr<GptKernels> make_host_gpt_kernels(const Backend& backend) {
  require(backend.device() == DeviceKind::host, "the host GPT kernels need a host backend; got ", backend.name());
  return std::make_unique<HostGptKernels>(backend);
}

}  // namespace mdtp
