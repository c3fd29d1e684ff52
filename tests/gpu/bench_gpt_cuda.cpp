// GPT training-step throughput on the CUDA backend: one MPI rank per GPU, device communicators
// over NCCL (MDTP_COMM=mpi selects the staged MPI communicator, for testing only: it is slow).
// A step is zero_gradients + forward_backward + reduce_gradients + AdamW (Optimizer::step), on
// random tokens.  After --warmup steps, --reps steps are timed between device synchronisations
// and an MPI barrier on every rank; the result is the wall time per step.
//
// Printed: tokens/s, the achieved model TFLOP/s (total and per GPU) and the MFU against a peak
// per GPU: --peak-tflops, else measured here with one large cuBLAS GEMM (8192³ through
// CudaBackend::gemm) at the benchmark's dtype.  Model FLOPs per token follow the PaLM / nanoGPT
// convention (no activation recomputation counted):
//     6·N + 12·n_layer·n_embd·seq
// with N every parameter except the position embedding (the tied wte counts once, as the LM head
// GEMM), and 12·L·H·T the attention score and value GEMMs (forward + backward, causal mask not
// discounted).
//
// Dtypes: f32 (default; exact f32 GEMM), tf32 (f32 storage, TF32 tensor-core GEMM: allow_tf32), f64,
// and bf16: mixed precision as mdtp train runs it (bf16 parameters and activations, f32
// gradients, f32 master weights and moments: zero/optimizer.hpp), the peak then bf16's.
//
//   bench_gpt_cuda [--mode none|1d|1d-sp|2d|2.5d|3d] [--tp N] [--depth D] [--layers 12] [--embd 768]
//                  [--heads 12] [--seq 1024] [--vocab 50304] [--batch 8] [--dtype f32|tf32|f64|bf16]
//                  [--warmup 2] [--reps 10] [--peak-tflops X]
// --batch is sequences per data-parallel replica (global batch = batch·dp, dp = ranks / tp).
// Without a GPU it prints "SKIPPED: no GPU available" and exits 77; with a broken CUDA setup it
// fails (gpu_presence.hpp).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/wait_policy.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/device_comm.hpp"
#include "gpu/event_timer.hpp"
#include "gpu/gpu_presence.hpp"
#include "mesh/mesh.hpp"
#include "model/gpt.hpp"
#include "zero/optimizer.hpp"
#include "modes/registry.hpp"
#include "tp/mode.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;

namespace {

struct Options {
  std::string mode = "none";
  int tp = 1;
  int depth = 1;
  ModelShape model{12, 768, 12, 1024, 50304};  // layers, hidden, heads, seq, vocab
  std::int64_t batch = 8;                     // per replica
  std::string dtype = "f32";
  int warmup = 2;
  int reps = 10;
  double peak_tflops = 0.0;  // 0: measure
};

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "bench_gpt_cuda: %s\nusage: bench_gpt_cuda [--mode none|1d|1d-sp|2d|2.5d|3d] [--tp N] [--depth D] "
                 "[--layers L] [--embd H] [--heads NH] [--seq T] [--vocab V] [--batch B_per_replica] "
                 "[--dtype f32|tf32|f64|bf16] [--warmup N] [--reps N] [--peak-tflops X]\n",
                 why.c_str());
  MPI_Finalize();
  std::exit(2);
}

