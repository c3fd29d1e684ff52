// LayerNorm on 3D activations of both parities (the generic LayerNorm of src/tp reducing over
// whichever axis holds the hidden split) against the serial float64 reference, and the mesh
// planes the 3D parameters' gradients are summed over.  8 (q = 2) and 27 (q = 3) ranks.
#include <catch2/catch.hpp>
#include <cmath>

#include "support/tp_harness.hpp"
#include "tp3d/mode_3d.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

const ModeCase* cube_case() {
  static const std::vector<ModeCase> cases = cases_for_world(world_size());
  for (const ModeCase& c : cases)
    if (c.mode == TpMode::d3) return &c;
  return nullptr;
}

int cube_side(const ModeCase& c) { return static_cast<int>(std::lround(std::cbrt(c.config.tp))); }

void check_close(const std::vector<double>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  const double err = relative_error(got, ref);
  INFO(what << ": ‖Δ‖∞/‖ref‖∞ = " << err << " (tolerance " << tol << ")");
  CHECK(err <= tol);
}

}  // namespace

TEST_CASE("LayerNorm on 3D activations of either parity matches the serial reference", "[tp3d][layernorm]") {
  const ModeCase* c = cube_case();
  if (c == nullptr) return;
  const int q = cube_side(*c);
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q;
  const std::int64_t B = 7 * q2, H = 15 * q;  // H is split over one axis only: q suffices
  // One mesh per dtype: building one costs seconds on 27 oversubscribed ranks, and Catch
  // sections would rebuild it for every leaf.
  for (DType dtype : {DType::f64, DType::f32}) {
    ModeFixture f(*c, dtype);
    const double tol = tolerance(dtype);
    for (int parity : {0, 1}) {
      INFO("q=" << q << " parity " << parity << " " << dtype_name(dtype));
      const Layout layout = Mode3D::activation_layout(parity);
      auto ln = f.mode->layernorm("ln3d", H, layout);
      std::vector<double> gamma = random_matrix(1, H, 51, 1.0).v, beta = random_matrix(1, H, 52, 1.0).v;
      f.set_full_value(*ln->parameters()[0], gamma);
      f.set_full_value(*ln->parameters()[1], beta);
      Matrix x = random_matrix(B, H, 53, 2.0);
      for (auto& v : x.v) v += 3.0;  // an offset, as real activations have
      Matrix dy = random_matrix(B, H, 54);
      LayerNormRef ref = layernorm(x, gamma, beta, dy);

      Tensor xs = f.scatter(x, layout), dys = f.scatter(dy, layout);
      f.ledger.clear();
      LayerNormSaved saved;
      Tensor y = ln->forward(xs, saved);
      Tensor dx = ln->backward(dys, saved);
      // One gather of the [rows, 2] statistics and one all-reduce of the two sums, both over the
      // axis holding the hidden split (tp.output at parity 0, tp.input at parity 1).
      const std::string hidden = layout.col_groups[0];
      const std::int64_t rows = B / q2;
      REQUIRE(f.ledger.entries().size() == 2);
      CHECK(f.ledger.entries()[0].op == CollectiveOp::all_gather);
      CHECK(f.ledger.entries()[0].group == hidden);
      CHECK(f.ledger.entries()[0].elements == rows * 2 * q);
      CHECK(f.ledger.entries()[1].op == CollectiveOp::all_reduce);
      CHECK(f.ledger.entries()[1].group == hidden);
      CHECK(f.ledger.entries()[1].elements == rows * 2);

      check_close(f.gather(y, layout, B, H).v, ref.y.v, tol, "LayerNorm output");
      check_close(f.gather(dx, layout, B, H).v, ref.dx.v, tol, "LayerNorm dX");
      reduce_gradients(ln->parameters(), *f.mesh, *f.backend);
      check_close(f.gather_vector(*ln->parameters()[0], true), ref.dgamma, tol, "LayerNorm dγ");
      check_close(f.gather_vector(*ln->parameters()[1], true), ref.dbeta, tol, "LayerNorm dβ");
    }
  }
}

TEST_CASE("3D parameters name the planes their gradients are summed over", "[tp3d][parameters]") {
  const ModeCase* c = cube_case();
  if (c == nullptr) return;
  const int q = cube_side(*c);
  ModeFixture f(*c);
  // docs/theory.md §2: bias gradients over the weight×output plane of the Linear, LayerNorm γ/β
  // over the input×weight plane, where "input"/"output" are the roles of the parity.
  struct Expect {
    int parity;
    std::string bias_plane, ln_plane;
  };
  const Expect expectations[] = {{0, "tp.output-weight", "tp.input-weight"}, {1, "tp.input-weight", "tp.output-weight"}};
  for (const Expect& e : expectations) {
    const Layout in = Mode3D::activation_layout(e.parity);
    auto layer = f.mode->linear(LinearSpec{"p", 4L * q * q, 2L * q}, in);
    std::vector<Parameter*> ps = layer->parameters();
    REQUIRE(ps.size() == 2);
    CHECK(ps[0]->partial_grad_over.empty());
    CHECK(ps[0]->replicated_over.empty());  // every rank holds a distinct block of W
    CHECK(ps[1]->partial_grad_over == std::vector<std::string>{e.bias_plane});
    CHECK(ps[1]->replicated_over == std::vector<std::string>{e.bias_plane});
    auto ln = f.mode->layernorm("ln", 2L * q, in);
    for (Parameter* p : ln->parameters()) {
      CHECK(p->partial_grad_over == std::vector<std::string>{e.ln_plane});
      CHECK(p->replicated_over == std::vector<std::string>{e.ln_plane});
      CHECK(f.mesh->comm(e.ln_plane).size() == q * q);
    }
    CHECK(f.mesh->comm(e.bias_plane).size() == q * q);
  }
}
