// 3D Linear specifics, beyond the cross-mode suite (tests/tp): the exact collective list of both
// keep options and both parities, a parity 0 → 1 → 0 → 1 chain against the serial float64
// reference with both keep options (and the two options bit-identical), the memory the kept
// gathers cost, and the divisibility / layout refusals.  Runs on 8 (q = 2) and 27 (q = 3) ranks.
#include <catch2/catch.hpp>
#include <cmath>

#include "support/tp_harness.hpp"
#include "tp3d/linear_3d.hpp"
#include "tp3d/mode_3d.hpp"

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

// The 3D case of this world size (8 → q = 2, 27 → q = 3); none for other sizes.
const ModeCase* cube_case() {
  static const std::vector<ModeCase> cases = cases_for_world(world_size());
  for (const ModeCase& c : cases)
    if (c.mode == TpMode::d3) return &c;
  return nullptr;
}

int cube_side(const ModeCase& c) { return static_cast<int>(std::lround(std::cbrt(c.config.tp))); }

// Building a mesh costs seconds on 27 oversubscribed ranks, so each test case builds one fixture
// and varies the options through a Mode3D of its own (Catch sections would rebuild it per leaf).
Mode3D mode_with(const ModeFixture& f, bool keep_gathered) {
  return Mode3D(TpContext{*f.mesh, *f.backend, f.dtype, 1234, TpOptions{keep_gathered}});
}

struct Call {
  CollectiveOp op;
  std::string group;
  std::int64_t elements;
};

std::string describe(const Call& c) {
  return std::string(collective_name(c.op)) + " " + c.group + " " + std::to_string(c.elements);
}

// The list linear_3d.hpp documents, from the sizes alone.
std::vector<Call> expected_calls(int parity, bool keep, std::int64_t B, std::int64_t K, std::int64_t N, int q) {
  const std::string I = parity == 0 ? "tp.input" : "tp.output", O = parity == 0 ? "tp.output" : "tp.input";
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q, bk = B * K / q2, kn = K * N / q2, bn = B * N / q2;
  const auto AG = CollectiveOp::all_gather, RS = CollectiveOp::reduce_scatter;
  // forward, then the backward-input pass (dY, W again, dX), then the weight pass (X again, dW).
  std::vector<Call> calls{{AG, I, bk}, {AG, "tp.weight", kn}, {RS, O, bn}, {AG, O, bn}};
  if (!keep) calls.push_back({AG, "tp.weight", kn});
  calls.push_back({RS, I, bk});
  if (!keep) calls.push_back({AG, I, bk});
  calls.push_back({RS, "tp.weight", kn});
  return calls;
}

struct RefLinear {
  Matrix w;
  std::vector<double> b;
  Matrix x;
};

void check_close(const std::vector<double>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  const double err = relative_error(got, ref);
  INFO(what << ": ‖Δ‖∞/‖ref‖∞ = " << err << " (tolerance " << tol << ")");
  CHECK(err <= tol);
}

// Every full result of a chain run, in a fixed order, so two runs can be compared exactly.
struct ChainResult {
  std::vector<std::vector<double>> tensors;
  double worst = 0.0;  // largest relative error against the reference
};

