// The streaming kernels of a GPT training step through CudaBackend (and train_ops), each against
// the bare device-to-device cudaMemcpyAsync of the same bytes on the same stream: the copy is the
// rate a kernel that only moves its bytes could reach, so the ratio is how much of the memory
// system each kernel uses.  The step model charges these kernels their bytes at the cluster's
// streaming efficiency (docs/performance-model.md); this benchmark measures what mdtp's own
// kernels reach, at a transformer layer's shapes.
//
//   bench_kernels_cuda [--tokens 8192] [--hidden 1024] [--heads 16] [--seq 1024] [--vocab 50304]
//                      [--dtype bf16|f32] [--iters 20]
//
// Bytes are the fewest each op must move (every input read once, every output written once);
// the causal softmax counts its whole T x T rows, as it reads the unmasked part and writes all.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/train_ops.hpp"
#include "gpu/event_timer.hpp"
#include "gpu/gpu_presence.hpp"

using namespace mdtp;
using mdtp::gpu_test::time_per_call;

namespace {

struct Options {
  std::int64_t tokens = 8192, hidden = 1024, heads = 16, seq = 1024, vocab = 50304;
  std::string dtype = "bf16";
  int iters = 20;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_kernels_cuda: %s\nusage: bench_kernels_cuda [--tokens N] [--hidden H] [--heads NH] [--seq T] "
               "[--vocab V] [--dtype bf16|f32] [--iters N]\n",
               why.c_str());
  std::exit(2);
}

