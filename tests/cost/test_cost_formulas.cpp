// The closed-form parts of the model: ZeRO's published figures (computed, not typed in), the
// pipeline bubble, the published asymptotic table, the α-β algorithms and their selection, the
// calibration's precedence, link classes from placement, and the GEMM count.  No MPI is used;
// every rank runs the same checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cost/compute_model.hpp"
#include "cost/pipeline_bubble.hpp"
#include "cost/published.hpp"
#include "cost/report.hpp"
#include "cost/time_model.hpp"
#include "cost/zero.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using Catch::Detail::Approx;

TEST_CASE("ZeRO memory per rank reproduces DeepSpeed's 120 / 31.4 / 16.6 / 1.9 GB", "[cost][zero]") {
  ZeroPaperInputs c;
  c.parameters = 7.5e9;
  c.data_parallel = 64;  // 2 / 2 / 12 bytes are the defaults
  const auto stages = zero_costs(c);
  REQUIRE(stages.size() == 4);
  const double published_gb[4] = {120.0, 31.4, 16.6, 1.9};
  for (int s = 0; s < 4; ++s) {
    INFO("stage " << s << ": " << stages[s].memory_bytes << " bytes");
    CHECK(std::round(stages[s].memory_bytes / 1e8) / 10.0 == Approx(published_gb[s]));
  }
  CHECK(stages[1].memory_bytes == Approx(31.40625e9));
  CHECK(stages[2].memory_bytes == Approx(16.640625e9));
  CHECK(stages[3].memory_bytes == Approx(1.875e9));
  CHECK(stages[0].comm_elements == Approx(2 * 7.5e9));
  CHECK(stages[2].comm_elements == Approx(2 * 7.5e9));
  CHECK(stages[3].comm_elements == Approx(3 * 7.5e9));
  CHECK(stages[3].comm_bytes == Approx(3 * 7.5e9 * 2));
  CHECK_THROWS_WITH(zero_stage_cost(c, 4), Catch::Contains("stage=4"));
  c.data_parallel = 0;
  CHECK_THROWS_WITH(zero_costs(c), Catch::Contains("dp=0"));
}

TEST_CASE("pipeline bubble: (p-1)/m, (p-1)/(v*m), and (p-1)/(m+p-1) of the total", "[cost][pipeline]") {
  PipelineConfig c{4, 8, 1, ScheduleKind::one_f_one_b};
  CHECK(bubble_over_ideal(c) == Approx(3.0 / 8));
  CHECK(bubble_fraction_of_total(c) == Approx(3.0 / 11));
  c.schedule = ScheduleKind::gpipe;
  CHECK(bubble_over_ideal(c) == Approx(3.0 / 8));
  CHECK(peak_in_flight(c) == std::vector<int>{8, 8, 8, 8});
  c.schedule = ScheduleKind::one_f_one_b;
  CHECK(peak_in_flight(c) == std::vector<int>{4, 3, 2, 1});
  c = PipelineConfig{4, 8, 2, ScheduleKind::interleaved};
  CHECK(bubble_over_ideal(c) == Approx(3.0 / 16));
  CHECK(bubble_fraction_of_total(c) == Approx(3.0 / 19));
  CHECK(peak_in_flight(PipelineConfig{2, 4, 2, ScheduleKind::interleaved}) == std::vector<int>{5, 3});
  // Megatron-Core's rule (no special case for m = p): stage 0 warms up min(2·1 + 1·2, 4) = 4 (all of
  // its passes), stage 1 min(0 + 2, 4) = 2, then one steady-state forward before its first backward.
  CHECK(peak_in_flight(PipelineConfig{2, 2, 2, ScheduleKind::interleaved}) == std::vector<int>{4, 3});
  CHECK_THROWS_WITH(bubble_over_ideal(PipelineConfig{4, 6, 2, ScheduleKind::interleaved}),
                    Catch::Contains("m=6") && Catch::Contains("N=4"));
  CHECK_THROWS_WITH(bubble_over_ideal(PipelineConfig{4, 8, 2, ScheduleKind::gpipe}), Catch::Contains("v=2"));
}