Options parse(int argc, char** argv, int rank) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(rank, "missing value after " + arg);
    const std::string v = argv[++i];
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    const bool integer = end != v.c_str() && *end == '\0';
    auto need_int = [&](long long lo) {
      if (!integer || n < lo) usage(rank, arg + " expects an integer >= " + std::to_string(lo) + "; got " + v);
      return n;
    };
    if (arg == "--mode") o.mode = v;
    else if (arg == "--tp") o.tp = static_cast<int>(need_int(1));
    else if (arg == "--depth") o.depth = static_cast<int>(need_int(1));
    else if (arg == "--layers") o.model.layers = need_int(1);
    else if (arg == "--embd") o.model.hidden = need_int(1);
    else if (arg == "--heads") o.model.heads = need_int(1);
    else if (arg == "--seq") o.model.seq = need_int(1);
    else if (arg == "--vocab") o.model.vocab = need_int(1);
    else if (arg == "--batch") o.batch = need_int(1);
    else if (arg == "--dtype") o.dtype = v;
    else if (arg == "--warmup") o.warmup = static_cast<int>(need_int(0));
    else if (arg == "--reps") o.reps = static_cast<int>(need_int(1));
    else if (arg == "--peak-tflops") {
      o.peak_tflops = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || o.peak_tflops <= 0.0) usage(rank, "--peak-tflops expects a positive number");
    } else usage(rank, "unknown argument " + arg);
  }
  if (o.dtype != "f32" && o.dtype != "tf32" && o.dtype != "f64" && o.dtype != "bf16")
    usage(rank, "--dtype must be f32, tf32, f64 or bf16; got " + o.dtype);
  return o;
}

// Peak of one large GEMM (8192³, C = A·B) through the backend's cuBLAS call, in TFLOP/s.
double measure_gemm_peak(CudaBackend& backend, DType dtype) {
  const std::int64_t n = 8192;
  double tflops = 0.0;
  {
    Tensor a = backend.empty({n, n}, dtype, MemCategory::other);
    Tensor b = backend.empty({n, n}, dtype, MemCategory::other);
    Tensor c = backend.empty({n, n}, dtype, MemCategory::other);
    backend.fill(a, 0.01);
    backend.fill(b, 0.02);
    const double seconds =
        gpu_test::time_per_call(backend.stream(), 10, [&] { backend.gemm(false, false, 1.0, a, b, 0.0, c); });
    tflops = 2.0 * static_cast<double>(n) * n * n / seconds * 1e-12;
  }
  backend.cuda_allocator().release_cached();
  return tflops;
}

