// Every tensor-parallel mode against the serial float64 reference, on every mesh of the TP issue
// that fits the MPI world size: Linear, a chain of three Linears (3D parity), LayerNorm and the
// MLP, forward output and every gradient, in f64 (≤ 1e-12) and f32 (≤ 1e-5), with non-square
// sizes.  ‖Δ‖∞ / ‖ref‖∞ throughout.
#include <catch2/catch.hpp>

#include "tp/mlp.hpp"
#include "tp_harness.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

const InitSpec kWeightInit{InitSpec::Kind::normal, 0.5, 0.0};
const InitSpec kBiasInit{InitSpec::Kind::normal, 0.3, 0.0};

LinearSpec spec(const std::string& name, std::int64_t in, std::int64_t out) {
  LinearSpec s{name, in, out};
  s.weight_init = kWeightInit;
  s.bias_init = kBiasInit;
  return s;
}

struct RefLinear {
  Matrix w;
  std::vector<double> b;
  Matrix x;  // input saved by forward
};

RefLinear ref_linear(const LinearSpec& s) {
  return RefLinear{full_parameter(1234, s.name + ".weight", s.in_features, s.out_features, s.weight_init),
                   full_parameter(1234, s.name + ".bias", 1, s.out_features, s.bias_init).v, {}};
}

void check_close(const std::vector<double>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  double err = relative_error(got, ref);
  INFO(what << ": relative error " << err << " (tolerance " << tol << ")");
  CHECK(err <= tol);
}

}  // namespace