TEST_CASE("the published asymptotic rows at P, q, d", "[cost][published]") {
  CHECK(published_costs(parse_tp_mode("1d"), 4).bandwidth == Approx(1.5));
  CHECK(published_costs(parse_tp_mode("1d"), 4).latency == Approx(6));
  CHECK(published_costs(parse_tp_mode("1d-sp"), 4).note.find("sequence-parallel") != std::string::npos);
  const PublishedCosts d2 = published_costs(parse_tp_mode("2d"), 9);
  CHECK(d2.compute == Approx(1.0 / 9));
  CHECK(d2.bandwidth == Approx(4.0));
  CHECK(d2.latency == Approx(12));
  const PublishedCosts d25 = published_costs(parse_tp_mode("2.5d"), 8, 2);
  CHECK(d25.compute == Approx(1.0 / 8));
  CHECK(d25.parameter_memory == Approx(1.0 / 4));
  CHECK(d25.bandwidth == Approx(3.0 * 1 * 3 / 4));
  CHECK(published_costs(parse_tp_mode("3d"), 27).bandwidth == Approx(12.0 / 27));
  CHECK_THROWS_WITH(published_costs(parse_tp_mode("2d"), 6), Catch::Contains("tp=6"));
}

TEST_CASE("α-β algorithms are those MPICH picks, with the REFERENCE formulas", "[cost][time]") {
  const LinkParams link{2e-6, 1e-9};
  const AlgorithmSelection sel;
  auto t = [&](CollectiveOp op, int n, std::int64_t bytes, CollectiveAlgorithm expected) {
    const CollectiveAlgorithm a = select_algorithm(op, n, bytes / 4, 4, sel);
    INFO(collective_name(op) << " n=" << n << " S=" << bytes << ": " << algorithm_name(a));
    CHECK(a == expected);
    return algorithm_seconds(a, n, bytes, link);
  };
  const double a = link.alpha, b = link.beta;
  using A = CollectiveAlgorithm;
  using Op = CollectiveOp;
  CHECK(t(Op::all_reduce, 4, 1000000, A::ring) == Approx(2 * 3 * a + 2 * 0.75 * 1e6 * b));
  CHECK(t(Op::all_reduce, 4, 1024, A::recursive_doubling) == Approx(2 * (a + 1024 * b)));
  CHECK(t(Op::all_reduce, 6, 1024, A::recursive_doubling) == Approx(4 * (a + 1024 * b)));
  CHECK(t(Op::broadcast, 4, 1000000, A::binomial_tree) == Approx(2 * (a + 1e6 * b)));  // fewer than 8 ranks
  CHECK(t(Op::broadcast, 8, 100000, A::scatter_doubling_allgather) == Approx(6 * a + 2 * 7.0 / 8 * 1e5 * b));
  CHECK(t(Op::broadcast, 8, 1000000, A::scatter_ring_allgather) == Approx((3 + 7) * a + 2 * 7.0 / 8 * 1e6 * b));
  CHECK(t(Op::broadcast, 9, 100000, A::scatter_ring_allgather) == Approx((4 + 8) * a + 2 * 8.0 / 9 * 1e5 * b));
  CHECK(t(Op::broadcast, 8, 8192, A::binomial_tree) == Approx(3 * (a + 8192 * b)));
  CHECK(t(Op::reduce, 4, 1000000, A::rabenseifner) == Approx(4 * a + 2 * 0.75 * 1e6 * b));
  CHECK(t(Op::reduce, 4, 2048, A::binomial_tree) == Approx(2 * (a + 2048 * b)));
  CHECK(t(Op::all_gather, 4, 1000000, A::ring_allgather) == Approx(3 * a + 0.75 * 1e6 * b));
  CHECK(t(Op::all_gather, 4, 1000, A::recursive_doubling_allgather) == Approx(2 * a + 0.75 * 1000 * b));
  CHECK(t(Op::all_gather, 3, 1200, A::bruck) == Approx(2 * a + 2.0 / 3 * 1200 * b));
  CHECK(t(Op::reduce_scatter, 4, 1000000, A::pairwise) == Approx(3 * a + 0.75 * 1e6 * b));
  CHECK(t(Op::reduce_scatter, 4, 1000, A::recursive_halving) == Approx(2 * a + 0.75 * 1000 * b));
  CHECK(t(Op::all_reduce, 1, 1000000, A::none) == 0.0);
  AlgorithmSelection mpich = sel;
  mpich.ring_all_reduce = false;
  CHECK(select_algorithm(Op::all_reduce, 4, 250000, 4, mpich) == A::rabenseifner);
}

