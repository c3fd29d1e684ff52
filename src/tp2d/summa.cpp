#include "tp2d/summa.hpp"

#include <array>

#include "core/error.hpp"

namespace mdtp {
namespace {

// The blocks one operand contributes, step by step, as broadcasts on one communicator from group
// rank s at step s.  Two receive slots let step s+1's broadcast fly while step s's block is used.
class BroadcastStream {
 public:
  BroadcastStream(Communicator& comm, const Tensor& own, const Backend& backend)
      : comm_(comm), own_(own), backend_(backend) {}

  void issue(int step) {
    if (comm_.size() == 1) return;  // q = 1: the only block is our own
    const auto slot = static_cast<std::size_t>(step % 2);
    Tensor buffer = own_;  // the root sends its own block; nothing is copied
    if (comm_.rank() != step) {
      if (!slots_[slot].defined())
        slots_[slot] = backend_.empty(own_.shape(), own_.dtype(), MemCategory::communication);
      buffer = slots_[slot];
    }
    handles_[slot] = comm_.ibroadcast(buffer, step);
  }

  // Step s's block, once its broadcast has completed.
  Tensor wait(int step) {
    const auto slot = static_cast<std::size_t>(step % 2);
    handles_[slot].wait();
    return (comm_.size() == 1 || comm_.rank() == step) ? own_ : slots_[slot];
  }

 private:
  Communicator& comm_;
  Tensor own_;
  const Backend& backend_;
  std::array<Tensor, 2> slots_;
  std::array<CommHandle, 2> handles_;
};

// Partial products summed onto one root per step (group rank j at step j).  The root of step j
// computes straight into `root_out` and reduces in place; other ranks use one of two partial
// buffers, so step j's reduce can still be in flight while step j+1's partial is computed.
class ReduceStream {
 public:
  ReduceStream(Communicator& comm, Tensor& root_out, const Backend& backend)
      : comm_(comm), root_out_(root_out), backend_(backend) {}

  // Where step j's partial goes.
  Tensor target(int step) {
    if (comm_.size() == 1 || comm_.rank() == step) return root_out_;
    const auto slot = static_cast<std::size_t>(step % 2);
    if (!slots_[slot].defined())
      slots_[slot] = backend_.empty(root_out_.shape(), root_out_.dtype(), MemCategory::communication);
    return slots_[slot];
  }
  bool is_root(int step) const { return comm_.size() == 1 || comm_.rank() == step; }

  // Starts step j's reduce of target(j), then completes step j-1's (whose buffer step j+1 reuses).
  void issue_and_retire(int step) {
    if (comm_.size() == 1) return;
    const auto slot = static_cast<std::size_t>(step % 2);
    Tensor in = target(step);
    Tensor out = is_root(step) ? root_out_ : Tensor();
    handles_[slot] = comm_.ireduce(in, out, step);
    if (step > 0) handles_[1 - slot].wait();
  }
  void finish(int last_step) { handles_[static_cast<std::size_t>(last_step % 2)].wait(); }

