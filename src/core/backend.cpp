// The validating front of Backend: every check an op needs, once, for every implementation.
#include "core/backend.hpp"

#include <initializer_list>

namespace mdtp {
namespace {

void require_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  require(a.dtype() == b.dtype(), what, ": mixed dtypes ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

// An accumulator of 16-bit data may be f32 (gradients kept wider than the parameters); otherwise
// the same dtype.
void require_accumulator_dtype(const Tensor& data, const Tensor& acc, const char* what) {
  require(acc.dtype() == data.dtype() || (is_16bit(data.dtype()) && acc.dtype() == DType::f32), what,
          ": mixed dtypes ", dtype_name(data.dtype()), " and ", dtype_name(acc.dtype()),
          " (an accumulator may be f32 for bf16/f16 data, else it is the data's dtype)");
}

void require_numel(const Tensor& t, std::int64_t n, const char* what) {
  require(t.numel() == n, what, " has ", t.numel(), " elements (shape ", shape_string(t.shape()), "); expected ", n);
}

// Float64 [rows, 2] statistics (LayerNorm), whatever the data's dtype.
void require_stats(const Tensor& t, std::int64_t rows, const char* what) {
  require(t.defined(), what, " is undefined");
  require(t.dtype() == DType::f64 && t.rows() == rows && t.cols() == 2, what, " must be f64 [", rows, ", 2]; got ",
          dtype_name(t.dtype()), " ", shape_string(t.shape()));
}

// Byte ranges [a, a + an) and [b, b + bn) overlap without being the same range.
bool partially_overlap(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.raw_data());
  const auto* pb = static_cast<const char*>(b.raw_data());
  if (pa == pb && a.bytes() == b.bytes()) return false;
  return pa < pb + b.bytes() && pb < pa + a.bytes() && a.bytes() > 0 && b.bytes() > 0;
}

}  // namespace

void Backend::require_operand(const Tensor& t, const char* what) const {
  require(t.defined(), what, " is undefined");
  require(t.device() == device(), what, " lives on ", device_name(t.device()), "; the ", name(),
          " backend needs ", device_name(device()), " tensors");
  require(computes_in(t.dtype()), what, " holds ", dtype_name(t.dtype()), ", which the ", name(),
          " backend does not compute in");
}

Tensor Backend::empty(const Shape& shape, DType dtype, MemCategory category) const {
  return Tensor::empty(shape, dtype, allocator_, category);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemCategory category) const {
  Tensor t = empty(shape, dtype, category);
  fill(t, 0.0);
  return t;
}

Tensor Backend::from_f64(const std::vector<double>& values, const Shape& shape, DType dtype,
                         MemCategory category) const {
  require(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_f64: ", values.size(),
          " values for shape ", shape_string(shape));
  Tensor t = empty(shape, dtype, category);
  assign_f64(t, values);
  return t;
}

Tensor Backend::clone(const Tensor& src, MemCategory category) const {
  Tensor t = empty(src.shape(), src.dtype(), category);
  copy(src, t);
  return t;
}

std::vector<double> Backend::to_f64(const Tensor& t) const {
  require_operand(t, "to_f64 source");
  return do_to_f64(t);
}

void Backend::assign_f64(Tensor& t, const std::vector<double>& values) const {
  require_operand(t, "assign_f64 target");
  require(static_cast<std::int64_t>(values.size()) == t.numel(), "assign_f64: ", values.size(), " values for shape ",
          shape_string(t.shape()));
  do_assign_f64(t, values);
}

void Backend::fill(Tensor& t, double value) const {
  require_operand(t, "fill target");
  do_fill(t, value);
}

void Backend::copy(const Tensor& src, Tensor& dst) const {
  require_operand(src, "copy source");
  require_operand(dst, "copy target");
  require_same_dtype(src, dst, "copy");
  require(src.numel() == dst.numel(), "copy of ", shape_string(src.shape()), " into ", shape_string(dst.shape()));
  require(!partially_overlap(src, dst), "copy: source and target ranges partially overlap (",
          shape_string(src.shape()), " into ", shape_string(dst.shape()), "); copy through a temporary");
  if (src.numel() == 0 || src.raw_data() == dst.raw_data()) return;
  do_copy(src, dst);
}

void Backend::convert(const Tensor& src, Tensor& dst) const {
  require_operand(src, "convert source");
  require_operand(dst, "convert target");
  require(src.numel() == dst.numel(), "convert of ", shape_string(src.shape()), " into ", shape_string(dst.shape()));
  if (src.dtype() == dst.dtype()) return copy(src, dst);
  require(!partially_overlap(src, dst) && src.raw_data() != dst.raw_data(),
          "convert: source and target must not share memory");
  if (src.numel() == 0) return;
  do_convert(src, dst);
}

void Backend::copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                         std::int64_t dc0, std::int64_t rows, std::int64_t cols) const {
  require_operand(src, "copy_block source");
  require_operand(dst, "copy_block target");
  require_same_dtype(src, dst, "copy_block");
  require(rows >= 0 && cols >= 0, "copy_block: negative block ", rows, "x", cols);
  require(sr0 >= 0 && sc0 >= 0 && sr0 + rows <= src.rows() && sc0 + cols <= src.cols(), "copy_block: source block [",
          sr0, "+", rows, ", ", sc0, "+", cols, "] out of range for ", src.rows(), "x", src.cols());
  require(dr0 >= 0 && dc0 >= 0 && dr0 + rows <= dst.rows() && dc0 + cols <= dst.cols(), "copy_block: target block [",
          dr0, "+", rows, ", ", dc0, "+", cols, "] out of range for ", dst.rows(), "x", dst.cols());
  if (rows == 0 || cols == 0) return;
  do_copy_block(src, sr0, sc0, dst, dr0, dc0, rows, cols);
}