TEST_CASE("link classes follow placement, and a calibration takes precedence", "[cost][time]") {
  MeshConfig mesh;
  mesh.world = 8;
  mesh.tp = 4;
  mesh.ranks_per_node = 4;
  const Topology topology(mesh);
  TimeModel model;
  PlannedCall tp_call{"forward", "tp", CollectiveOp::all_reduce, 4, 250000, DType::f32};
  PlannedCall dp_call{"grad-sync", "dp", CollectiveOp::all_reduce, 2, 250000, DType::f32};
  const CallEstimate intra = predict_call(tp_call, topology, model);
  const CallEstimate inter = predict_call(dp_call, topology, model);
  CHECK(intra.link == LinkClass::intra_node);
  CHECK(inter.link == LinkClass::inter_node);
  const LinkParams p = model.link(LinkClass::inter_node);
  CHECK(inter.seconds == Approx(2 * p.alpha + 1e6 * p.beta));

  model.calibration.links[LinkClass::inter_node] = LinkParams{1e-3, 0.0};
  CHECK(predict_call(dp_call, topology, model).seconds == Approx(2e-3));
  CalibrationFit any;
  any.op = CollectiveOp::all_reduce;
  any.link = LinkClass::intra_node;
  any.alpha = 1e-5;
  any.beta = 1e-9;
  model.calibration.fits.push_back(any);
  CalibrationFit exact = any;
  exact.group_size = 4;
  exact.alpha = 3e-5;
  exact.min_bytes = 1 << 20;  // not this call's regime
  model.calibration.fits.push_back(exact);
  CallEstimate fitted = predict_call(tp_call, topology, model);
  CHECK(fitted.algorithm == CollectiveAlgorithm::calibrated);
  CHECK(fitted.seconds == Approx(1e-5 + 1e-9 * 1e6));
  exact.min_bytes = 0;
  model.calibration.fits.push_back(exact);
  CHECK(predict_call(tp_call, topology, model).seconds == Approx(3e-5 + 1e-9 * 1e6));
  model.calibration.gemm_flops[DType::f64] = 1e9;
  CHECK(model.gemm_rate(DType::f64) == 1e9);
}

TEST_CASE("GEMM flops divide exactly over the ranks of every mode", "[cost][compute]") {
  struct M {
    const char* mode;
    int tp, depth;
  };
  for (const M m : {M{"1d", 4, 1}, M{"1d-sp", 4, 1}, M{"2d", 9, 1}, M{"2.5d", 18, 2}, M{"3d", 27, 1}, M{"3d", 8, 1}}) {
    for (const char* layer : {"linear", "mlp"}) {
      Workload w;
      w.mode = parse_tp_mode(m.mode);
      w.mesh.world = w.mesh.tp = m.tp;
      w.mesh.tp_mode = w.mode;
      w.mesh.tp_depth = m.depth;
      w.layer = layer;
      w.rows = 36;
      w.hidden = 36;
      w.ffn_hidden = 72;
      Workload serial = w;
      serial.mode = TpMode::none;
      serial.mesh = MeshConfig{};
      const double serial_flops = total_flops(plan_gemms(serial));
      const double per_linear = 3 * 2.0 * 36 * 36 * 72;
      CHECK(serial_flops == Approx(std::string(layer) == "mlp" ? 2 * per_linear : per_linear));
      INFO(m.mode << " tp=" << m.tp << " " << layer);
      CHECK(total_flops(plan_gemms(w)) * m.tp == Approx(serial_flops));
    }
  }
}

TEST_CASE("the cost report carries the published row beside the exact figures", "[cost][report]") {
  Workload w;
  w.mode = w.mesh.tp_mode = TpMode::d2;
  w.mesh.world = w.mesh.tp = 4;
  w.rows = 32;
  w.hidden = 16;
  w.ffn_hidden = 64;
  const CostReport r = build_cost_report(w, TimeModel{}, 3, 12.0);
  CHECK(r.comm.front().key.phase == "forward");
  std::int64_t calls = 0;
  for (const auto& row : r.comm) calls += row.calls;
  CHECK(calls == 3 * static_cast<std::int64_t>(plan_step(w).size()));
  CHECK(r.memory.parameter_bytes == 3 * estimate_memory(w).parameter_bytes);
  CHECK(r.exact.compute == Approx(0.25));
  CHECK(r.exact.latency == 24);  // 6q calls per Linear, two Linears
  CHECK(r.comm_seconds() > 0.0);
  CHECK(report_text(r).find(kPublishedLabel) != std::string::npos);
  CHECK(nlohmann::json::parse(report_json(r))["published"]["label"] == kPublishedLabel);
}
