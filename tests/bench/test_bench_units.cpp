// The experiment drivers' pieces: the mesh each mode runs on, the α-β fit, the timing backend,
// and the layer runner itself — on 1 rank (mode none) and 4 ranks (1d, 1d-sp, 2d, 2.5d): every
// step checked against the serial recomputation, and the ledger's bytes per (phase, group, op)
// equal to the cost model's exactly.
#include <catch2/catch.hpp>

#include <cmath>

#include "calibrate/alpha_beta_fit.hpp"
#include "bench/bench_tables.hpp"
#include "calibrate/calibration_io.hpp"
#include "bench/layer_runner.hpp"
#include "bench/mode_mesh.hpp"
#include "bench/timed_backend.hpp"

using namespace mdtp;
using namespace mdtp::bench;
using namespace mdtp::calibrate;

namespace {
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
}  // namespace

TEST_CASE("each mode gets the documented mesh for a world size", "[bench][mesh]") {
  auto tp = [](const std::string& mode, int world, int depth = 0) {
    auto c = mesh_for_mode(parse_tp_mode(mode), world, depth);
    return c ? c->tp : 0;
  };
  CHECK(tp("1d", 8) == 8);
  CHECK(tp("1d-sp", 8) == 8);
  CHECK(tp("2d", 8) == 4);  // q = 2, dp = 2
  CHECK(tp("2.5d", 8) == 8);
  CHECK(mesh_for_mode(parse_tp_mode("2.5d"), 8)->tp_depth == 2);
  CHECK(tp("3d", 8) == 8);
  CHECK(tp("2.5d", 4) == 4);
  CHECK(mesh_for_mode(parse_tp_mode("2.5d"), 4)->tp_depth == 1);
  CHECK(tp("3d", 4) == 0);
  CHECK(tp("2d", 18) == 9);
  CHECK(tp("2.5d", 18) == 18);
  CHECK(tp("2.5d", 16) == 16);
  CHECK(mesh_for_mode(parse_tp_mode("2.5d"), 16)->tp_depth == 4);
  CHECK(tp("2.5d", 16, 1) == 16);
  CHECK(tp("3d", 16) == 8);
  CHECK(tp("none", 4) == 1);
  CHECK(tp("1d", 1) == 0);
  CHECK(modes_that_fit(8) == std::vector<TpMode>{TpMode::d1, TpMode::d1_sp, TpMode::d2, TpMode::d2p5, TpMode::d3});
  CHECK(modes_that_fit(4) == std::vector<TpMode>{TpMode::d1, TpMode::d1_sp, TpMode::d2, TpMode::d2p5});
  CHECK(modes_that_fit(1).empty());
  CHECK_THROWS_WITH(parse_tp_mode("4d"), Catch::Contains("unknown tensor-parallel mode '4d'"));
  CHECK(describe_mesh(parse_tp_mode("2.5d"), *mesh_for_mode(parse_tp_mode("2.5d"), 8)) == "2.5d tp=8 (q=2, d=2)");
  CHECK(describe_mesh(parse_tp_mode("2d"), *mesh_for_mode(parse_tp_mode("2d"), 8)) == "2d tp=4 (q=2) dp=2");
}

TEST_CASE("the α-β fit recovers the parameters of exact ring data", "[bench][fit]") {
  const double alpha = 3e-6, beta = 2.5e-10;
  std::vector<FitSample> samples;
  for (int n : {2, 4, 8})
    for (double bytes = 8; bytes <= (64 << 20); bytes *= 4) {
      const double a = 2.0 * (n - 1), b = 2.0 * (n - 1) / n * bytes;
      samples.push_back({a, b, a * alpha + b * beta});
    }
  AlphaBetaFit fit = fit_alpha_beta(samples);
  CHECK(fit.alpha == Approx(alpha).epsilon(1e-9));
  CHECK(fit.beta == Approx(beta).epsilon(1e-9));
  CHECK(fit.rms_relative_error < 1e-9);
  // Pure latency data: β pinned at zero rather than going negative.
  std::vector<FitSample> flat{{1, 8, 1e-5}, {1, 1024, 1e-5}, {1, 4096, 0.9e-5}};
  AlphaBetaFit pinned = fit_alpha_beta(flat);
  CHECK(pinned.beta >= 0.0);
  CHECK(pinned.alpha > 0.0);
  CHECK_THROWS_WITH(fit_alpha_beta({}), Catch::Contains("at least one measured time"));
}

TEST_CASE("the timed backend forwards every call and times the GEMMs", "[bench][timing]") {
  auto host = make_host_backend();
  TimedBackend timed(*host);
  Tensor a = timed.from_f64({1, 2, 3, 4}, {2, 2}, DType::f64, MemCategory::other);
  Tensor c = timed.zeros({2, 2}, DType::f64, MemCategory::other);
  timed.gemm(false, false, 1.0, a, a, 0.0, c);
  CHECK(timed.to_f64(c) == std::vector<double>{7, 10, 15, 22});
  CHECK(timed.seconds().gemm > 0.0);
  const double gemm = timed.seconds().gemm;
  timed.scale(c, 2.0);
  CHECK(timed.seconds().gemm == gemm);
  CHECK(timed.seconds().other > 0.0);
  CHECK(&timed.allocator() == &host->allocator());  // one memory tracker
}

TEST_CASE("the layer runner checks every mode and its bytes equal the model's", "[bench][runner]") {
  const int world = world_size();
  std::vector<TpMode> modes = world == 1 ? std::vector<TpMode>{TpMode::none} : modes_that_fit(world);
  const LinkParameters links = default_link_parameters();
  for (const auto& mode : modes) {
    for (const char* layer : {"linear", "layernorm", "mlp"}) {
      DYNAMIC_SECTION(mode << " " << layer) {
        cost::Workload w;
        w.mode = mode;
        w.mesh = *mesh_for_mode(mode, world);
        w.data_parallel_group = Topology(w.mesh).dp() > 1 ? "dp" : "";
        w.layer = layer;
        w.rows = 16;
        w.hidden = 16;
        w.ffn_hidden = 32;
        w.dtype = DType::f64;
        RunSettings settings;
        settings.warmup = 1;
        settings.reps = 2;
        LayerMeasurement m = run_layer_bench(w, settings, MPI_COMM_WORLD, {"test", tp_mode_name(mode), "f64", ""});
        INFO("worst relative error " << m.check.worst());
        CHECK(m.check.ran);
        CHECK(m.check.passed);
        CHECK(m.repeat_deviation <= 1e-12);
        const Prediction p = predict(w, links.model);
        const BenchSummary s = summarize(m, p);
        CHECK(s.bytes_match);
        CHECK(s.bytes_measured == s.bytes_model);
        CHECK(s.step_measured > 0.0);
        CHECK(m.steps.size() == 2u * 4u);
      }
    }
  }
}

TEST_CASE("a workload that does not divide is refused before anything runs", "[bench][validate]") {
  cost::Workload w;
  w.mode = TpMode::d2;
  w.mesh = *mesh_for_mode(parse_tp_mode("2d"), 4);
  w.rows = 15;
  w.hidden = 16;
  w.ffn_hidden = 32;
  CHECK_THROWS_WITH(validate_workload(w), Catch::Contains("replica divisible by 2"));
  w.rows = 16;
  w.hidden = 15;
  CHECK_THROWS_WITH(validate_workload(w), Catch::Contains("needs --hidden divisible by 2"));
  w.hidden = 16;
  w.layer = "attention";
  CHECK_THROWS_WITH(validate_workload(w), Catch::Contains("unknown layer 'attention'"));
}
