// Kernel times from first principles (cost/kernel_time.hpp), on the shipped DGX A100 preset (108
// SMs, the microbenchmark's 86.9 % of 312 TFLOP/s at its reference shape): a GEMM whose tiles fill
// the SMs runs its main loop, then writes its outputs; one more row of tiles costs a whole extra
// wave; the per-wave write is what XLA's published H100 timings show; a small one splits k; a GEMV (M = 1) is
// bound by HBM; a batched kernel shares its waves; every kernel pays the per-kernel overhead once;
// a cluster without an SM count keeps the plain roofline; a streaming attention kernel keeps the
// scores on chip.
#include <catch2/catch.hpp>

#include <array>

#include "core/error.hpp"
#include "cost/attention_core.hpp"
#include "cost/kernel_time.hpp"
#include "cost/layer_costs.hpp"
#include "dgx_a100.hpp"

using namespace mdtp;
using namespace mdtp::cost;

namespace {

// The preset without its per-kernel overhead, so ratios of times are ratios of work.
Cluster a100_no_overhead() {
  Cluster c = mdtp::testing::dgx_a100();
  c.kernel_overhead = 0.0;
  return c;
}

}  // namespace

TEST_CASE("a GEMM kernel: tiles in waves over the SMs, each wave ending with its tiles' outputs written",
          "[cost][kernel]") {
  const Cluster a100 = a100_no_overhead();
  REQUIRE(a100.sm_count == 108);
  const double rate = a100.gemm_rate(DType::bf16);
  CHECK(rate == Approx(0.7315 * 312e12));
  const double stream = a100.hbm_bandwidth * a100.memory_efficiency;
  // The main loop runs faster than the microbenchmark's rate by what the epilogues took at its
  // reference shape: [1024, 5120]·[5120, 10240] in 256×128 tiles is 4 × 80 = 320 tiles, three waves
  // (108, 108, 104) of a 5120-long main loop, each followed by its outputs' write.
  // The microbenchmark ran its GPU alone; a step runs at the pace of a loaded node's slowest GPU,
  // so the main loop the kernels below use is the alone one times the cluster's synchronous pace.
  const double pace = a100.synchronous_pace;
  REQUIRE(pace == 0.9715);
  const double main_rate = gemm_mainloop_rate(DType::bf16, a100);
  const auto reference_seconds = [&](double r) {
    const double loop = 2.0 * 256 * 128 * 5120 / (r / 108);
    const double write = 108.0 * 256 * 128 * 2 / stream;
    return 3 * (loop + write);
  };
  CHECK(reference_seconds(main_rate / pace) == Approx(2.0 * 1024 * 10240 * 5120 / rate).epsilon(1e-9));
  CHECK(main_rate / pace > rate);
  CHECK(main_rate / pace < 1.05 * rate);  // a 5120-long main loop: the epilogues cost a few per cent
  // 108 tiles of 128×256 (or 216 of 128×128 in two waves: the same main loops, the same bytes
  // written): one wave of main loop, then 108 tiles' outputs written.
  const std::int64_t m = 128 * 108, n = 256, k = 8192;
  const double loop = 2.0 * 128 * 256 * k / (main_rate / 108);
  const double write = 108.0 * 128 * 256 * 2 / stream;
  const double full = gemm_kernel_seconds(m, n, k, DType::bf16, a100);
  CHECK(full == Approx(loop + write).epsilon(1e-12));
  // One more row: 218 tiles of 128×128 need a third wave; no other tile does better (128×256: a
  // second wave of twice the work; 128×64: 436 tiles, 5 waves of 3/4 the time), so 1.5 times the
  // time for 0.9 % more work.
  CHECK(gemm_kernel_seconds(m + 1, n, k, DType::bf16, a100) == Approx(1.5 * full).epsilon(1e-12));
  // Doubling k doubles the main loop, not the write.
  CHECK(gemm_kernel_seconds(m, n, 2 * k, DType::bf16, a100) == Approx(2 * loop + write).epsilon(1e-12));
  // A weight gradient accumulated into its f32 buffer (C = XᵀdY + C): the epilogue reads and writes
  // 4-byte outputs, 8 bytes each where a bf16 result is 2, so four times the write.
  CHECK(epilogue_bytes(DType::f32, true) == 8.0);
  CHECK(epilogue_bytes(DType::bf16, false) == 2.0);
  CHECK(gemm_kernel_seconds(m, n, k, DType::bf16, a100, 1, epilogue_bytes(DType::f32, true)) ==
        Approx(loop + 4 * write).epsilon(1e-12));
  // A small problem takes small tiles and splits k: 64×64 outputs are one 64×64 tile (half the full
  // rate: operand reuse 32 against 64); alone it would leave 107 SMs idle for all of k = 8192, so
  // k is cut into 32 slices of 256 (the most: slices of at least 256), one wave, whose 32 outputs
  // are written, then the 32 f32 partial sums written and read once.
  const double small = gemm_kernel_seconds(64, 64, k, DType::bf16, a100);
  const double slice = 2.0 * 64 * 64 * 256 / (main_rate / 108 * 0.5);
  const double slice_writes = 32.0 * 64 * 64 * 2 / stream;
  const double partial_sums = 2.0 * 4 * 32 * 64 * 64 / stream;
  CHECK(small == Approx(slice + slice_writes + partial_sums).epsilon(1e-12));
  CHECK(small < 2.0 * 64 * 64 * k / (main_rate / 108 * 0.5) / 20);  // against one tile running all of k
}