 private:
  Communicator& comm_;
  Tensor& root_out_;
  const Backend& backend_;
  std::array<Tensor, 2> slots_;
  std::array<CommHandle, 2> handles_;
};

// Checks that need no communication, so that every rank of the grid refuses a bad call alike
// (the blocks of one product have the same shape on every rank) before any collective.
void require_grid(const SummaGrid& grid, const char* product, const Tensor& a, const Tensor& b) {
  require(grid.row.size() == grid.col.size(), product, ": SUMMA needs a square grid; group '", grid.row.name(),
          "' has ", grid.row.size(), " ranks but group '", grid.col.name(), "' has ", grid.col.size());
  require(a.ndim() == 2 && b.ndim() == 2, product, ": blocks must be 2-D; got ", shape_string(a.shape()), " and ",
          shape_string(b.shape()));
  require(a.dtype() == b.dtype(), product, ": blocks of different dtypes ", dtype_name(a.dtype()), " and ",
          dtype_name(b.dtype()));
}

}  // namespace

Tensor summa_nn(const SummaGrid& grid, const Tensor& a, const Tensor& b, MemCategory category) {
  require_grid(grid, "SUMMA C = A·B", a, b);
  require(a.cols() == b.rows(), "SUMMA C = A·B: A block ", shape_string(a.shape()), " and B block ",
          shape_string(b.shape()), " do not chain (", a.cols(), " != ", b.rows(), ")");
  const Backend& be = grid.backend;
  Tensor c = be.empty({a.rows(), b.cols()}, a.dtype(), category);
  BroadcastStream a_blocks(grid.row, a, be), b_blocks(grid.col, b, be);
  const int q = grid.q();
  a_blocks.issue(0);
  b_blocks.issue(0);
  for (int s = 0; s < q; ++s) {
    Tensor as = a_blocks.wait(s);
    Tensor bs = b_blocks.wait(s);
    if (s + 1 < q) {
      a_blocks.issue(s + 1);
      b_blocks.issue(s + 1);
    }
    be.gemm(false, false, 1.0, as, bs, s == 0 ? 0.0 : 1.0, c);
  }
  return c;
}

Tensor summa_nt(const SummaGrid& grid, const Tensor& a, const Tensor& b, MemCategory category) {
  require_grid(grid, "SUMMA C = A·Bᵀ", a, b);
  require(a.cols() == b.cols(), "SUMMA C = A·Bᵀ: A block ", shape_string(a.shape()), " and B block ",
          shape_string(b.shape()), " need the same number of columns (", a.cols(), " != ", b.cols(), ")");
  const Backend& be = grid.backend;
  Tensor c = be.empty({a.rows(), b.rows()}, a.dtype(), category);
  BroadcastStream b_blocks(grid.col, b, be);
  ReduceStream sums(grid.row, c, be);
  const int q = grid.q();
  b_blocks.issue(0);
  for (int j = 0; j < q; ++j) {
    Tensor bj = b_blocks.wait(j);
    if (j + 1 < q) b_blocks.issue(j + 1);
    Tensor partial = sums.target(j);
    be.gemm(false, true, 1.0, a, bj, 0.0, partial);
    sums.issue_and_retire(j);
  }
  sums.finish(q - 1);
  return c;
}

void summa_tn_accumulate(const SummaGrid& grid, const Tensor& a, const Tensor& b, Tensor& c) {
  require_grid(grid, "SUMMA C += Aᵀ·B", a, b);
  require(a.rows() == b.rows(), "SUMMA C += Aᵀ·B: A block ", shape_string(a.shape()), " and B block ",
          shape_string(b.shape()), " need the same number of rows (", a.rows(), " != ", b.rows(), ")");
  // C is a weight gradient: A's dtype, or f32 for 16-bit A (its partial sums then travel in f32).
  require(c.defined() && c.rows() == a.cols() && c.cols() == b.cols() &&
              (c.dtype() == a.dtype() || (is_16bit(a.dtype()) && c.dtype() == DType::f32)),
          "SUMMA C += Aᵀ·B: C block ", shape_string(c.shape()), " of ", dtype_name(c.dtype()), " should be [", a.cols(),
          ", ", b.cols(), "] of ", dtype_name(a.dtype()), is_16bit(a.dtype()) ? " or f32" : "");
  const Backend& be = grid.backend;
  BroadcastStream a_blocks(grid.row, a, be);
  ReduceStream sums(grid.col, c, be);
  const int q = grid.q();
  a_blocks.issue(0);
  for (int j = 0; j < q; ++j) {
    Tensor aj = a_blocks.wait(j);
    if (j + 1 < q) a_blocks.issue(j + 1);
    Tensor partial = sums.target(j);
    // The root adds its partial to the existing C; the in-place reduce then adds the others'.
    be.gemm(true, false, 1.0, aj, b, sums.is_root(j) ? 1.0 : 0.0, partial);
    sums.issue_and_retire(j);
  }
  sums.finish(q - 1);
}

}  // namespace mdtp
