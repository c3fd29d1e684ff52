// SummaLinear (2D and 2.5D): the exact collective list of one forward + backward, the
// communication buffers it uses, its results against the serial float64 reference, and the
// refusal of shapes the grid cannot split.
#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>

#include "summa_cases.hpp"
#include "tp2d/summa_linear.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

LinearSpec summa_spec(const SummaCase& c) {
  LinearSpec s{"summa", c.in(), c.out()};
  s.weight_init = InitSpec{InitSpec::Kind::normal, 0.5, 0.0};
  s.bias_init = InitSpec{InitSpec::Kind::normal, 0.3, 0.0};
  return s;
}

struct Call {
  CollectiveOp op;
  std::string group;
  int group_size;
  std::int64_t elements;
  std::string str() const {
    std::ostringstream os;
    os << collective_name(op) << " " << group << "(" << group_size << ") " << elements;
    return os.str();
  }
  bool operator==(const Call&) const = default;
};

// The list documented in src/tp2d/summa.hpp, derived here from q, B, K, N (and d for 2.5D, whose
// grid sees B/d rows), in the order the ledger records it (completion order).
std::vector<Call> expected_calls(const SummaCase& c) {
  std::vector<Call> calls;
  const int q = c.q;
  if (q == 1) return calls;  // one local GEMM, nothing to communicate
  const std::int64_t m = c.batch() / c.d / q, k = c.in() / q, n = c.out() / q;
  for (int s = 0; s < q; ++s) {  // forward Y = X·W
    calls.push_back({CollectiveOp::broadcast, "tp.row", q, m * k});
    calls.push_back({CollectiveOp::broadcast, "tp.col", q, k * n});
  }
  // Broadcast step j, reduce step j; reduce j-1 completes after broadcast j.
  auto reduce_product = [&](const char* bcast_group, std::int64_t bcast_elems, const char* reduce_group,
                            std::int64_t reduce_elems) {
    calls.push_back({CollectiveOp::broadcast, bcast_group, q, bcast_elems});
    for (int j = 1; j < q; ++j) {
      calls.push_back({CollectiveOp::broadcast, bcast_group, q, bcast_elems});
      calls.push_back({CollectiveOp::reduce, reduce_group, q, reduce_elems});
    }
    calls.push_back({CollectiveOp::reduce, reduce_group, q, reduce_elems});
  };
  reduce_product("tp.col", k * n, "tp.row", m * k);  // dX = dY·Wᵀ
  reduce_product("tp.row", m * k, "tp.col", k * n);  // dW += Xᵀ·dY
  return calls;
}

std::vector<Call> recorded_calls(const CommLedger& ledger, DType dtype) {
  std::vector<Call> calls;
  for (const LedgerEntry& e : ledger.entries()) {
    calls.push_back({e.op, e.group, e.group_size, e.elements});
    CHECK(e.dtype == dtype);
    CHECK(e.logical_bytes == e.elements * static_cast<std::int64_t>(dtype_size(dtype)));
  }
  return calls;
}

std::string listing(const std::vector<Call>& calls) {
  std::string s;
  for (const Call& c : calls) s += "\n  " + c.str();
  return s;
}

// Checks ‖Δ‖∞/‖ref‖∞ ≤ tol and appends the measured error to `report` (printed by rank 0).
void check_close(const std::vector<double>& got, const std::vector<double>& ref, double tol, const std::string& what,
                 std::ostringstream& report) {
  const double err = relative_error(got, ref);
  report << " " << what << " " << err;
  INFO(what << ": relative error " << err << " (tolerance " << tol << ")");
  CHECK(err <= tol);
}

void print_report(const std::string& label, const std::ostringstream& report) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::cout << label << ": relative errors" << report.str() << "\n";
}

}  // namespace