TEST_CASE("the epilogue per wave, as XLA's published H100 GEMM timings show it", "[cost][kernel]") {
  // XLA's GPU cost model ships measured bf16 GEMM throughputs per shape on sm_90 (H100): OpenXLA,
  // xla/service/gpu/model/matmul_interpolator_data.h (tensorflow/tensorflow, commit 372d578b),
  // [4096, k]·[k, 4096]: k = 256: 392.2, 512: 543.1, 2048: 738.7, 4096: 783.3 TFLOP/s.  Those are
  // burst rates (the clock not yet settled, like the matmul microbenchmark's MAMF), so only their
  // shape is compared here: times linear in k, t(k) = waves · (k · c + e).
  const std::int64_t side = 4096;
  const std::array<std::int64_t, 4> ks{256, 512, 2048, 4096};
  const std::array<double, 4> xla_tflops{392.2, 543.1, 738.7, 783.3};
  const auto measured = [&](std::size_t i) { return 2.0 * side * side * ks[i] / (xla_tflops[i] * 1e12); };
  // Four waves of 128×256 tiles (512 of them over 132 SMs).  The measured intercept per wave, from
  // the two longest: about 2.7 µs.
  const double slope = (measured(3) - measured(2)) / (4096 - 2048);
  const double xla_epilogue = (measured(2) - slope * 2048) / 4;
  CHECK(xla_epilogue == Approx(2.7e-6).epsilon(0.05));
  // The model's, from the data sheet alone: 132 tiles of 128×256 bf16 outputs (8.65 MB) written at
  // 85 % of 3.35 TB/s, 3.0 µs: within 15 % of what XLA measured.
  Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  h100.kernel_overhead = 0.0;
  const double stream = h100.hbm_bandwidth * h100.memory_efficiency;
  const double model_epilogue = 132.0 * 128 * 256 * 2 / stream;
  CHECK(model_epilogue == Approx(xla_epilogue).epsilon(0.15));
  const auto model = [&](std::int64_t k) { return gemm_kernel_seconds(side, side, k, DType::bf16, h100); };
  CHECK((model(4096) - model(2048)) / 2048 * 2048 + 4 * model_epilogue == Approx(model(2048)).epsilon(1e-9));
  // So the rate falls with k as measured: relative to k = 4096, the short-k shapes run at (model,
  // XLA) 0.53 / 0.50, 0.70 / 0.69, 0.95 / 0.94; without the epilogue a 4096² tile wave of k = 256
  // would run at the long one's rate.
  for (std::size_t i = 0; i < 3; ++i) {
    const double model_ratio = model(4096) / model(ks[i]) * static_cast<double>(ks[i]) / 4096;
    const double xla_ratio = measured(3) / measured(i) * static_cast<double>(ks[i]) / 4096;
    CHECK(model_ratio == Approx(xla_ratio).epsilon(0.1));
  }
}

TEST_CASE("a GEMM with M = 1 is bound by HBM bandwidth, far below the tensor-core rate", "[cost][kernel]") {
  const Cluster a100 = a100_no_overhead();
  const std::int64_t n = 12288, k = 12288;
  const double t = gemm_kernel_seconds(1, n, k, DType::bf16, a100);
  // It reads the k×n weight (and a row, and writes a row) at the streaming bandwidth.
  const double bytes = 2.0 * (1.0 * k + 1.0 * k * n + 1.0 * n);
  CHECK(t == Approx(bytes / (a100.hbm_bandwidth * a100.memory_efficiency)).epsilon(1e-12));
  const double achieved = 2.0 * n * k / t;
  CHECK(achieved < 0.01 * a100.peak(DType::bf16));  // about 1 flop per byte: ~1.7 TFLOP/s of 312
}