// Three Linear3D, parity 0 → 1 → 0 → 1, forward and backward, every output and gradient checked
// against the serial reference.  Sizes are multiples of q² with factors 3, 5 and 7, all distinct.
ChainResult run_chain(const ModeCase& c, const ModeFixture& f, bool keep) {
  const Mode3D mode = mode_with(f, keep);
  const int q = cube_side(c);
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q;
  const std::int64_t B = 5 * q2, dims[4] = {3 * q2, 7 * q2, 2 * q2, 5 * q};
  const double tol = tolerance(f.dtype);
  ChainResult result;
  auto record = [&](const std::vector<double>& got, const std::vector<double>& ref, const std::string& what) {
    check_close(got, ref, tol, what);
    result.worst = std::max(result.worst, relative_error(got, ref));
    result.tensors.push_back(got);
  };

  std::vector<std::unique_ptr<Linear>> layers;
  std::vector<LinearSaved> saved(3);
  std::vector<RefLinear> refs;
  Layout layout = Mode3D::activation_layout(0);
  for (int l = 0; l < 3; ++l) {
    LinearSpec s = spec("chain3d." + std::to_string(l), dims[l], dims[l + 1]);
    layers.push_back(mode.linear(s, layout));
    REQUIRE(layers.back()->input_layout() == Mode3D::activation_layout(l % 2));
    REQUIRE(layers.back()->output_layout() == Mode3D::activation_layout(1 - l % 2));
    layout = layers.back()->output_layout();
    refs.push_back(RefLinear{full_parameter(1234, s.name + ".weight", dims[l], dims[l + 1], kWeightInit),
                             full_parameter(1234, s.name + ".bias", 1, dims[l + 1], kBiasInit).v, {}});
  }
  Matrix x = random_matrix(B, dims[0], 11);
  Tensor h = f.scatter(x, Mode3D::activation_layout(0));
  Matrix hr = x;
  for (int l = 0; l < 3; ++l) {
    refs[l].x = hr;
    hr = add_row(matmul(hr, refs[l].w), refs[l].b);
    h = layers[l]->forward(h, saved[static_cast<std::size_t>(l)]);
    record(f.gather(h, layers[l]->output_layout(), B, dims[l + 1]).v, hr.v, "Y of layer " + std::to_string(l));
  }
  Matrix dy = random_matrix(B, dims[3], 12);
  Tensor g = f.scatter(dy, layers[2]->output_layout());
  Matrix gr = dy;
  for (int l = 2; l >= 0; --l) {
    g = layers[l]->backward(g, saved[static_cast<std::size_t>(l)]);
    Matrix dw = matmul(refs[l].x, gr, true, false);
    std::vector<double> db = column_sums(gr);
    gr = matmul(gr, refs[l].w, false, true);
    const std::string n = std::to_string(l);
    record(f.gather(g, layers[l]->input_layout(), B, dims[l]).v, gr.v, "dX of layer " + n);
    std::vector<Parameter*> ps = layers[l]->parameters();
    reduce_gradients(ps, *f.mesh, *f.backend);
    record(f.gather_matrix(*ps[0], true).v, dw.v, "dW of layer " + n);
    record(f.gather_vector(*ps[1], true), db, "db of layer " + n);
  }
  return result;
}

}  // namespace

TEST_CASE("3D Linear issues exactly the documented collectives", "[tp3d][ledger]") {
  const ModeCase* c = cube_case();
  if (c == nullptr) return;
  const int q = cube_side(*c);
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q;
  const std::int64_t B = 5 * q2, K = 3 * q2, N = 7 * q;
  ModeFixture f(*c, DType::f64);
  for (int parity : {0, 1}) {
    for (bool keep : {true, false}) {
      INFO("q=" << q << " parity " << parity << (keep ? " keep gathered" : " keep shards"));
      const Layout in = Mode3D::activation_layout(parity);
      auto layer = mode_with(f, keep).linear(spec("ledger", K, N), in);
      Tensor x = f.scatter(random_matrix(B, K, 21), in);
      Tensor dy = f.scatter(random_matrix(B, N, 22), layer->output_layout());
      f.ledger.clear();
      LinearSaved saved;
      Tensor y = layer->forward(x, saved);
      Tensor dx = layer->backward(dy, saved);
      const std::vector<Call> want = expected_calls(parity, keep, B, K, N, q);
      const auto& got = f.ledger.entries();
      REQUIRE(got.size() == want.size());
      for (std::size_t n = 0; n < want.size(); ++n) {
        INFO("call " << n << ": expected " << describe(want[n]) << ", got "
                     << describe(Call{got[n].op, got[n].group, got[n].elements}));
        CHECK(got[n].op == want[n].op);
        CHECK(got[n].group == want[n].group);
        CHECK(got[n].elements == want[n].elements);
        CHECK(got[n].group_size == q);
        CHECK(got[n].dtype == DType::f64);
      }
    }
  }

  // Memory: keeping the gathers holds X(j,k) [B/q, K/q] and W(k,i) [K/q, N/q] (f64) from forward
  // to backward; either way backward releases what forward kept.
  const MemoryTracker& mem = f.backend->allocator().tracker();
  std::int64_t kept[2] = {0, 0};
  for (bool keep : {false, true}) {
    INFO((keep ? "keep gathered" : "keep shards"));
    const Layout in = Mode3D::activation_layout(0);
    auto layer = mode_with(f, keep).linear(spec("memory", K, N), in);
    Tensor x = f.scatter(random_matrix(B, K, 23), in);
    const std::int64_t before = mem.current(MemCategory::activations);
    LinearSaved saved;
    Tensor y = layer->forward(x, saved);
    kept[keep] = mem.current(MemCategory::activations) - before - static_cast<std::int64_t>(y.bytes());
    Tensor dx = layer->backward(f.scatter(random_matrix(B, N, 24), layer->output_layout()), saved);
    CHECK(mem.current(MemCategory::activations) - before == static_cast<std::int64_t>(y.bytes() + dx.bytes()));
    CHECK(mem.current(MemCategory::communication) == 0);
  }
  CHECK(kept[0] == 0);
  CHECK(kept[1] == (B / q * K / q + K / q * N / q) * 8);
}

