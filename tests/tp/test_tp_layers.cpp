// Every tensor-parallel mode against the serial float64 reference, on every mesh of the TP issue
// that fits the MPI world size: Linear, a chain of three Linears (3D parity), LayerNorm and the
// MLP, forward output and every gradient, in f64 (≤ 1e-12) and f32 (≤ 1e-5), with non-square
// sizes.  ‖Δ‖∞ / ‖ref‖∞ throughout.
#include <catch2/catch.hpp>

#include "tp_checks.hpp"

using namespace mdtp;
using namespace mdtp::testing;

TEST_CASE("Linear and a chain of three Linears match the serial reference", "[tp][linear]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        ModeFixture f(c, dtype);
        const double tol = tolerance(dtype);
        check_linear_chain(f, c, tol);
      }
    }
  }
}

TEST_CASE("LayerNorm matches the serial reference", "[tp][layernorm]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        ModeFixture f(c, dtype);
        const double tol = tolerance(dtype);
        check_layernorm(f, c, tol);
      }
    }
  }
}

TEST_CASE("two-layer MLP (Linear → GeLU → Linear) matches the serial MLP", "[tp][mlp]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        ModeFixture f(c, dtype);
        const double tol = tolerance(dtype);
        check_mlp(f, c, tol);
      }
    }
  }
}

TEST_CASE("shapes a mesh cannot split are refused on every rank before any collective", "[tp][errors]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label()) {
      ModeFixture f(c);
      const std::int64_t fu = c.feature_unit(), ru = c.row_unit();
      f.ledger.clear();
      if (fu > 1) {
        // A layout whose columns are split: the residual one, or (1D) the hidden one a column
        // layer produces, which the row layer splits.
        Layout split_input = f.mode->residual_layout();
        if (split_input.col_groups.empty()) split_input = f.mode->linear(test_linear_spec("ok", fu * 5, fu * 2), split_input)->output_layout();
        f.ledger.clear();
        CHECK_THROWS_WITH(f.mode->linear(test_linear_spec("bad", fu * 5 + 1, fu * 2), split_input),
                          Catch::Contains("bad") && Catch::Contains(std::to_string(fu * 5 + 1)) &&
                              Catch::Contains("divisible by"));
        CHECK_THROWS_WITH(f.mode->linear(test_linear_spec("bad_out", fu * 5, fu * 2 + 1), f.mode->residual_layout()),
                          Catch::Contains(std::to_string(fu * 2 + 1)) && Catch::Contains("divisible by"));
      }
      if (ru > 1) {
        Matrix x = random_matrix(ru * 3 + 1, fu * 5, 1);
        CHECK_THROWS_WITH(f.scatter(x, f.mode->residual_layout()),
                          Catch::Contains("dimension 0 of size " + std::to_string(ru * 3 + 1)) &&
                              Catch::Contains("divisible by " + std::to_string(ru)));
      }
      // Nothing was communicated before the refusals.
      CHECK(f.ledger.entries().empty());
    }
  }
}