std::int64_t positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) usage(std::string(flag) + " expects a positive integer, got '" + text + "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage("missing value after " + arg);
    const char* v = argv[++i];
    if (arg == "--tokens") o.tokens = positive("--tokens", v);
    else if (arg == "--hidden") o.hidden = positive("--hidden", v);
    else if (arg == "--heads") o.heads = positive("--heads", v);
    else if (arg == "--seq") o.seq = positive("--seq", v);
    else if (arg == "--vocab") o.vocab = positive("--vocab", v);
    else if (arg == "--iters") o.iters = static_cast<int>(positive("--iters", v));
    else if (arg == "--dtype") o.dtype = v;
    else usage("unknown argument " + arg);
  }
  if (o.dtype != "bf16" && o.dtype != "f32") usage("--dtype expects bf16 or f32, got '" + o.dtype + "'");
  if (o.tokens % o.seq != 0) usage("--tokens must be a multiple of --seq");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  mdtp::gpu_test::exit_unless_gpu("bench_kernels_cuda");
  const DType dt = o.dtype == "bf16" ? DType::bf16 : DType::f32;
  const double es = static_cast<double>(dtype_size(dt));
  const DType grad_dt = DType::f32;  // gradients of 16-bit data are kept in f32, as mdtp train keeps them
  auto backend = make_cuda_backend();
  const CudaBackend& be = *backend;
  const cudaStream_t stream = be.stream();
  cudaDeviceProp props{};
  MDTP_CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
  const std::int64_t N = o.tokens, H = o.hidden, F = 4 * o.hidden, T = o.seq, V = o.vocab;
  const std::int64_t score_rows = (N / T) * o.heads * T;
  std::printf("device: %s; %s, %lld tokens, hidden %lld, %lld heads, seq %lld, vocab %lld; %d iterations per op\n",
              props.name, o.dtype.c_str(), static_cast<long long>(N), static_cast<long long>(H),
              static_cast<long long>(o.heads), static_cast<long long>(T), static_cast<long long>(V), o.iters);

  const auto act = [&](std::int64_t rows, std::int64_t cols, double value, DType t) {
    Tensor x = be.empty({rows, cols}, t, MemCategory::activations);
    be.fill(x, value);
    return x;
  };
  // Inputs of varied values where the op cares (softmax, LayerNorm, cross-entropy): a ramp per row.
  const auto ramp = [&](std::int64_t rows, std::int64_t cols) {
    std::vector<double> row(static_cast<std::size_t>(cols));
    for (std::int64_t j = 0; j < cols; ++j) row[static_cast<std::size_t>(j)] = 0.001 * static_cast<double>(j % 977) - 0.4;
    Tensor one = be.from_f64(row, {1, cols}, dt, MemCategory::activations);
    Tensor x = be.empty({rows, cols}, dt, MemCategory::activations);
    be.fill(x, 0.0);
    be.add_row_vector(x, one);
    return x;
  };

  // The peer: a device-to-device copy of `bytes` (half read, half written).
  const auto copy_seconds = [&](double bytes) {
    const std::size_t each = static_cast<std::size_t>(bytes / 2);
    void* a = nullptr;
    void* b = nullptr;
    MDTP_CUDA_CHECK(cudaMalloc(&a, each));
    MDTP_CUDA_CHECK(cudaMalloc(&b, each));
    MDTP_CUDA_CHECK(cudaMemsetAsync(a, 0, each, stream));
    const double t = time_per_call(stream, o.iters, [&] { MDTP_CUDA_CHECK(cudaMemcpyAsync(b, a, each, cudaMemcpyDeviceToDevice, stream)); });
    cudaFree(a);
    cudaFree(b);
    return t;
  };

  std::printf("%-34s %10s %10s %10s %12s %7s\n", "op [shape]", "MB moved", "ms", "GB/s", "copy GB/s", "ratio");
  double total_kernel = 0.0, total_copy = 0.0;
  const auto report = [&](const std::string& name, double bytes, const std::function<void()>& op) {
    const double t = time_per_call(stream, o.iters, op);
    const double tc = copy_seconds(bytes);
    total_kernel += t;
    total_copy += tc;
    std::printf("%-34s %10.1f %10.4f %10.1f %12.1f %7.3f\n", name.c_str(), bytes * 1e-6, t * 1e3, bytes / t * 1e-9,
                bytes / tc * 1e-9, tc / t);
  };
  const auto shape = [](std::int64_t r, std::int64_t c) { return "[" + std::to_string(r) + "x" + std::to_string(c) + "]"; };
  const double nF = static_cast<double>(N * F), nH = static_cast<double>(N * H);

  {  // the MLP's elementwise ops on [N, 4H]
    Tensor x = ramp(N, F), y = act(N, F, 0.0, dt), dy = act(N, F, 0.5, dt), dx = act(N, F, 0.0, dt);
    Tensor bias = be.from_f64(std::vector<double>(static_cast<std::size_t>(F), 0.1), {F}, dt, MemCategory::parameters);
    Tensor dbias = act(1, F, 0.0, grad_dt).reshaped({F});
    report("gelu_forward " + shape(N, F), 2 * nF * es, [&] { be.gelu_forward(x, y); });
    report("gelu_backward " + shape(N, F), 3 * nF * es, [&] { be.gelu_backward(x, dy, dx); });
    report("add_row_vector (bias) " + shape(N, F), 2 * nF * es, [&] { be.add_row_vector(y, bias); });
    report("column_sums (bias grad) " + shape(N, F), nF * es, [&] { be.column_sums(dy, dbias, 1.0); });
    report("axpy (residual) " + shape(N, F), 3 * nF * es, [&] { be.axpy(1.0, dy, y); });
  }
  {  // LayerNorm on [N, H]: statistics, apply (x̂ and y), backward sums, dx and the parameter gradients
    Tensor x = ramp(N, H), xhat = act(N, H, 0.0, dt), y = act(N, H, 0.0, dt), dy = ramp(N, H), dx = act(N, H, 0.0, dt);
    Tensor gamma = be.from_f64(std::vector<double>(static_cast<std::size_t>(H), 1.1), {H}, dt, MemCategory::parameters);
    Tensor beta = be.from_f64(std::vector<double>(static_cast<std::size_t>(H), 0.1), {H}, dt, MemCategory::parameters);
    Tensor dgamma = act(1, H, 0.0, grad_dt).reshaped({H}), dbeta = act(1, H, 0.0, grad_dt).reshaped({H});
    Tensor stats = act(N, 2, 0.0, DType::f64), mean_rstd = act(N, 2, 0.0, DType::f64), sums = act(N, 2, 0.0, DType::f64);
    report("layernorm forward " + shape(N, H), 3 * nH * es, [&] {
      be.row_mean_m2(x, stats);
      be.merge_row_stats(stats, 1, H, 1e-5, mean_rstd);
      be.layernorm_apply(x, mean_rstd, gamma, beta, xhat, y);
    });
    report("layernorm backward " + shape(N, H), 3 * nH * es, [&] {
      be.layernorm_backward_sums(dy, xhat, gamma, sums);
      be.layernorm_backward(dy, xhat, gamma, mean_rstd, sums, H, dx, dgamma, dbeta);
    });
  }
  {  // attention's causal softmax over [sequences x heads x T, T] and its backward
    Tensor s = ramp(score_rows, T), p = act(score_rows, T, 0.0, dt), dp = ramp(score_rows, T);
    const double n = static_cast<double>(score_rows * T);
    report("softmax causal " + shape(score_rows, T), 2 * n * es, [&] { softmax_rows(be, s, p, true); });
    report("softmax backward " + shape(score_rows, T), 3 * n * es, [&] { softmax_rows_backward(be, p, dp, dp); });
  }
  {  // cross-entropy as the GPT model computes it (GptKernels' vocabulary-parallel pieces, statistics in
     // f64): forward = row maxima + the sums of exponentials, backward reads the logits and writes dlogits
    const std::unique_ptr<GptKernels> gpt = make_cuda_gpt_kernels(be);
    Tensor logits = ramp(N, V), dlogits = act(N, V, 0.0, dt);
    Tensor row_max = act(N, 1, 0.0, DType::f64).reshaped({N}), sums = act(N, 2, 0.0, DType::f64);
    Tensor lse = act(N, 1, 0.0, DType::f64).reshaped({N});
    std::vector<std::int32_t> targets(static_cast<std::size_t>(N));
    for (std::int64_t i = 0; i < N; ++i) targets[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % V);
    be.fill(lse, 11.0);
    const double n = static_cast<double>(N * V);
    report("cross_entropy forward " + shape(N, V), n * es, [&] {
      gpt->xent_row_max(logits, V, row_max);
      gpt->xent_partial_sums(logits, V, row_max, targets, 0, sums);
    });
    report("cross_entropy backward " + shape(N, V), 2 * n * es,
           [&] { gpt->xent_backward(logits, V, lse, targets, 0, 1.0 / static_cast<double>(N), dlogits); });
  }
  {  // AdamW over one layer's worth of parameters (12 H²): bf16 parameters with f32 master, m, v
    const std::int64_t P = 12 * H * H;
    Tensor param = act(P, 1, 0.01, dt).reshaped({P}), grad = act(P, 1, 1e-3, grad_dt).reshaped({P});
    Tensor master = act(P, 1, 0.01, DType::f32).reshaped({P}), m = act(P, 1, 0.0, DType::f32).reshaped({P});
    Tensor v = act(P, 1, 0.0, DType::f32).reshaped({P});
    Tensor no_master;
    const bool mixed = dt != DType::f32;
    // Read: gradient, master (or the f32 parameter), m, v; written: master, m, v, and the bf16 copy.
    const double bytes = static_cast<double>(P) * (mixed ? 4.0 * 7 + 2.0 : 4.0 * 6);
    AdamWStep step;
    report("adamw " + std::to_string(P) + " params", bytes,
           [&] { adamw_update(be, param, grad, mixed ? master : no_master, m, v, step); });
  }
  std::printf("all ops: %.3f ms against %.3f ms of copies moving the same bytes: %.3f of the copy rate\n",
              total_kernel * 1e3, total_copy * 1e3, total_copy / total_kernel);
  return 0;
}