void Backend::gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b, double beta,
                   Tensor& c) const {
  require_operand(a, "gemm A");
  require_operand(b, "gemm B");
  require_operand(c, "gemm C");
  require_same_dtype(a, b, "gemm");
  require_accumulator_dtype(a, c, "gemm");
  const std::int64_t m = transpose_a ? a.cols() : a.rows(), k = transpose_a ? a.rows() : a.cols();
  const std::int64_t kb = transpose_b ? b.cols() : b.rows(), n = transpose_b ? b.rows() : b.cols();
  require(k == kb && c.rows() == m && c.cols() == n, "gemm shapes do not chain: op(A) is ", m, "x", k, ", op(B) is ",
          kb, "x", n, ", C is ", c.rows(), "x", c.cols());
  require(!partially_overlap(a, c) && !partially_overlap(b, c) && a.raw_data() != c.raw_data() &&
              b.raw_data() != c.raw_data(),
          "gemm: C must not share memory with A or B");
  do_gemm(transpose_a, transpose_b, alpha, a, b, beta, c);
}

void Backend::axpy(double alpha, const Tensor& x, Tensor& y) const {
  require_operand(x, "axpy x");
  require_operand(y, "axpy y");
  require_accumulator_dtype(x, y, "axpy");
  require(x.numel() == y.numel(), "axpy of ", shape_string(x.shape()), " into ", shape_string(y.shape()));
  do_axpy(alpha, x, y);
}

void Backend::scale(Tensor& x, double alpha) const {
  require_operand(x, "scale target");
  do_scale(x, alpha);
}

void Backend::add_row_vector(Tensor& y, const Tensor& row) const {
  require_operand(y, "add_row_vector target");
  require_operand(row, "add_row_vector row");
  require_same_dtype(y, row, "add_row_vector");
  require(row.numel() == y.cols(), "add_row_vector: row of ", row.numel(), " elements for ", y.cols(), " columns");
  do_add_row_vector(y, row);
}

void Backend::column_sums(const Tensor& x, Tensor& out, double beta) const {
  require_operand(x, "column_sums source");
  require_operand(out, "column_sums target");
  require_accumulator_dtype(x, out, "column_sums");
  require(out.numel() == x.cols(), "column_sums: ", out.numel(), " outputs for ", x.cols(), " columns");
  do_column_sums(x, out, beta);
}

double Backend::sum_squares(const Tensor& x) const {
  require_operand(x, "sum_squares source");
  return do_sum_squares(x);
}

void Backend::gelu_forward(const Tensor& x, Tensor& y) const {
  require_operand(x, "gelu x");
  require_operand(y, "gelu y");
  require_same_dtype(x, y, "gelu");
  require(x.numel() == y.numel(), "gelu: output shape ", shape_string(y.shape()), " for input ",
          shape_string(x.shape()));
  do_gelu_forward(x, y);
}

void Backend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  require_operand(x, "gelu x");
  require_operand(dy, "gelu dy");
  require_operand(dx, "gelu dx");
  require_same_dtype(x, dy, "gelu_backward");
  require_same_dtype(x, dx, "gelu_backward");
  require(x.numel() == dy.numel() && x.numel() == dx.numel(), "gelu_backward: x ", shape_string(x.shape()), ", dy ",
          shape_string(dy.shape()), " and dx ", shape_string(dx.shape()), " differ in size");
  do_gelu_backward(x, dy, dx);
}

void Backend::row_mean_m2(const Tensor& x, Tensor& stats) const {
  require_operand(x, "row_mean_m2 source");
  require_operand(stats, "row_mean_m2 statistics");
  require_stats(stats, x.rows(), "row_mean_m2 statistics");
  do_row_mean_m2(x, stats);
}

void Backend::merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                              Tensor& mean_rstd, bool centred) const {
  require(parts >= 1 && count_per_part >= 1, "merge_row_stats needs parts >= 1 and count_per_part >= 1; got parts=",
          parts, ", count_per_part=", count_per_part);
  require_operand(stacked, "merge_row_stats stacked input");
  require_operand(mean_rstd, "merge_row_stats output");
  require_stats(mean_rstd, mean_rstd.rows(), "merge_row_stats output");
  require_stats(stacked, mean_rstd.rows() * parts, "merge_row_stats stacked input");
  do_merge_row_stats(stacked, parts, count_per_part, eps, mean_rstd, centred);
}