TEST_CASE("a batched GEMM shares its waves; every kernel pays the per-kernel overhead once", "[cost][kernel]") {
  const Cluster a100 = a100_no_overhead();
  const double rate = gemm_mainloop_rate(DType::bf16, a100);
  const double stream = a100.hbm_bandwidth * a100.memory_efficiency;
  // Products of [1024, 1024]·[1024, 1024]: alone, 64 tiles of 128×128 fill 64 of the 108 SMs in
  // one wave; 24 in one batched kernel run 1,536 tiles in 15 waves of 108, not 24.
  const std::int64_t e = 1024;
  const double unit = 2.0 * 128 * 128 * e / (rate / 108);  // one 128×128 tile over k = 1024
  const double tile_write = 128.0 * 128 * 2 / stream;
  const double one = gemm_kernel_seconds(e, e, e, DType::bf16, a100);
  CHECK(one == Approx(unit + 64 * tile_write).epsilon(1e-12));
  const double batched = gemm_kernel_seconds(e, e, e, DType::bf16, a100, 24);
  CHECK(batched == Approx(15 * (unit + 108 * tile_write)).epsilon(1e-12));
  CHECK(batched >= 24 * 2.0 * e * e * e / rate);
  // Attention's scores Q·Kᵀ ([2048, 128]·[128, 2048]: k = d_head) write 2048² outputs for 2·128
  // flops each: the writes set the time, batched or not, so 24 heads take at least 24 heads'
  // outputs at the streaming bandwidth and at most 24 times one (whose last wave is part-full).
  const std::int64_t s = 2048, d = 128;
  const double heads = gemm_kernel_seconds(s, s, d, DType::bf16, a100, 24);
  CHECK(heads >= 24.0 * s * s * 2 / stream);
  CHECK(heads <= 24 * gemm_kernel_seconds(s, s, d, DType::bf16, a100));
  // The overhead: once per kernel, batched or not; streaming kernels once each.
  Cluster with = a100;
  with.kernel_overhead = 2e-6;
  CHECK(gemm_kernel_seconds(e, e, e, DType::bf16, with, 24) == Approx(batched + 2e-6).epsilon(1e-12));
  CHECK(stream_seconds(0.0, with, 5) == Approx(5 * 2e-6).epsilon(1e-12));
  CHECK(stream_seconds(1e9, with) ==
        Approx(1e9 / (with.hbm_bandwidth * with.memory_efficiency) + 2e-6).epsilon(1e-12));
  CHECK(gemm_kernel_seconds(0, s, d, DType::bf16, with) == 0.0);  // no kernel runs
  CHECK_THROWS_WITH(gemm_kernel_seconds(-1, s, d, DType::bf16, with), Catch::Contains("m=-1"));
  CHECK_THROWS_WITH(stream_seconds(1.0, with, -1), Catch::Contains("got -1"));
}

TEST_CASE("a cluster without an SM count (calibrated, host) keeps the plain roofline", "[cost][kernel]") {
  Cluster c = a100_no_overhead();
  c.sm_count = 0;
  const double rate = c.gemm_rate(DType::bf16) * c.synchronous_pace;
  // 109 tile rows cost no second wave without the tile model.
  const std::int64_t m = 128 * 108 + 1, n = 256, k = 8192;
  CHECK(gemm_kernel_seconds(m, n, k, DType::bf16, c) == Approx(2.0 * m * n * k / rate).epsilon(1e-12));
}