int run(const Options& o, int rank, int world) {
  const DType dtype = o.dtype == "f64" ? DType::f64 : o.dtype == "bf16" ? DType::bf16 : DType::f32;
  const DeviceAssignment assignment = select_device_for_local_rank(MPI_COMM_WORLD);
  const WaitPolicy policy = resolve_wait_policy(measure_node_occupancy(MPI_COMM_WORLD));
  const DeviceCommKind kind = resolve_device_comm_kind();
  CudaBackendOptions backend_options;
  backend_options.allow_tf32 = o.dtype == "tf32";
  auto backend = make_cuda_backend(backend_options);

  // The per-GPU peak: given, or the slowest rank's measured GEMM.
  double peak = o.peak_tflops;
  const bool measured = peak <= 0.0;
  if (measured) {
    const double mine = measure_gemm_peak(*backend, dtype);
    MPI_Allreduce(&mine, &peak, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  }

  CommLedger ledger;
  MeshConfig mesh_config;
  mesh_config.world = world;
  mesh_config.tp = o.tp;
  mesh_config.tp_mode = parse_tp_mode(o.mode);
  mesh_config.tp_depth = o.depth;
  // With the mesh's topology, NCCL splits every group from one world communicator, up front.
  const Topology topology(mesh_config);
  DeviceCommFactory factory = make_device_comm_factory(*backend, MPI_COMM_WORLD, kind, policy, nullptr, &topology);
  Mesh mesh(mesh_config, MPI_COMM_WORLD, ledger, factory);
  ledger.set_enabled(false);  // timing only
  // Mixed precision under bf16: gradients (and their sums) in f32, as mdtp train keeps them.
  auto mode = make_tp_mode(mesh_config.tp_mode,
                           TpContext{mesh, *backend, dtype, 1234, {}, false, precision_for(dtype).grad_reduce});
  const int dp = mesh.comm("dp").size();
  const std::unique_ptr<GptKernels> kernels = make_cuda_gpt_kernels(*backend);
  GptModel model(*mode, o.model, o.batch, {}, "dp", kernels.get());
  Optimizer optimizer(OptimizerSpec{}, model.parameters(), mesh, *backend);

  // N: logical parameters (padding rows excluded), without the position embedding.
  std::int64_t n_params = 0, n_wpe = 0;
  for (const ModelParam& p : model.parameters()) {
    const std::int64_t numel = shape_numel(p.checkpoint_shape());
    n_params += numel;
    if (p.name() == "transformer.wpe.weight") n_wpe = numel;
  }
  const std::int64_t n_flop_params = n_params - n_wpe;
  const ModelShape& m = o.model;
  const double flops_per_token = 6.0 * static_cast<double>(n_flop_params) +
                                 12.0 * static_cast<double>(m.layers * m.hidden * m.seq);

  // Random tokens, the same global batch on every rank; this replica takes its rows.
  const std::int64_t global_batch = o.batch * dp, per_replica = o.batch * m.seq;
  std::mt19937 gen(42);
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(m.vocab - 1));
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(per_replica)), targets(inputs.size());
  const std::int64_t skip = mesh.comm("dp").rank() * per_replica * 2;
  for (std::int64_t i = 0; i < skip; ++i) (void)token(gen);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = token(gen);
    targets[i] = token(gen);
  }

  if (rank == 0) {
    cudaDeviceProp props{};
    MDTP_CUDA_CHECK(cudaGetDeviceProperties(&props, assignment.device));
    std::printf("bench_gpt_cuda: %s, %d rank(s) (one per GPU expected), device communicator %s\n", props.name, world,
                device_comm_kind_name(kind));
    std::printf("model: %s; %lld parameters (%lld without wpe); mode %s tp=%d dp=%d; global batch %lld x %lld "
                "tokens; dtype %s; AdamW\n",
                describe(m).c_str(), static_cast<long long>(n_params), static_cast<long long>(n_flop_params),
                o.mode.c_str(), o.tp, dp, static_cast<long long>(global_batch), static_cast<long long>(m.seq),
                o.dtype.c_str());
    std::printf("peak per GPU: %.1f TFLOP/s (%s)\n", peak,
                measured ? ("measured: 8192^3 cuBLAS GEMM, " + o.dtype + ", slowest rank").c_str()
                         : "--peak-tflops");
    std::fflush(stdout);
  }

  auto step = [&] {
    model.zero_gradients();
    const double loss = testing::forward_backward(model, inputs, targets);
    model.reduce_gradients();
    optimizer.step();
    return loss;
  };
  double first_loss = 0.0, last_loss = 0.0;
  for (int i = 0; i < o.warmup; ++i) {
    const double l = step();
    if (i == 0) first_loss = l;
  }
  backend->synchronize();
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.reps; ++i) last_loss = step();
  backend->synchronize();
  MPI_Barrier(MPI_COMM_WORLD);
  const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double seconds = 0.0;
  MPI_Allreduce(&local, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double per_step = seconds / o.reps;
  const double tokens_per_s = static_cast<double>(global_batch * m.seq) / per_step;
  const double tflops = tokens_per_s * flops_per_token * 1e-12;
  const double per_gpu = tflops / world;

  if (rank == 0) {
    if (o.warmup == 0) first_loss = last_loss;
    std::printf("loss: %.4f (first step) -> %.4f (last)\n", first_loss, last_loss);
    std::printf("model FLOPs per token: %.4g = 6*N + 12*n_layer*n_embd*seq (PaLM/nanoGPT convention, "
                "N = %lld, no recomputation)\n",
                flops_per_token, static_cast<long long>(n_flop_params));
    std::printf("%d warm-up + %d timed steps: %.2f ms/step, %.0f tokens/s, %.2f model TFLOP/s (%.2f per GPU), "
                "MFU %.1f%% of %.1f TFLOP/s per GPU\n",
                o.warmup, o.reps, per_step * 1e3, tokens_per_s, tflops, per_gpu, 100.0 * per_gpu / peak, peak);
    std::printf("device memory (rank 0): %.2f GiB held by the pool\n",
                static_cast<double>(backend->cuda_allocator().pool_stats().reserved_bytes) / (1024.0 * 1024.0 * 1024.0));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  mdtp::gpu_test::exit_unless_gpu_on_every_rank("bench_gpt_cuda", MPI_COMM_WORLD);

  const Options options = parse(argc, argv, rank);
  int rc = 0;
  try {
    rc = run(options, rank, world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_cuda (rank %d): %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