void Backend::layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma, const Tensor& beta,
                              Tensor& xhat, Tensor& y) const {
  for (auto [t, what] : {std::pair{&x, "layernorm_apply x"}, std::pair{&gamma, "layernorm_apply gamma"},
                         std::pair{&beta, "layernorm_apply beta"}, std::pair{static_cast<const Tensor*>(&xhat), "layernorm_apply xhat"},
                         std::pair{static_cast<const Tensor*>(&y), "layernorm_apply y"}}) {
    require_operand(*t, what);
    require_same_dtype(x, *t, "layernorm_apply");
  }
  require_operand(mean_rstd, "layernorm_apply mean_rstd");
  require_stats(mean_rstd, x.rows(), "layernorm_apply mean_rstd");
  require(gamma.numel() == x.cols() && beta.numel() == x.cols(), "layernorm_apply: gamma/beta of ", gamma.numel(),
          "/", beta.numel(), " elements for ", x.cols(), " columns");
  require_numel(xhat, x.numel(), "layernorm_apply xhat");
  require_numel(y, x.numel(), "layernorm_apply y");
  do_layernorm_apply(x, mean_rstd, gamma, beta, xhat, y);
}

void Backend::layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, Tensor& sums,
                                      bool centred) const {
  for (auto [t, what] : {std::pair{&dy, "layernorm_backward_sums dy"}, std::pair{&xhat, "layernorm_backward_sums xhat"},
                         std::pair{&gamma, "layernorm_backward_sums gamma"}}) {
    require_operand(*t, what);
    require_same_dtype(dy, *t, "layernorm_backward_sums");
  }
  require_numel(xhat, dy.numel(), "layernorm_backward_sums xhat");
  require_numel(gamma, dy.cols(), "layernorm_backward_sums gamma");
  require_operand(sums, "layernorm_backward_sums sums");
  require_stats(sums, dy.rows(), "layernorm_backward_sums sums");
  do_layernorm_backward_sums(dy, xhat, gamma, sums, centred);
}

void Backend::layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                                 const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma, Tensor& dbeta) const {
  for (auto [t, what] : {std::pair{&dy, "layernorm_backward dy"}, std::pair{&xhat, "layernorm_backward xhat"},
                         std::pair{&gamma, "layernorm_backward gamma"},
                         std::pair{static_cast<const Tensor*>(&dx), "layernorm_backward dx"}}) {
    require_operand(*t, what);
    require_same_dtype(dy, *t, "layernorm_backward");
  }
  require_operand(dgamma, "layernorm_backward dgamma");
  require_operand(dbeta, "layernorm_backward dbeta");
  require_accumulator_dtype(dy, dgamma, "layernorm_backward dgamma");
  require_same_dtype(dgamma, dbeta, "layernorm_backward dgamma/dbeta");
  require(n >= 1, "layernorm_backward needs the full row length n >= 1; got n=", n);
  require_numel(xhat, dy.numel(), "layernorm_backward xhat");
  require_numel(dx, dy.numel(), "layernorm_backward dx");
  for (const Tensor* t : {&gamma, static_cast<const Tensor*>(&dgamma), static_cast<const Tensor*>(&dbeta)})
    require_numel(*t, dy.cols(), "layernorm_backward gamma/dgamma/dbeta");
  require_operand(mean_rstd, "layernorm_backward mean_rstd");
  require_stats(mean_rstd, dy.rows(), "layernorm_backward mean_rstd");
  require_operand(sums, "layernorm_backward sums");
  require_stats(sums, dy.rows(), "layernorm_backward sums");
  require(dx.numel() == 0 || (!partially_overlap(dx, dy) && dx.raw_data() != dy.raw_data()),
          "layernorm_backward: dx must not alias dy (dgamma and dbeta are summed from dy)");
  do_layernorm_backward(dy, xhat, gamma, mean_rstd, sums, n, dx, dgamma, dbeta);
}

void Backend::adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const {
  for (auto [t, what] : {std::pair{static_cast<const Tensor*>(&param), "adamw parameter"}, std::pair{&grad, "adamw gradient"},
                         std::pair{static_cast<const Tensor*>(&m), "adamw first moment"},
                         std::pair{static_cast<const Tensor*>(&v), "adamw second moment"}}) {
    require_operand(*t, what);
    require_same_dtype(param, *t, "adamw_update");
    require(t->numel() == param.numel(), "adamw_update: ", what, " has shape ", shape_string(t->shape()),
            " for a parameter of shape ", shape_string(param.shape()));
  }
  // A 16-bit second moment underflows (g² of a 1e-4 gradient is below f16's smallest normal);
  // 16-bit parameters need f32 master weights and moments, which this same-dtype update is not.
  require(param.dtype() == DType::f32 || param.dtype() == DType::f64, "adamw_update keeps the moments in the ",
          "parameter's dtype and needs f32 or f64; got ", dtype_name(param.dtype()),
          " (16-bit parameters need f32 master weights and moments)");
  require(step.step >= 1, "adamw_update: step counts from 1; got ", step.step);
  do_adamw_update(param, grad, m, v, step);
}

}  // namespace mdtp
