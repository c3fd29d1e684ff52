// The layer runner under sync timing (comm/ledger.hpp): the ledger's bytes per (phase, group, op)
// still equal the cost model's and the unsynchronised run's, every blocking collective carries
// its wait apart from its transfer, and the bench tables have the wait columns.
#include <catch2/catch.hpp>
#include <mpi.h>

#include "bench/bench_tables.hpp"
#include "bench/layer_runner.hpp"
#include "bench/mode_mesh.hpp"
#include "calibrate/calibration_io.hpp"

using namespace mdtp;
using namespace mdtp::bench;
using calibrate::default_link_parameters;

namespace {

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

bool has_column(const Table& t, const std::string& name) {
  for (const auto& c : t.names())
    if (c == name) return true;
  return false;
}

}  // namespace

TEST_CASE("sync timing keeps the ledger's bytes equal to the model's and records the wait", "[bench][sync]") {
  const int world = world_size();
  const auto links = default_link_parameters();
  for (const auto& mode : modes_that_fit(world)) {
    DYNAMIC_SECTION(mode) {
      cost::Workload w;
      w.mode = mode;
      w.mesh = *mesh_for_mode(mode, world);
      w.data_parallel_group = Topology(w.mesh).dp() > 1 ? "dp" : "";
      w.layer = "mlp";
      w.rows = 16;
      w.hidden = 16;
      w.ffn_hidden = 32;
      w.dtype = DType::f64;
      RunSettings settings;
      settings.warmup = 0;
      settings.reps = 2;
      const run::RunDescription run{"test", tp_mode_name(mode), "f64", ""};
      LayerMeasurement plain = run_layer_bench(w, settings, MPI_COMM_WORLD, run);
      settings.sync_timing = true;
      LayerMeasurement synced = run_layer_bench(w, settings, MPI_COMM_WORLD, run);
      CHECK(synced.check.passed);

      const Prediction p = predict(w, links.model);
      const BenchSummary ps = summarize(plain, p), ss = summarize(synced, p);
      CHECK(ps.bytes_match);
      CHECK(ss.bytes_match);
      CHECK(ss.bytes_measured == ps.bytes_measured);

      REQUIRE(synced.comm.size() == plain.comm.size());
      double synchronised = 0.0;
      for (std::size_t k = 0; k < synced.comm.size(); ++k) {
        const LedgerStat& a = plain.comm[k];
        const LedgerStat& b = synced.comm[k];
        INFO(b.key.phase << " " << b.key.group << " " << collective_name(b.key.op));
        CHECK(b.key == a.key);
        CHECK(b.calls.max == a.calls.max);
        CHECK(b.logical_bytes.mean == a.logical_bytes.mean);
        CHECK(b.logical_bytes.max == a.logical_bytes.max);
        CHECK(a.synchronised_calls.max == 0.0);
        CHECK(a.wait_seconds.max == 0.0);
        CHECK(b.synchronised_calls.max <= b.calls.max);
        CHECK(b.wait_seconds.mean >= 0.0);
        synchronised += b.synchronised_calls.max;
      }
      // 1d's all-reduces are blocking, so synchronised; other modes may issue only non-blocking
      // calls (SUMMA's broadcasts), which never are.
      if (is_megatron_1d(mode)) CHECK(synchronised > 0.0);
      for (const auto& s : synced.steps) CHECK(s.wait.max >= 0.0);

      const auto tables = bench_tables(synced, p, ss);
      CHECK(has_column(tables.at("comm"), "wait_mean"));
      CHECK(has_column(tables.at("comm"), "wait_max"));
      CHECK(has_column(tables.at("comm"), "synchronised_calls"));
      CHECK(has_column(tables.at("steps"), "wait_max"));
      CHECK(has_column(tables.at("phases"), "wait_s"));
      CHECK(has_column(tables.at("summary"), "wait_s"));
      CHECK(has_column(tables.at("summary"), "sync_timing"));
    }
  }
}