TEST_CASE("SummaLinear issues exactly the documented collectives and matches the serial reference",
          "[tp2d][summa][ledger]") {
  for (const SummaCase& c : summa_cases(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(summa_label(c) << " " << dtype_name(dtype)) {
        ModeFixture f(c.mode, dtype);
        const LinearSpec s = summa_spec(c);
        auto linear = f.mode->linear(s, f.mode->residual_layout());
        const std::int64_t B = c.batch(), K = c.in(), N = c.out();
        // Every data-parallel replica (2D with dp > 1) trains on the same batch here.
        const Matrix x = random_matrix(B, K, 11), dy = random_matrix(B, N, 12);
        const Tensor xs = f.scatter(x, linear->input_layout());
        const Tensor dys = f.scatter(dy, linear->output_layout());

        MemoryTracker& memory = f.backend->allocator().tracker();
        const std::int64_t comm_before = memory.current(MemCategory::communication);
        memory.reset_peaks();
        f.ledger.clear();
        LinearSaved saved;
        Tensor y = linear->forward(xs, saved);
        Tensor dx = linear->backward(dys, saved);
        const std::vector<Call> got = recorded_calls(f.ledger, dtype);
        const std::vector<Call> want = expected_calls(c);
        INFO("recorded:" << listing(got) << "\nexpected:" << listing(want));
        CHECK(got == want);

        // Receive and partial buffers are released, and at most two blocks of each operand of
        // one product were alive at once.
        const std::int64_t m = B / c.d / c.q, k = K / c.q, n = N / c.q;
        const auto elem = static_cast<std::int64_t>(dtype_size(dtype));
        CHECK(memory.current(MemCategory::communication) == comm_before);
        CHECK(memory.peak(MemCategory::communication) - comm_before <= 2 * (m * k + k * n) * elem);

        const double tol = tolerance(dtype);
        const Matrix w = full_parameter(1234, "summa.weight", K, N, s.weight_init);
        const std::vector<double> b = full_parameter(1234, "summa.bias", 1, N, s.bias_init).v;
        std::vector<Parameter*> ps = linear->parameters();
        reduce_gradients(ps, *f.mesh, *f.backend);
        // gather_full works over "tp": with dp > 1 each replica gathers its own (equal) result.
        std::ostringstream report;
        check_close(f.gather(y, linear->output_layout(), B, N).v, add_row(matmul(x, w), b).v, tol, "Y", report);
        check_close(f.gather(dx, linear->input_layout(), B, K).v, matmul(dy, w, false, true).v, tol, "dX", report);
        check_close(f.gather_matrix(*ps[0], true).v, matmul(x, dy, true, false).v, tol, "dW", report);
        check_close(f.gather_vector(*ps[1], true), column_sums(dy), tol, "db", report);
        print_report(summa_label(c) + " " + dtype_name(dtype), report);
      }
    }
  }
}

TEST_CASE("SUMMA shapes the grid cannot split are refused on every rank before any collective",
          "[tp2d][summa][errors]") {
  for (const SummaCase& c : summa_cases(world_size())) {
    if (c.q * c.d == 1) continue;
    DYNAMIC_SECTION(summa_label(c)) {
      ModeFixture f(c.mode);
      const std::int64_t rows_divisor = static_cast<std::int64_t>(c.d) * c.q;
      f.ledger.clear();
      // A batch divisible by q but not by d·q (2.5D d > 1), or not by q (2D).
      const std::int64_t bad_batch = c.d > 1 ? rows_divisor * 3 + c.q : rows_divisor * 3 + 1;
      const std::string split = c.mode.mode == TpMode::d2 ? "tp.col" : "tp.dep×tp.col";
      CHECK_THROWS_WITH(f.scatter(random_matrix(bad_batch, c.in(), 3), f.mode->residual_layout()),
                        Catch::Contains("dimension 0 of size " + std::to_string(bad_batch)) &&
                            Catch::Contains("divisible by " + std::to_string(rows_divisor)) &&
                            Catch::Contains(split));
      if (c.q > 1) {
        LinearSpec bad = summa_spec(c);
        bad.in_features = c.in() + 1;
        CHECK_THROWS_WITH(f.mode->linear(bad, f.mode->residual_layout()),
                          Catch::Contains(std::to_string(c.in() + 1)) &&
                              Catch::Contains("divisible by " + std::to_string(c.q)));
        bad = summa_spec(c);
        bad.out_features = c.out() + 1;
        CHECK_THROWS_WITH(f.mode->linear(bad, f.mode->residual_layout()),
                          Catch::Contains(std::to_string(c.out() + 1)) &&
                              Catch::Contains("divisible by " + std::to_string(c.q)));
      }
      const Layout wrong{"1d.full", {}, {}};
      CHECK_THROWS_WITH(f.mode->linear(summa_spec(c), wrong),
                        Catch::Contains("expected an input in layout " + f.mode->residual_layout().name));
      // A backward without its forward is refused too (no collective is started).
      auto linear = f.mode->linear(summa_spec(c), f.mode->residual_layout());
      const Tensor dy = f.scatter(random_matrix(c.batch(), c.out(), 4), linear->output_layout());
      LinearSaved never_forwarded;
      CHECK_THROWS_WITH(linear->backward(dy, never_forwarded), Catch::Contains("before forward"));
      CHECK(f.ledger.entries().empty());
    }
  }
}
