// The validating front of GptKernels (the shape rules every implementation relies on).
#include "model/gpt_kernels.hpp"

namespace mdtp {
namespace {

void require_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  require(a.dtype() == b.dtype(), what, ": mixed dtypes ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

void check_embedding(const Tensor& table, std::size_t ids, const Tensor& rows_tensor, const char* op) {
  require(table.ndim() == 2, op, ": the table must be 2-D; got shape ", shape_string(table.shape()));
  require(rows_tensor.rows() == static_cast<std::int64_t>(ids) && rows_tensor.cols() == table.cols(), op, ": ", ids,
          " ids need rows of [", ids, ", ", table.cols(), "]; got shape ", shape_string(rows_tensor.shape()));
}

void check_attention(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, const Tensor& y,
                     const Tensor& probs, const char* op) {
  require(seq_len > 0 && n_head > 0, op, ": seq_len and n_head must be positive; got ", seq_len, " and ", n_head);
  require(qkv.rows() % seq_len == 0, op, ": ", qkv.rows(), " rows are not whole sequences of ", seq_len);
  require(y.rows() == qkv.rows() && y.cols() > 0 && y.cols() % n_head == 0, op, ": output shape ",
          shape_string(y.shape()), "; expected [", qkv.rows(), ", n_head·d] with n_head=", n_head);
  const std::int64_t d = y.cols() / n_head, kv_width = (qkv.cols() - y.cols()) / 2;
  require(qkv.cols() > y.cols() && (qkv.cols() - y.cols()) % 2 == 0 && kv_width % d == 0 &&
              n_head % (kv_width / d) == 0,
          op, ": qkv has ", qkv.cols(), " columns; expected (n_head + 2·kv)·d with d=", d, " and kv dividing n_head=",
          n_head);
  const std::int64_t probs_numel = qkv.rows() / seq_len * n_head * seq_len * seq_len;
  require(probs.numel() == probs_numel, op, ": probs has ", probs.numel(),
          " elements; expected sequences·n_head·seq_len² = ", probs_numel);
  require(qkv.dtype() == y.dtype() && qkv.dtype() == probs.dtype(), op, ": qkv, y and probs must share a dtype; got ",
          dtype_name(qkv.dtype()), ", ", dtype_name(y.dtype()), " and ", dtype_name(probs.dtype()));
}

void check_xent(const Tensor& logits, std::int64_t valid_cols, std::size_t targets, const Tensor& stats,
                std::int64_t stats_cols, const char* op) {
  require(valid_cols >= 0 && valid_cols <= logits.cols(), op, ": valid_cols=", valid_cols, " outside [0, ",
          logits.cols(), "]");
  require(static_cast<std::int64_t>(targets) == logits.rows() || targets == 0, op, ": ", targets, " targets for ",
          logits.rows(), " rows");
  require(stats.dtype() == DType::f64 && stats.numel() == logits.rows() * stats_cols, op,
          ": statistics must be f64 with ", logits.rows() * stats_cols, " elements; got ", dtype_name(stats.dtype()),
          " ", shape_string(stats.shape()));
}

}  // namespace

void GptKernels::embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                                   Tensor& out) const {
  backend_.require_operand(table, "embedding table");
  backend_.require_operand(out, "embedding output");
  check_embedding(table, ids.size(), out, "embedding_forward");
  require_same_dtype(table, out, "embedding_forward");
  do_embedding_forward(table, ids, first_row, out);
}

void GptKernels::embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                                    Tensor& table_grad) const {
  backend_.require_operand(dy, "embedding output gradient");
  backend_.require_operand(table_grad, "embedding table gradient");
  check_embedding(table_grad, ids.size(), dy, "embedding_backward");
  // The gradient may be kept in f32 for 16-bit activations (the Backend's accumulator rule).
  require(table_grad.dtype() == dy.dtype() || (is_16bit(dy.dtype()) && table_grad.dtype() == DType::f32),
          "embedding_backward: mixed dtypes ", dtype_name(dy.dtype()), " and ", dtype_name(table_grad.dtype()),
          " (the table gradient may be f32 for bf16/f16 data, else it is the data's dtype)");
  do_embedding_backward(dy, ids, first_row, table_grad);
}

void GptKernels::attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                                   Tensor& probs) const {
  backend_.require_operand(qkv, "attention qkv");
  backend_.require_operand(y, "attention output");
  backend_.require_operand(probs, "attention probabilities");
  check_attention(qkv, seq_len, n_head, y, probs, "attention_forward");
  do_attention_forward(qkv, seq_len, n_head, y, probs);
}

