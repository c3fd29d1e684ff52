// 2.5D (Tesseract) is real depth: 2.5D(q, d) must compute exactly what 2D(q) with d-way data
// parallelism over the depth computes (docs/theory.md §2) — the batch split d·q ways with depth
// coarse, SUMMA inside each slab, W's gradient summed over tp.dep.  Both are also checked against
// the serial float64 reference.
#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>

#include "summa_cases.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

Matrix row_block(const Matrix& m, std::int64_t r0, std::int64_t rows) {
  Matrix out(rows, m.cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) out.at(i, j) = m.at(r0 + i, j);
  return out;
}

struct LinearResult {
  Matrix y, dx, dw;
  std::vector<double> db;
};

// Forward + backward of one Linear on `f`'s mode with the full `x`, `dy` of this rank's replica;
// gradients reduced over the parameters' partial groups and then `dp_group`.
LinearResult run_linear(ModeFixture& f, const LinearSpec& spec, const Matrix& x, const Matrix& dy,
                        const std::string& dp_group, std::vector<LedgerEntry>* reduction_calls) {
  auto linear = f.mode->linear(spec, f.mode->residual_layout());
  LinearSaved saved;
  Tensor y = linear->forward(f.scatter(x, linear->input_layout()), saved);
  Tensor dx = linear->backward(f.scatter(dy, linear->output_layout()), saved);
  std::vector<Parameter*> ps = linear->parameters();
  f.ledger.clear();
  reduce_gradients(ps, *f.mesh, *f.backend, dp_group);
  if (reduction_calls) *reduction_calls = f.ledger.entries();
  LinearResult r;
  r.y = f.gather(y, linear->output_layout(), x.rows, spec.out_features);
  r.dx = f.gather(dx, linear->input_layout(), x.rows, spec.in_features);
  r.dw = f.gather_matrix(*ps[0], true);
  r.db = f.gather_vector(*ps[1], true);
  return r;
}

}  // namespace

TEST_CASE("2.5D(q, d) equals 2D(q) with d-way data parallelism over depth", "[tp2p5d][depth]") {
  const int world = world_size();
  std::vector<SummaCase> depth_cases;
  for (int q : {2, 3})
    if (world == 2 * q * q) depth_cases.push_back(summa_case(world, "2.5d", q, 2));  // 8 and 18 ranks
  for (const SummaCase& c25 : depth_cases) {
    const SummaCase c2 = summa_case(world, "2d", c25.q, 1);  // tp = q², dp = d
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(summa_label(c25) << " vs " << summa_label(c2) << " dp=" << c25.d << " " << dtype_name(dtype)) {
        const double tol = tolerance(dtype);
        const std::int64_t B = c25.batch(), K = c25.in(), N = c25.out(), Bd = B / c25.d;
        LinearSpec spec{"depth", K, N};
        spec.weight_init = InitSpec{InitSpec::Kind::normal, 0.5, 0.0};
        spec.bias_init = InitSpec{InitSpec::Kind::normal, 0.3, 0.0};
        const Matrix x = random_matrix(B, K, 21), dy = random_matrix(B, N, 22);
        const Matrix w = full_parameter(1234, "depth.weight", K, N, spec.weight_init);
        const std::vector<double> b = full_parameter(1234, "depth.bias", 1, N, spec.bias_init).v;
        const Matrix y_ref = add_row(matmul(x, w), b), dx_ref = matmul(dy, w, false, true);
        const Matrix dw_ref = matmul(x, dy, true, false);
        const std::vector<double> db_ref = column_sums(dy);
        std::ostringstream report;  // measured errors, printed by rank 0
        auto check = [&](const std::vector<double>& got, const std::vector<double>& ref, const std::string& what) {
          const double err = relative_error(got, ref);
          report << "\n  " << what << " " << err;
          INFO(what << ": relative error " << err << " (tolerance " << tol << ")");
          CHECK(err <= tol);
        };

        ModeFixture f25(c25.mode, dtype);
        std::vector<LedgerEntry> depth_sums;
        const LinearResult r25 = run_linear(f25, spec, x, dy, "", &depth_sums);
        check(r25.y.v, y_ref.v, "2.5D Y vs serial");
        check(r25.dx.v, dx_ref.v, "2.5D dX vs serial");
        check(r25.dw.v, dw_ref.v, "2.5D dW vs serial");
        check(r25.db, db_ref, "2.5D db vs serial");
        // The depth sums are reduce_gradients' job: one all-reduce of the dW block over tp.dep,
        // one of the bias block over the col×dep plane.
        CHECK(depth_sums.size() == 2);  // CHECK, not REQUIRE: no rank may leave the SPMD case early
        if (depth_sums.size() == 2) {
          CHECK(depth_sums[0].op == CollectiveOp::all_reduce);
          CHECK(depth_sums[0].group == "tp.dep");
          CHECK(depth_sums[0].elements == (K / c25.q) * (N / c25.q));
          CHECK(depth_sums[1].op == CollectiveOp::all_reduce);
          CHECK(depth_sums[1].group == "tp.col-dep");
          CHECK(depth_sums[1].group_size == c25.q * c25.d);
          CHECK(depth_sums[1].elements == N / c25.q);
        }

        ModeFixture f2(c2.mode, dtype);
        const std::int64_t replica = f2.mesh->comm("dp").rank();
        CHECK(f2.mesh->comm("dp").size() == c25.d);
        const LinearResult r2 = run_linear(f2, spec, row_block(x, replica * Bd, Bd), row_block(dy, replica * Bd, Bd),
                                           "dp", nullptr);
        check(r2.y.v, row_block(y_ref, replica * Bd, Bd).v, "2D+dp Y vs serial");
        check(r2.dx.v, row_block(dx_ref, replica * Bd, Bd).v, "2D+dp dX vs serial");
        check(r2.dw.v, dw_ref.v, "2D+dp dW vs serial");
        check(r2.db, db_ref, "2D+dp db vs serial");

        check(row_block(r25.y, replica * Bd, Bd).v, r2.y.v, "2.5D vs 2D+dp Y");
        check(row_block(r25.dx, replica * Bd, Bd).v, r2.dx.v, "2.5D vs 2D+dp dX");
        check(r25.dw.v, r2.dw.v, "2.5D vs 2D+dp dW");
        check(r25.db, r2.db, "2.5D vs 2D+dp db");
        if (f2.mesh->rank() == 0)
          std::cout << summa_label(c25) << " vs 2D+dp " << dtype_name(dtype) << ": relative errors" << report.str() << "\n";
      }
    }
  }
}
