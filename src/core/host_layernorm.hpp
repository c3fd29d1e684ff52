#pragma once
// The host backend's LayerNorm row kernels on raw row-major arrays (rows x cols; the Backend front
// has checked the shapes).  Statistics and the backward sums accumulate in float64 whatever T is;
// each row is one vectorised pass (Eigen array expressions), rows in order, so results are
// bitwise reproducible run to run.  Semantics: core/backend.hpp.
#include <cstdint>

namespace mdtp {

// stats[i] = (mean, Σ (x - mean)²) of row i.
template <class T>
void row_mean_m2(const T* x, std::int64_t rows, std::int64_t cols, double* stats);

// xhat = (x - mean)·rstd; y = xhat·gamma + beta.
template <class T>
void layernorm_apply(const T* x, const double* mean_rstd, const T* gamma, const T* beta, std::int64_t rows,
                     std::int64_t cols, T* xhat, T* y);

// sums[i] = (Σ dy·gamma, Σ dy·gamma·xhat) of row i.
template <class T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, std::int64_t rows, std::int64_t cols,
                             double* sums);

// dx = rstd·(dy·gamma - (s1 + xhat·s2)/n); dgamma += Σ_rows dy·xhat; dbeta += Σ_rows dy.
template <class T>
void layernorm_backward(const T* dy, const T* xhat, const T* gamma, const double* mean_rstd, const double* sums,
                        std::int64_t n, std::int64_t rows, std::int64_t cols, T* dx, T* dgamma, T* dbeta);

}  // namespace mdtp
