#include "model/activation_timeline.hpp"

#include <algorithm>

namespace mdtp {
namespace {

// The counter: what is allocated now and the most it reached.
struct Counter {
  std::int64_t now = 0, peak = 0;
  void alloc(std::int64_t bytes) {
    now += bytes;
    peak = std::max(peak, now);
  }
  void free(std::int64_t bytes) { now -= bytes; }
  void restart() { peak = now; }
};

// One micro-batch's passes, each method the allocations and releases of the code it is named
// after (model/*.cpp, tp/*.cpp, tp1d, tp2d, tp3d), in their order.
class Replay {
 public:
  Replay(const ActivationShapes& a, std::int64_t n_layer, KeepPolicy policy)
      : a_(a), s_(tensor_bytes(a)), layers_(n_layer), policy_(policy) {}
  Counter c;
  const ActivationTensorBytes& sizes() const { return s_; }

  // ---- forward ------------------------------------------------------------------------------------
  // ModelChunk::forward of the whole model: embedding, blocks, ln_f and the head.
  void forward() {
    const bool full = policy_.block_input_only;
    embedding_forward();  // x in hand
    for (std::int64_t u = 0; u < layers_; ++u) {
      block_forward(full || policy_.attention_probabilities);
      // Full recomputation keeps the input and discards the filled context; otherwise the old x
      // goes with its last holder, the caller.
      c.free(full ? block_context_bytes(s_, true) : s_.E_r);
    }
    layernorm_forward();  // ln_f
    head_forward();
    if (a_.row_parts > 1) c.free(s_.E_r);  // ln_f's output, a temporary once G is gathered
    c.free(s_.E_r);                        // the last block's output
  }

  // ---- backward-input -----------------------------------------------------------------------------
  // TiedLmHead::backward_input, then ln_f's; leaves dX (E_r) in the caller's hand.
  void head_backward() {
    c.alloc(s_.logits);          // dlogits
    c.free(s_.logits);           // the logits
    c.free(s_.lse);              // the log-sum-exp
    if (a_.col_parts > 1) c.alloc(s_.dp);  // dP gathered over the logits' rows, kept
    c.alloc(s_.G);                          // dG
    std::int64_t out = s_.G;
    if (a_.vocab_parts > 1 && a_.row_parts > 1) {
      c.alloc(s_.E_r);  // dX reduce-scattered over the rows
      c.free(s_.G);
      out = s_.E_r;
    }
    if (a_.col_parts > 1) c.free(s_.logits);  // dlogits, gathered into dP
    layernorm_backward();                     // ln_f
    c.free(out);                              // the head's dX, a temporary once ln_f has used it
  }
  // TransformerBlock::backward_input with dY in the caller's hand; then the caller lets dY go
  // unless fc2 keeps it.  Under full recomputation the block's forward runs again first, from its
  // kept input.
  void block_backward() {
    const auto& l = a_.linear_allocs;
    if (policy_.block_input_only) {
      block_forward(true);
      c.free(s_.E_r);  // the recomputed output, not needed
      c.free(s_.E_r);  // the kept input, released
    }
    // Mlp::backward_input
    linear_input_gradient(l[3], s_.E_h);  // dh, fc2's dX
    c.alloc(s_.E_f);                      // dpre, the activation's input gradient
    c.free(s_.E_f);                       // fc1's output (the activation's input)
    linear_input_gradient(l[2], s_.E_r);  // fc1's dX
    c.free(s_.E_h);                       // dh
    if (!l[2].keeps_dy) c.free(s_.E_f);   // dpre, unless fc1 keeps it as its dY
    layernorm_backward();                 // ln_2
    c.free(s_.E_r);                       // the MLP's dX, a temporary
    // CausalSelfAttention::backward_input, with dh = dY + ln_2's dX in hand
    linear_input_gradient(l[1], s_.E_y);  // dattn, c_proj's dX
    if (!policy_.block_input_only && !policy_.attention_probabilities) {
      c.alloc(s_.E_y);    // selective: the core's output again, dropped
      c.alloc(s_.probs);  // and the probabilities again
      c.free(s_.E_y);
    }
    c.alloc(s_.E_qkv);                     // dQKV
    c.free(s_.E_qkv);                      // QKV
    c.free(s_.probs);
    linear_input_gradient(l[0], s_.E_r);   // c_attn's dX
    c.free(s_.E_y);                        // dattn
    if (!l[0].keeps_dy) c.free(s_.E_qkv);  // dQKV, unless c_attn keeps it as its dY
    layernorm_backward();                  // ln_1
    c.free(s_.E_r);                        // the attention's dX, a temporary
    if (!l[1].keeps_dy) c.free(s_.E_r);    // dh, unless c_proj keeps it
    if (!l[3].keeps_dy) c.free(s_.E_r);    // the caller's dY, unless fc2 keeps it
  }

  // ---- what the weight passes release --------------------------------------------------------------
  std::int64_t head_after_input() const { return s_.dp + s_.G; }  // dP (dlogits itself without a row split) and G
  // Each Linear's input and, where it keeps it, its dY.
  std::int64_t block_after_input() const {
    const auto& l = a_.linear_allocs;
    auto dy = [&](std::size_t i, std::int64_t bytes) { return l[i].keeps_dy ? bytes : 0; };
    return (s_.E_r + dy(0, s_.E_qkv)) + (s_.E_y + dy(1, s_.E_r)) + (s_.E_r + dy(2, s_.E_f)) + (s_.E_h + dy(3, s_.E_r));
  }

