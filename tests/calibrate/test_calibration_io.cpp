// A calibration written by calibration_tables (what `mdtp calibrate` writes) comes back unchanged
// from load_calibration (what `mdtp cost --calibration` reads), unbounded regimes included, and
// the newest calibration run wins.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <filesystem>
#include <limits>
#include <unistd.h>

#include "calibrate/calibration_io.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using namespace mdtp::calibrate;

TEST_CASE("a calibration round-trips through the results file", "[cost][calibration]") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto path = std::filesystem::temp_directory_path() /
                    ("mdtp_cost_calibration_" + std::to_string(::getpid()) + "_" + std::to_string(rank) + ".h5");
  std::filesystem::remove(path);

  CalibrationResult written;
  Calibration& c = written.calibration;
  c.links[LinkClass::intra_node] = {1.5e-6, 2e-10};
  c.links[LinkClass::inter_node] = {7e-6, 9e-11};
  CalibrationFit f;
  f.op = CollectiveOp::broadcast;
  f.link = LinkClass::intra_node;
  f.group_size = 3;
  f.min_bytes = 12288;
  f.alpha = 4e-6;
  f.beta = 3e-10;
  c.fits.push_back(f);
  f.op = CollectiveOp::reduce_scatter;
  f.group_size = 0;
  f.min_bytes = 0;
  f.max_bytes = 4096;
  c.fits.push_back(f);
  written.gemm.push_back(GemmRate{DType::f64, 512, 512, 512, 6.4e10, 6.0e10});
  {
    ResultsFile file(path.string());
    CalibrationResult older;
    older.gemm.push_back(GemmRate{DType::f64, 512, 512, 512, 1.0, 1.0});
    file.append_run(kCalibrationRunKind, {{"note", std::string("older")}}, calibration_tables(older));
    file.append_run(kCalibrationRunKind, {{"note", std::string("newer")}}, calibration_tables(written));
  }
  const LinkParameters loaded = load_calibration(path.string());
  CHECK(loaded.calibrated);
  CHECK(loaded.source.find("0002-calibrate") != std::string::npos);
  const Calibration& back = loaded.model.calibration;
  REQUIRE(back.links.size() == 2);
  CHECK(back.links.at(LinkClass::inter_node).alpha == 7e-6);
  CHECK(back.links.at(LinkClass::intra_node).beta == 2e-10);
  REQUIRE(back.fits.size() == 2);
  CHECK(back.fits[0].op == CollectiveOp::broadcast);
  CHECK(back.fits[0].group_size == 3);
  CHECK(back.fits[0].min_bytes == 12288);
  CHECK(back.fits[0].max_bytes == std::numeric_limits<std::int64_t>::max());
  CHECK(back.fits[1].op == CollectiveOp::reduce_scatter);
  CHECK(back.fits[1].max_bytes == 4096);
  CHECK(back.fits[1].beta == 3e-10);
  CHECK(back.gemm_flops.at(DType::f64) == 6.4e10);
  CHECK(load_calibration(path.string() + ":/runs/0001-calibrate").model.calibration.gemm_flops.at(DType::f64) == 1.0);
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(load_calibration(path.string()), Catch::Contains(path.string()) && Catch::Contains("no such file"));
}
