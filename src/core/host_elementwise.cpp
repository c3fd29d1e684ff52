#include "core/host_elementwise.hpp"

#include "core/eigen_core.hpp"  // before the other headers: see there

#include <algorithm>
#include <cmath>

#include "core/vector_math.hpp"

namespace mdtp {
namespace {

// Elements per block: three or four arrays of it stay in L1 between the passes over a block.
constexpr std::int64_t kBlock = 512;

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluA = 0.044715;

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// tanh(sqrt(2/pi)·(v + 0.044715·v³)) of x[0, len) into t.
template <class T>
void gelu_tanh(const T* x, T* t, std::int64_t len) {
  const T c = static_cast<T>(kGeluC), a = static_cast<T>(kGeluA);
  for (std::int64_t j = 0; j < len; ++j) {
    const T v = x[j];
    t[j] = c * (v + a * v * v * v);
  }
  array_tanh(t, t, len);
}

}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, std::int64_t n) {
  alignas(64) T t[kBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t len = std::min(kBlock, n - i0);
    gelu_tanh(x + i0, t, len);
    for (std::int64_t j = 0; j < len; ++j) y[i0 + j] = T(0.5) * x[i0 + j] * (T(1) + t[j]);
  }
}

template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t n) {
  const T c = static_cast<T>(kGeluC), a3 = static_cast<T>(3 * kGeluA);
  alignas(64) T t[kBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t len = std::min(kBlock, n - i0);
    gelu_tanh(x + i0, t, len);
    for (std::int64_t j = 0; j < len; ++j) {
      const T v = x[i0 + j], th = t[j];
      const T du = c * (T(1) + a3 * v * v);
      dx[i0 + j] = dy[i0 + j] * (T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du);
    }
  }
}

template <class T>
void adamw_update(T* w, const T* g, T* m, T* v, std::int64_t n, const AdamWStep& st) {
  const double t = static_cast<double>(st.step);
  const double c1 = 1.0 - std::pow(st.beta1, t), c2 = 1.0 - std::pow(st.beta2, t);
  const T decay = static_cast<T>(1.0 - st.lr * st.weight_decay);
  const T b1 = static_cast<T>(st.beta1), b2 = static_cast<T>(st.beta2);
  const T step_size = static_cast<T>(st.lr / c1), inv_sqrt_c2 = static_cast<T>(1.0 / std::sqrt(c2));
  const T eps = static_cast<T>(st.eps), gs = static_cast<T>(st.grad_scale);
  alignas(64) T gb[kBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t len = std::min(kBlock, n - i0);
    ArrayMap<T> W(w + i0, len), M(m + i0, len), V(v + i0, len), G(gb, len);
    G = ConstArrayMap<T>(g + i0, len) * gs;
    M = b1 * M + (T(1) - b1) * G;
    V = b2 * V + (T(1) - b2) * G * G;
    W = W * decay - step_size * M / (V.sqrt() * inv_sqrt_c2 + eps);
  }
}

template void gelu_forward<float>(const float*, float*, std::int64_t);
template void gelu_forward<double>(const double*, double*, std::int64_t);
template void gelu_backward<float>(const float*, const float*, float*, std::int64_t);
template void gelu_backward<double>(const double*, const double*, double*, std::int64_t);
template void adamw_update<float>(float*, const float*, float*, float*, std::int64_t, const AdamWStep&);
template void adamw_update<double>(double*, const double*, double*, double*, std::int64_t, const AdamWStep&);

}  // namespace mdtp