TEST_CASE("a chain of three 3D Linears (parity 0→1→0→1) matches the serial reference", "[tp3d][chain]") {
  const ModeCase* c = cube_case();
  if (c == nullptr) return;
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO("q=" << cube_side(*c) << " " << dtype_name(dtype));
    ModeFixture f(*c, dtype);
    ChainResult gathered = run_chain(*c, f, true);
    ChainResult shards = run_chain(*c, f, false);
    WARN("q=" << cube_side(*c) << " " << dtype_name(dtype) << ": worst ‖Δ‖∞/‖ref‖∞ " << gathered.worst
              << " (keep gathered), " << shards.worst << " (keep shards)");
    // Same collectives on the same data, same products: the two options agree bit for bit.
    REQUIRE(gathered.tensors.size() == shards.tensors.size());
    for (std::size_t n = 0; n < shards.tensors.size(); ++n) CHECK(gathered.tensors[n] == shards.tensors[n]);
  }
}

TEST_CASE("3D Linear refuses what it cannot split, on every rank, before any collective", "[tp3d][errors]") {
  const ModeCase* c = cube_case();
  if (c == nullptr) return;
  const int q = cube_side(*c);
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q;
  ModeFixture f(*c);
  const Layout p0 = Mode3D::activation_layout(0), p1 = Mode3D::activation_layout(1);
  f.ledger.clear();
  const std::string k_bad = std::to_string(3 * q2 + q), n_bad = std::to_string(2 * q + 1);
  for (const Layout& in : {p0, p1}) {
    CHECK_THROWS_WITH(f.mode->linear(spec("bad_k", 3 * q2 + q, 2 * q), in),
                      Catch::Contains("bad_k") && Catch::Contains("in_features K=" + k_bad) &&
                          Catch::Contains("must be divisible by q²=" + std::to_string(q2)));
    CHECK_THROWS_WITH(f.mode->linear(spec("bad_n", 3 * q2, 2 * q + 1), in),
                      Catch::Contains("bad_n") && Catch::Contains("out_features N=" + n_bad) &&
                          Catch::Contains("must be divisible by q=" + std::to_string(q)));
  }
  // Only the two parity layouts are accepted.
  const Layout swapped{"3d.swapped", {"tp.input", "tp.weight"}, {"tp.output"}};
  CHECK_THROWS_WITH(f.mode->linear(spec("bad_layout", 3 * q2, 2 * q), swapped),
                    Catch::Contains("3d.p0") && Catch::Contains("3d.p1") && Catch::Contains("3d.swapped"));
  CHECK_THROWS_WITH(f.mode->linear(spec("bad_layout", 3 * q2, 2 * q), Layout{"1d.full", {}, {}}),
                    Catch::Contains("1d.full"));
  // The batch: rows of the full X.
  const std::int64_t b_bad = 5 * q2 + q;
  CHECK_THROWS_WITH(require_3d_batch(q, b_bad, "x"),
                    Catch::Contains("B=" + std::to_string(b_bad)) && Catch::Contains("q²=" + std::to_string(q2)));
  CHECK_NOTHROW(require_3d_batch(q, 5 * q2, "x"));
  CHECK_THROWS_WITH(f.scatter(random_matrix(b_bad, 3 * q2, 25), p0),
                    Catch::Contains("dimension 0 of size " + std::to_string(b_bad)) &&
                        Catch::Contains("divisible by " + std::to_string(q2)));
  CHECK(f.ledger.entries().empty());
}