TEST_CASE("a streaming attention kernel: no s x s tensor through HBM, the causal half of its products at its rate",
          "[cost][kernel]") {
  const Cluster& a100 = mdtp::testing::dgx_a100();
  REQUIRE(a100.attention_efficiency == 0.421);
  // One block of hidden 2048, 16 heads of 128, sequence 4096, one sequence, bf16 with dropout; no TP.
  const ModelShape model{2, 2048, 16, 4096, 51200};
  const LayerCosts kept = layer_costs(model, TpMode::d1, 1, 1, 1, DType::bf16, a100, {.dropout = true});
  const LayerCosts streaming = layer_costs(model, TpMode::d1, 1, 1, 1, DType::bf16, a100, {.dropout = true, .streaming_attention = true});
  // The materialised core's softmax (read and write) and dropout (read, write, a mask byte) on the
  // 16 x 4096² scores are gone from the forward's streaming bytes.
  const double scores = 16.0 * 4096 * 4096;
  CHECK(kept.block.forward.stream_bytes - streaming.block.forward.stream_bytes ==
        Approx((2 * 2 + 2 * 2 + 1) * scores).epsilon(1e-12));
  // The kernel: Q·Kᵀ and P·V on 16 heads, 2·4096²·128 flops each per head. Its rate, 0.421 of the
  // A100's peak, was measured at this length (the preset's attention_reference_seq) on the work as the
  // benchmark counts it, half the scores: so here the kernel takes half the products at that rate,
  // whatever its tiles (32 x 33/2 on and below the diagonal, and 1.39 tiles' fixed cost per row of 128
  // queries). Its reads of Q, K, V and write of O (4 x 4096 x 2048 x 2 B: 39 us at 85 % of 2,039
  // GB/s) hide under that.
  REQUIRE(a100.attention_reference_seq == 4096);
  const double product = 2.0 * 16 * 4096.0 * 4096 * 128, causal = 0.5;
  const double rate = 0.421 * 312e12 * 0.9715;  // at the pace of a loaded node's slowest GPU
  CHECK(streaming.block.attention_core.gemm_seconds == Approx(2 * causal * product / rate + 2e-6).epsilon(1e-12));
  CHECK(streaming.block.attention_core.stream_bytes == 0.0);
  // Its backward recomputes the scores: five products, against the materialised core's batched
  // dP = dO·Vᵀ (like Q·Kᵀ) and dV, dQ, dK (like P·V); the GEMMs outside the core are the same.
  const double t_scores = gemm_kernel_seconds(4096, 4096, 128, DType::bf16, a100, 16);
  const double t_context = gemm_kernel_seconds(4096, 128, 4096, DType::bf16, a100, 16);
  CHECK(streaming.block.backward_input.gemm_seconds - kept.block.backward_input.gemm_seconds ==
        Approx(5 * causal * product / rate + 2e-6 - (t_scores + 3 * t_context)).epsilon(1e-9));
  CHECK(streaming.block.backward_input.gemm_flops - kept.block.backward_input.gemm_flops == Approx(product));
  // Where the cluster gives the kernel's backward its own published rate (H100: 0.425 of peak against
  // the forward's 0.441), the backward's five products run at it; the forward is unchanged.
  const Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  const AttentionCoreShape shape{4096, 128, 16, 16, 1};
  const AttentionCoreCosts h = attention_core_costs(shape, DType::bf16, false, true, h100);
  CHECK(h.forward.gemm_seconds == Approx(2 * causal * product / (0.441 * 0.9715 * 989e12) + 2e-6).epsilon(1e-12));
  CHECK(h.backward.gemm_seconds == Approx(5 * causal * product / (0.425 * 0.9715 * 989e12) + 2e-6).epsilon(1e-12));
}