TEST_CASE("Linear and a chain of three Linears match the serial reference", "[tp][linear]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        ModeFixture f(c, dtype);
        const double tol = tolerance(dtype);
        const std::int64_t fu = c.feature_unit(), B = c.row_unit() * 3;
        const std::int64_t dims[4] = {fu * 5, fu * 7, fu * 3, fu * 2};
        std::vector<std::unique_ptr<Linear>> layers;
        std::vector<RefLinear> refs;
        Layout layout = f.mode->residual_layout();
        for (int l = 0; l < 3; ++l) {
          LinearSpec s = spec("chain." + std::to_string(l), dims[l], dims[l + 1]);
          layers.push_back(f.mode->linear(s, layout));
          layout = layers.back()->output_layout();
          refs.push_back(ref_linear(s));
        }
        Matrix x = random_matrix(B, dims[0], 7);
        Tensor h = f.scatter(x, f.mode->residual_layout());
        Matrix hr = x;
        for (int l = 0; l < 3; ++l) {
          refs[l].x = hr;
          hr = add_row(matmul(hr, refs[l].w), refs[l].b);
          h = layers[l]->forward(h);
          check_close(f.gather(h, layers[l]->output_layout(), B, dims[l + 1]).v, hr.v, tol,
                      "forward output of layer " + std::to_string(l));
        }
        Matrix dy = random_matrix(B, dims[3], 8);
        Tensor g = f.scatter(dy, layers[2]->output_layout());
        Matrix gr = dy;
        for (int l = 2; l >= 0; --l) {
          g = layers[l]->backward(g);
          Matrix dw = matmul(refs[l].x, gr, true, false);
          std::vector<double> db = column_sums(gr);
          gr = matmul(gr, refs[l].w, false, true);
          check_close(f.gather(g, layers[l]->input_layout(), B, dims[l]).v, gr.v, tol, "dX of layer " + std::to_string(l));
          std::vector<Parameter*> ps = layers[l]->parameters();
          reduce_gradients(ps, *f.mesh);
          check_close(f.gather_matrix(*ps[0], true).v, dw.v, tol, "dW of layer " + std::to_string(l));
          check_close(f.gather_vector(*ps[1], true), db, tol, "db of layer " + std::to_string(l));
        }
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
        const std::int64_t H = c.feature_unit() * 5, B = c.row_unit() * 3;
        Layout layout = f.mode->residual_layout();
        auto ln = f.mode->layernorm("ln", H, layout);
        std::vector<double> gamma = random_matrix(1, H, 31, 1.0).v, beta = random_matrix(1, H, 32, 1.0).v;
        f.set_full_value(*ln->parameters()[0], gamma);
        f.set_full_value(*ln->parameters()[1], beta);
        Matrix x = random_matrix(B, H, 33, 2.0);
        for (auto& v : x.v) v += 3.0;  // an offset, as real activations have
        Matrix dy = random_matrix(B, H, 34);
        LayerNormRef ref = layernorm(x, gamma, beta, dy);
        Tensor y = ln->forward(f.scatter(x, layout));
        check_close(f.gather(y, layout, B, H).v, ref.y.v, tol, "LayerNorm output");
        Tensor dx = ln->backward(f.scatter(dy, layout));
        check_close(f.gather(dx, layout, B, H).v, ref.dx.v, tol, "LayerNorm dX");
        reduce_gradients(ln->parameters(), *f.mesh);
        check_close(f.gather_vector(*ln->parameters()[0], true), ref.dgamma, tol, "LayerNorm dγ");
        check_close(f.gather_vector(*ln->parameters()[1], true), ref.dbeta, tol, "LayerNorm dβ");
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
        const std::int64_t H = c.feature_unit() * 3, F = 4 * H, B = c.row_unit() * 5;
        Layout layout = f.mode->residual_layout();
        Mlp mlp(*f.mode, "mlp", H, F, layout);
        REQUIRE(mlp.output_layout() == layout);
        InitSpec wi{}, bi{InitSpec::Kind::normal, 0.02, 0.0};
        Matrix w1 = full_parameter(1234, "mlp.c_fc.weight", H, F, wi), w2 = full_parameter(1234, "mlp.c_proj.weight", F, H, wi);
        std::vector<double> b1 = full_parameter(1234, "mlp.c_fc.bias", 1, F, bi).v;
        std::vector<double> b2 = full_parameter(1234, "mlp.c_proj.bias", 1, H, bi).v;
        Matrix x = random_matrix(B, H, 41, 3.0), dy = random_matrix(B, H, 42);
        Matrix pre = add_row(matmul(x, w1), b1), act = pre;
        for (auto& v : act.v) v = gelu(v);
        Matrix y = add_row(matmul(act, w2), b2);
        Tensor out = mlp.forward(f.scatter(x, layout));
        check_close(f.gather(out, layout, B, H).v, y.v, tol, "MLP output");
        Matrix dact = matmul(dy, w2, false, true), dpre = dact;
        for (std::size_t i = 0; i < dpre.v.size(); ++i) dpre.v[i] *= gelu_grad(pre.v[i]);
        Tensor dx = mlp.backward(f.scatter(dy, layout));
        check_close(f.gather(dx, layout, B, H).v, matmul(dpre, w1, false, true).v, tol, "MLP dX");
        std::vector<Parameter*> ps = mlp.parameters();
        reduce_gradients(ps, *f.mesh);
        check_close(f.gather_matrix(*ps[0], true).v, matmul(x, dpre, true, false).v, tol, "MLP dW1");
        check_close(f.gather_vector(*ps[1], true), column_sums(dpre), tol, "MLP db1");
        check_close(f.gather_matrix(*ps[2], true).v, matmul(act, dy, true, false).v, tol, "MLP dW2");
        check_close(f.gather_vector(*ps[3], true), column_sums(dy), tol, "MLP db2");
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
        if (split_input.col_groups.empty()) split_input = f.mode->linear(spec("ok", fu * 5, fu * 2), split_input)->output_layout();
        f.ledger.clear();
        CHECK_THROWS_WITH(f.mode->linear(spec("bad", fu * 5 + 1, fu * 2), split_input),
                          Catch::Contains("bad") && Catch::Contains(std::to_string(fu * 5 + 1)) &&
                              Catch::Contains("divisible by"));
        CHECK_THROWS_WITH(f.mode->linear(spec("bad_out", fu * 5, fu * 2 + 1), f.mode->residual_layout()),
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