 private:
  // GptEmbedding::forward: the partial lookup, the rows reduce-scattered where the vocabulary and
  // the rows are both split, the positions (GPT-2); returns x (E_r) to the caller.
  void embedding_forward() {
    const std::int64_t lookup = a_.tokens * a_.residual_cols * a_.dtype_bytes;  // every token's row
    c.alloc(lookup);
    const bool scattered = a_.vocab_parts > 1 && a_.row_parts > 1;
    if (scattered) c.alloc(s_.E_r);
    if (a_.position_rows) {
      c.alloc(s_.E_r);  // the positions' rows
      c.free(s_.E_r);
    }
    if (scattered) c.free(lookup);
  }
  // LayerNorm::forward: its local statistics, the kept (mean, rstd) and x̂, the output.
  void layernorm_forward() {
    c.alloc(s_.stats);
    c.alloc(s_.stats);
    c.alloc(s_.E_r);
    c.alloc(s_.E_r);
    c.free(s_.stats);
  }
  // LayerNorm::backward_input with dY in hand: the sums and dX (an RMSNorm also a scratch row for
  // the dβ it has no parameter for, dropped at once); x̂, (mean, rstd) and the sums released.
  void layernorm_backward() {
    c.alloc(s_.stats);
    c.alloc(s_.E_r);
    c.alloc(s_.norm_scratch);
    c.free(s_.norm_scratch);
    c.free(s_.E_r);
    c.free(s_.stats);
    c.free(s_.stats);
  }
  // LinearBase::forward of a Linear whose Y has `bytes`.
  void linear_forward(const LinearActivationAllocs& l, std::int64_t bytes) {
    c.alloc(l.forward_partial_bytes);
    c.alloc(bytes);
    c.free(l.forward_partial_bytes);
  }
  // LinearBase::backward_input of a Linear whose dX has `bytes`.
  void linear_input_gradient(const LinearActivationAllocs& l, std::int64_t bytes) {
    c.alloc(l.input_grad_partial_bytes);
    c.alloc(bytes);
    c.free(l.input_grad_partial_bytes);
  }
  // TransformerBlock::forward with x in the caller's hand.
  void block_forward(bool keep_probabilities) {
    const auto& l = a_.linear_allocs;
    layernorm_forward();             // ln_1: its output is c_attn's kept input
    linear_forward(l[0], s_.E_qkv);  // QKV, kept
    c.alloc(s_.E_y);                 // the attention output, c_proj's kept input
    c.alloc(s_.probs);
    if (!keep_probabilities) c.free(s_.probs);
    linear_forward(l[1], s_.E_r);    // h = x + attn(…), in hand
    layernorm_forward();             // ln_2
    linear_forward(l[2], s_.E_f);    // fc1's output, kept (the activation's input)
    c.alloc(s_.E_h);                 // the activation's output, kept (fc2's input)
    linear_forward(l[3], s_.E_r);    // out = h + mlp(…), returned
    c.free(s_.E_r);                  // h goes with the block's frame
  }
  // TiedLmHead::forward after ln_f: G gathered over the rows (without a row split G is ln_f's
  // output), the logits (reduce-scattered over their rows where split), the row maxima, the
  // partial sums and the kept log-sum-exp.
  void head_forward() {
    if (a_.row_parts > 1) c.alloc(s_.G);
    c.alloc(s_.dp);  // the logits of every token row (as many bytes as dP)
    if (a_.col_parts > 1) c.alloc(s_.logits);  // this rank's rows of them, reduce-scattered
    c.alloc(s_.lse);      // row maxima (f64, as the log-sum-exp)
    c.alloc(2 * s_.lse);  // partial sums
    c.alloc(s_.lse);      // the log-sum-exp
    c.free(2 * s_.lse);
    c.free(s_.lse);
    if (a_.col_parts > 1) c.free(s_.dp);
  }

  const ActivationShapes& a_;
  ActivationTensorBytes s_;
  std::int64_t layers_;
  KeepPolicy policy_;
};

}  // namespace

MicroBatchActivationPeaks micro_batch_activation_peaks(const ActivationShapes& shapes, std::int64_t n_layer,
                                                       KeepPolicy policy) {
  Replay r(shapes, n_layer, policy);
  MicroBatchActivationPeaks out;
  r.forward();
  out.forward_peak = r.c.peak;
  out.after_forward = r.c.now;

  // Backward-input over every unit (a split B, as zero-bubble schedules run it): each unit's
  // context turns into its after-input state and waits for its weight pass.  The embedding keeps
  // the dX it is given.
  r.c.restart();
  r.head_backward();
  for (std::int64_t u = n_layer; u >= 1; --u) r.block_backward();
  out.input_peak = r.c.peak;
  out.after_input = r.c.now;

  // Unit by unit, B then W (the fused backward of a stage's first chunk): each weight pass
  // releases its unit's after-input context before the next unit's backward-input.
  r.c.now = out.after_forward;
  r.c.restart();
  r.head_backward();
  r.c.free(r.head_after_input());
  for (std::int64_t u = n_layer; u >= 1; --u) {
    r.block_backward();
    r.c.free(r.block_after_input());
  }
  r.c.free(r.sizes().E_r);  // the embedding's dX, released by its weight pass
  out.fused_peak = r.c.peak;
  return out;
}

}  // namespace mdtp