void GptKernels::attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                                    std::int64_t n_head, Tensor& dqkv) const {
  backend_.require_operand(dy, "attention output gradient");
  backend_.require_operand(qkv, "attention qkv");
  backend_.require_operand(probs, "attention probabilities");
  backend_.require_operand(dqkv, "attention qkv gradient");
  check_attention(qkv, seq_len, n_head, dy, probs, "attention_backward");
  require(dqkv.shape() == qkv.shape() && dqkv.dtype() == qkv.dtype(), "attention_backward: dqkv has shape ",
          shape_string(dqkv.shape()), " of ", dtype_name(dqkv.dtype()), "; expected ", shape_string(qkv.shape()),
          " of ", dtype_name(qkv.dtype()));
  do_attention_backward(dy, qkv, probs, seq_len, n_head, dqkv);
}

void GptKernels::rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads, double theta,
                      bool inverse) const {
  backend_.require_operand(qkv, "rope qkv");
  require(seq_len > 0 && n_head > 0 && kv_heads > 0 && n_head % kv_heads == 0 && theta > 0, "rope: seq_len=", seq_len,
          ", n_head=", n_head, ", kv_heads=", kv_heads, " (dividing n_head) and theta=", theta, " must be positive");
  require(qkv.ndim() == 2 && qkv.rows() % seq_len == 0, "rope: qkv ", shape_string(qkv.shape()),
          " is not whole sequences of ", seq_len);
  const std::int64_t heads = n_head + 2 * kv_heads;
  require(qkv.cols() % heads == 0 && (qkv.cols() / heads) % 2 == 0, "rope: qkv has ", qkv.cols(),
          " columns; expected (n_head + 2·kv_heads)·d = ", heads, "·d with an even d");
  do_rope(qkv, seq_len, n_head, kv_heads, theta, inverse);
}

void GptKernels::swiglu_forward(const Tensor& gate_up, Tensor& y) const {
  backend_.require_operand(gate_up, "swiglu gate_up");
  backend_.require_operand(y, "swiglu output");
  require_same_dtype(gate_up, y, "swiglu_forward");
  require(gate_up.ndim() == 2 && y.ndim() == 2 && gate_up.rows() == y.rows() && gate_up.cols() == 2 * y.cols(),
          "swiglu_forward: gate_up ", shape_string(gate_up.shape()), " must be [N, 2c] for y ", shape_string(y.shape()));
  do_swiglu_forward(gate_up, y);
}

void GptKernels::swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const {
  backend_.require_operand(gate_up, "swiglu gate_up");
  backend_.require_operand(dy, "swiglu output gradient");
  backend_.require_operand(dgate_up, "swiglu gate_up gradient");
  require_same_dtype(gate_up, dy, "swiglu_backward");
  require_same_dtype(gate_up, dgate_up, "swiglu_backward");
  require(gate_up.ndim() == 2 && dy.ndim() == 2 && gate_up.rows() == dy.rows() && gate_up.cols() == 2 * dy.cols() &&
              dgate_up.shape() == gate_up.shape(),
          "swiglu_backward: gate_up ", shape_string(gate_up.shape()), ", dy ", shape_string(dy.shape()), " and dgate_up ",
          shape_string(dgate_up.shape()), " must be [N, 2c], [N, c] and [N, 2c]");
  do_swiglu_backward(gate_up, dy, dgate_up);
}

void GptKernels::xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const {
  backend_.require_operand(logits, "cross-entropy logits");
  backend_.require_operand(row_max, "cross-entropy row maxima");
  check_xent(logits, valid_cols, 0, row_max, 1, "xent_row_max");
  do_xent_row_max(logits, valid_cols, row_max);
}

void GptKernels::xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                   std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const {
  backend_.require_operand(logits, "cross-entropy logits");
  backend_.require_operand(row_max, "cross-entropy row maxima");
  backend_.require_operand(sums, "cross-entropy partial sums");
  check_xent(logits, valid_cols, targets.size(), row_max, 1, "xent_partial_sums");
  check_xent(logits, valid_cols, targets.size(), sums, 2, "xent_partial_sums");
  require(static_cast<std::int64_t>(targets.size()) == logits.rows(), "xent_partial_sums: ", targets.size(),
          " targets for ", logits.rows(), " rows");
  do_xent_partial_sums(logits, valid_cols, row_max, targets, col0, sums);
}

void GptKernels::xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                               std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                               Tensor& dlogits) const {
  backend_.require_operand(logits, "cross-entropy logits");
  backend_.require_operand(lse, "cross-entropy log-sum-exp");
  backend_.require_operand(dlogits, "cross-entropy logit gradient");
  check_xent(logits, valid_cols, targets.size(), lse, 1, "xent_backward");
  require(static_cast<std::int64_t>(targets.size()) == logits.rows(), "xent_backward: ", targets.size(),
          " targets for ", logits.rows(), " rows");
  require_same_dtype(logits, dlogits, "xent_backward");
  require(dlogits.numel() == logits.numel(), "xent_backward: dlogits has shape ", shape_string(dlogits.shape()),
          "; expected ", shape_string(logits.shape()));
  do_xent_backward(logits, valid_cols, lse, targets, col0, scale, dlogits);
}

}  // namespace mdtp
