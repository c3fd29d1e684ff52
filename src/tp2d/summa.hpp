#pragma once
// SUMMA on a q×q grid: the three block products a tensor-parallel Linear needs, shared by 2D
// (Optimus) and 2.5D (Tesseract, one grid per depth slab).  Rank (r, c) holds block (r, c) of
// every operand; `row` is its tp.row communicator (fixed r, group rank c) and `col` its tp.col
// communicator (fixed c, group rank r).  Every root below is a group-local rank.
//
// Per-call list (s, j = 0 … q-1; element counts for blocks A [m, k], B [k, n] etc. as named):
//
//   summa_nn      C(r,c) = Σ_s A(r,s)·B(s,c)            A [m,k], B [k,n] → C [m,n]
//                 step s: broadcast  tp.row  root s   m·k   (A(r,s))
//                         broadcast  tp.col  root s   k·n   (B(s,c))
//   summa_nt      C(r,j) = Σ_c A(r,c)·B(j,c)ᵀ           A [m,n], B [k,n] → C [m,k]
//                 step j: broadcast  tp.col  root j   k·n   (B(j,c))
//                         reduce     tp.row  root j   m·k   (partial A(r,c)·B(j,c)ᵀ)
//   summa_tn_acc  C(j,c) += Σ_r A(r,j)ᵀ·B(r,c)          A [m,k], B [m,n] → C [k,n]
//                 step j: broadcast  tp.row  root j   m·k   (A(r,j))
//                         reduce     tp.col  root j   k·n   (partial A(r,j)ᵀ·B(r,c))
//
// So each product is exactly 2q calls.  For a Linear Y = X·W with X [Bs, K] (Bs = the rows of
// one grid: B in 2D, B/d in 2.5D), W [K, N]:
//   forward  = summa_nn(X, W):       q × (bcast tp.row Bs/q·K/q, bcast tp.col K/q·N/q)
//   dX       = summa_nt(dY, W):      q × (bcast tp.col K/q·N/q,  reduce tp.row Bs/q·K/q)
//   dW      += summa_tn_acc(X, dY):  q × (bcast tp.row Bs/q·K/q, reduce tp.col K/q·N/q)
// i.e. 6q calls per forward+backward.  With q = 1 nothing is communicated (one local GEMM).
//
// Overlap: step s+1's broadcasts are issued (non-blocking) before step s's GEMM into a second
// receive buffer, and step j's reduce stays in flight during step j+1's GEMM (two partial
// buffers).  The calls and their sizes are those of the blocking algorithm; only their timing
// differs.  The ledger records a call when it is waited for, so its order is
//   summa_nn:          bcast_row(0) bcast_col(0) bcast_row(1) bcast_col(1) …
//   summa_nt / _tn:    bcast(0), then for j = 1 … q-1: bcast(j) reduce(j-1), then reduce(q-1).
//
// Memory: received blocks, non-root partials are MemCategory::communication (at most two of
// each, allocated only when used); a broadcast root sends its own block without a copy, and a
// reduce root sums in place into the output.
#include "comm/communicator.hpp"
#include "core/backend.hpp"

namespace mdtp {

struct SummaGrid {
  Communicator& row;  // fixed r, group rank c
  Communicator& col;  // fixed c, group rank r
  const Backend& backend;
  int q() const { return row.size(); }
};

// C = A·B (the forward product).  Returns C, allocated under `category`.
Tensor summa_nn(const SummaGrid& grid, const Tensor& a, const Tensor& b, MemCategory category);
// C = A·Bᵀ (dX = dY·Wᵀ).  Returns C, allocated under `category`.
Tensor summa_nt(const SummaGrid& grid, const Tensor& a, const Tensor& b, MemCategory category);
// C += Aᵀ·B (dW += Xᵀ·dY), accumulated into the existing block `c`.
void summa_tn_accumulate(const SummaGrid& grid, const Tensor& a, const Tensor& b, Tensor& c);

}  // namespace mdtp
