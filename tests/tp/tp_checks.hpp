#pragma once
// The checks every tensor-parallel mode must pass, shared by the host suite
// (test_tp_layers.cpp) and the GPU suite (tests/gpu/test_gpu_tp_layers.cpp): written once over
// any fixture with the ModeFixture members (mode, mesh, scatter, gather, gather_vector,
// gather_matrix, set_full_value), compared with the serial float64 reference of reference.hpp by
// ‖Δ‖∞ / ‖ref‖∞.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tp/mlp.hpp"
#include "support/tp_harness.hpp"

namespace mdtp::testing {

inline const InitSpec kTestWeightInit{InitSpec::Kind::normal, 0.5, 0.0};
inline const InitSpec kTestBiasInit{InitSpec::Kind::normal, 0.3, 0.0};

// A Linear with non-trivial weights and biases.
inline LinearSpec test_linear_spec(const std::string& name, std::int64_t in, std::int64_t out) {
  LinearSpec s{name, in, out};
  s.weight_init = kTestWeightInit;
  s.bias_init = kTestBiasInit;
  return s;
}

struct RefLinear {
  Matrix w;
  std::vector<double> b;
  Matrix x;  // input saved by forward
};

inline RefLinear ref_linear(const LinearSpec& s) {
  return RefLinear{full_parameter(1234, s.name + ".weight", s.in_features, s.out_features, s.weight_init),
                   full_parameter(1234, s.name + ".bias", 1, s.out_features, s.bias_init).v, {}};
}

inline void check_close(const std::vector<double>& got, const std::vector<double>& ref, double tol,
                        const std::string& what) {
  double err = relative_error(got, ref);
  INFO(what << ": relative error " << err << " (tolerance " << tol << ")");
  CHECK(err <= tol);
}

// A chain of three Linears (3D parity), forward output, dX, dW and db of every layer.
template <class Fixture>
void check_linear_chain(Fixture& f, const ModeCase& c, double tol) {
  const std::int64_t fu = c.feature_unit(), B = c.row_unit() * 3;
  const std::int64_t dims[4] = {fu * 5, fu * 7, fu * 3, fu * 2};
  std::vector<std::unique_ptr<Linear>> layers;
  std::vector<LinearSaved> saved(3);
  std::vector<RefLinear> refs;
  Layout layout = f.mode->residual_layout();
  for (int l = 0; l < 3; ++l) {
    LinearSpec s = test_linear_spec("chain." + std::to_string(l), dims[l], dims[l + 1]);
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
    h = layers[l]->forward(h, saved[static_cast<std::size_t>(l)]);
    check_close(f.gather(h, layers[l]->output_layout(), B, dims[l + 1]).v, hr.v, tol,
                "forward output of layer " + std::to_string(l));
  }
  Matrix dy = random_matrix(B, dims[3], 8);
  Tensor g = f.scatter(dy, layers[2]->output_layout());
  Matrix gr = dy;
  for (int l = 2; l >= 0; --l) {
    g = layers[l]->backward(g, saved[static_cast<std::size_t>(l)]);
    Matrix dw = matmul(refs[l].x, gr, true, false);
    std::vector<double> db = column_sums(gr);
    gr = matmul(gr, refs[l].w, false, true);
    check_close(f.gather(g, layers[l]->input_layout(), B, dims[l]).v, gr.v, tol, "dX of layer " + std::to_string(l));
    std::vector<Parameter*> ps = layers[l]->parameters();
    reduce_gradients(ps, *f.mesh, *f.backend);
    check_close(f.gather_matrix(*ps[0], true).v, dw.v, tol, "dW of layer " + std::to_string(l));
    check_close(f.gather_vector(*ps[1], true), db, tol, "db of layer " + std::to_string(l));
  }
}

// LayerNorm with non-trivial γ, β and an offset input: output, dX, dγ, dβ.
template <class Fixture>
void check_layernorm(Fixture& f, const ModeCase& c, double tol) {
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
  LayerNormSaved saved;
  Tensor y = ln->forward(f.scatter(x, layout), saved);
  check_close(f.gather(y, layout, B, H).v, ref.y.v, tol, "LayerNorm output");
  Tensor dx = ln->backward(f.scatter(dy, layout), saved);
  check_close(f.gather(dx, layout, B, H).v, ref.dx.v, tol, "LayerNorm dX");
  reduce_gradients(ln->parameters(), *f.mesh, *f.backend);
  check_close(f.gather_vector(*ln->parameters()[0], true), ref.dgamma, tol, "LayerNorm dγ");
  check_close(f.gather_vector(*ln->parameters()[1], true), ref.dbeta, tol, "LayerNorm dβ");
}

// Linear → GeLU → Linear: output, dX and every parameter gradient.
template <class Fixture>
void check_mlp(Fixture& f, const ModeCase& c, double tol) {
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
  MlpSaved saved;
  Tensor out = mlp.forward(f.scatter(x, layout), saved);
  check_close(f.gather(out, layout, B, H).v, y.v, tol, "MLP output");
  Matrix dact = matmul(dy, w2, false, true), dpre = dact;
  for (std::size_t i = 0; i < dpre.v.size(); ++i) dpre.v[i] *= gelu_grad(pre.v[i]);
  Tensor dx = mlp.backward(f.scatter(dy, layout), saved);
  check_close(f.gather(dx, layout, B, H).v, matmul(dpre, w1, false, true).v, tol, "MLP dX");
  std::vector<Parameter*> ps = mlp.parameters();
  reduce_gradients(ps, *f.mesh, *f.backend);
  check_close(f.gather_matrix(*ps[0], true).v, matmul(x, dpre, true, false).v, tol, "MLP dW1");
  check_close(f.gather_vector(*ps[1], true), column_sums(dpre), tol, "MLP db1");
  check_close(f.gather_matrix(*ps[2], true).v, matmul(act, dy, true, false).v, tol, "MLP dW2");
  check_close(f.gather_vector(*ps[3], true), column_sums(dy), tol, "MLP db2");
}

}  // namespace mdtp::testing