// A causal streaming kernel of n = s/128 rows of queries does n(n + 1)/2 tiles of 128 x 128 scores
// and c tiles' fixed cost per row; counted as its benchmarks count it (half the scores), its rate
// goes as n/(n + 1 + 2c).
TEST_CASE("a streaming attention kernel's rate against the sequence length: its tiles, and the published curve",
          "[cost][kernel]") {
  CHECK(causal_tile_share(4096, 0.0) == Approx(33.0 / 64).epsilon(1e-15));  // 32 x 33/2 of 32² tiles
  CHECK(causal_tile_share(4096, 1.5) == Approx((32.0 * 33 / 2 + 1.5 * 32) / (32.0 * 32)).epsilon(1e-15));
  CHECK(causal_tile_share(100, 0.0) == 1.0);  // one tile, on the diagonal: done whole
  CHECK(causal_tile_share(129, 0.0) == 0.75);  // two rows: 3 of 4 tiles
  CHECK_THROWS_WITH(causal_tile_share(0, 0.0), Catch::Contains("got seq 0"));

  const Cluster& a100 = mdtp::testing::dgx_a100();
  const double c = a100.attention_tile_overhead;
  REQUIRE(c > 0);
  // The forward's counted rate (half of 4·s²·d flops per head) at length s.
  auto counted_rate = [&](std::int64_t s) {
    const AttentionCoreShape shape{s, 128, 16, 16, 1};
    const double counted = 0.5 * 4.0 * 16 * static_cast<double>(s) * static_cast<double>(s) * 128;
    return counted / (attention_core_costs(shape, DType::bf16, false, true, a100).forward.gemm_seconds -
                      a100.kernel_overhead);
  };
  const double at_reference = counted_rate(4096);
  CHECK(at_reference == Approx(0.421 * 312e12 * a100.synchronous_pace).epsilon(1e-12));
  for (const std::int64_t s : {512, 1024, 2048, 8192, 16384, 65536}) {
    const double n = static_cast<double>(s / 128);
    INFO("sequence " << s);
    CHECK(counted_rate(s) / at_reference == Approx((n / (n + 1 + 2 * c)) / (32.0 / (33 + 2 * c))).epsilon(1e-12));
  }
  // The curve it was drawn from: FlashAttention-2 on an A100, causal, head dim 128, forward and
  // backward, 99, 133, 155, 173, 182 and 189 TFLOP/s at 512 to 16k (Dao 2023): the model's ratios to
  // 4k within 2 % of the published ones.
  const std::vector<std::pair<std::int64_t, double>> published{{512, 99}, {1024, 133}, {2048, 155}, {8192, 182},
                                                               {16384, 189}};
  for (const auto& [s, tflops] : published) {
    INFO("sequence " << s << ": published " << tflops / 173 << " of the 4k rate");
    CHECK(counted_rate(s) / at_reference == Approx(tflops / 173).epsilon(0.02));
  }
  // Without a reference length the rate is on the work the kernel does, at any length: the kernel's
  // time is its share of the products at that rate (a calibrated or hand-written cluster file).
  Cluster plain = a100;
  plain.attention_reference_seq = 0;
  plain.attention_tile_overhead = 0;
  const AttentionCoreShape shape{2048, 128, 16, 16, 1};
  const double product = 2.0 * 16 * 2048.0 * 2048 * 128;
  CHECK(attention_core_costs(shape, DType::bf16, false, true, plain).forward.gemm_seconds ==
        Approx(2 * (17.0 / 32) * product / (0.421 * 312e12 * plain.synchronous_pace) + plain.kernel_overhead)
            .epsilon(1e-12));
}

// A synchronous step waits at every collective for the slowest GPU of its node, which runs its
// tensor cores slower than the microbenchmark's GPU alone did; HBM-bound kernels do not care.
TEST_CASE("the synchronous pace slows the tensor-core kernels alone", "[cost][kernel]") {
  Cluster alone = a100_no_overhead();
  alone.synchronous_pace = 1.0;
  Cluster loaded = alone;
  loaded.synchronous_pace = 0.9;
  // GEMMs in several regimes of the tile model (many waves, one wave, split k), the attention
  // kernel, a streaming kernel.
  for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{8192, 8192, 8192}, {128 * 108, 256, 8192},
                                {256, 256, 65536}}) {
    INFO(m << " x " << n << " x " << k);
    const double t_alone = gemm_compute_seconds(m, n, k, DType::bf16, alone);
    CHECK(gemm_compute_seconds(m, n, k, DType::bf16, loaded) > t_alone);
    CHECK(gemm_mainloop_rate(DType::bf16, loaded) == Approx(0.9 * gemm_mainloop_rate(DType::bf16, alone)));
  }
  // One wave of whole tiles: the main loop 1/0.9 as long, the wave's output writes (HBM) the same.
  const std::int64_t m = 128 * 108, n = 256, k = 8192;
  const double write = 108.0 * 128 * 256 * 2 / (alone.hbm_bandwidth * alone.memory_efficiency);
  CHECK(gemm_kernel_seconds(m, n, k, DType::bf16, loaded) - write ==
        Approx((gemm_kernel_seconds(m, n, k, DType::bf16, alone) - write) / 0.9).epsilon(1e-12));
  CHECK(stream_seconds(1e9, loaded) == stream_seconds(1e9, alone));
  const AttentionCoreShape shape{4096, 128, 16, 16, 1};
  CHECK(attention_core_costs(shape, DType::bf16, false, true, loaded).forward.gemm_seconds ==
        Approx(attention_core_costs(shape, DType::bf16, false, true, alone).forward.gemm_seconds / 0.9).epsilon(1e-12));
  // A cluster without the tile model (calibrated, host): its roofline paced the same way.
  alone.sm_count = loaded.sm_count = 0;
  CHECK(gemm_kernel_seconds(m, n, k, DType::bf16, loaded) ==
        Approx(gemm_kernel_seconds(m, n, k, DType::bf16, alone) / 0.9).epsilon(1e-12));
}
