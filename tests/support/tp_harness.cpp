#include "support/tp_harness.hpp"

#include <sstream>

#include "modes/registry.hpp"

namespace mdtp::testing {

std::string ModeCase::label() const {
  std::ostringstream os;
  os << mode << " world=" << config.world << " tp=" << config.tp;
  if (mode == TpMode::d2p5) os << " d=" << config.tp_depth;
  return os.str();
}

std::int64_t ModeCase::row_unit() const {
  const int tp = config.tp;
  if (mode == TpMode::d1_sp) return tp;
  if (mode == TpMode::d2) return static_cast<std::int64_t>(std::lround(std::sqrt(tp)));
  if (mode == TpMode::d2p5) return static_cast<std::int64_t>(std::lround(std::sqrt(tp / config.tp_depth))) * config.tp_depth;
  if (mode == TpMode::d3) {
    auto q = static_cast<std::int64_t>(std::lround(std::cbrt(tp)));
    return q * q;
  }
  return 1;
}

std::int64_t ModeCase::feature_unit() const {
  const int tp = config.tp;
  if (mode == TpMode::d2 || mode == TpMode::d2p5) return static_cast<std::int64_t>(std::lround(std::sqrt(tp / config.tp_depth)));
  if (mode == TpMode::d3) {
    auto q = static_cast<std::int64_t>(std::lround(std::cbrt(tp)));
    return q * q;
  }
  return tp;
}

ModeCase mode_case(const char* mode, int world, int tp, int depth) {
  MeshConfig c;
  c.world = world;
  c.tp = tp;
  c.tp_mode = parse_tp_mode(mode);
  c.tp_depth = depth;
  return ModeCase{c.tp_mode, c};
}

std::vector<ModeCase> cases_for_world(int world) {
  auto make = [&](const char* name, int tp, int depth = 1) { return mode_case(name, world, tp, depth); };
  std::vector<ModeCase> cases;
  if (world == 1) cases.push_back(make("none", 1));
  if (world >= 2 && world <= 8) {
    cases.push_back(make("1d", world));
    cases.push_back(make("1d-sp", world));
  }
  if (world == 4) {
    cases.push_back(make("2d", 4));
    cases.push_back(make("2.5d", 4, 1));
  }
  if (world == 8) {
    cases.push_back(make("2d", 4));  // 2D q=2 with dp=2
    cases.push_back(make("2.5d", 8, 2));
    cases.push_back(make("3d", 8));
  }
  if (world == 9) cases.push_back(make("2d", 9));
  if (world == 18) cases.push_back(make("2.5d", 18, 2));
  if (world == 27) cases.push_back(make("3d", 27));
  return cases;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

ModeFixture::ModeFixture(const ModeCase& c, DType dt, TpOptions options) : backend(make_host_backend()), dtype(dt) {
  mesh = std::make_unique<Mesh>(c.config, MPI_COMM_WORLD, ledger);
  mode = make_tp_mode(c.mode, TpContext{*mesh, *backend, dtype, 1234, options});
}

Tensor ModeFixture::scatter(const Matrix& full, const Layout& layout) const {
  Tensor t = backend->from_f64(full.v, {full.rows, full.cols}, dtype, MemCategory::other);
  return scatter_full(t, layout, *mesh, *backend, MemCategory::activations);
}

Matrix ModeFixture::gather(const Tensor& shard, const Layout& layout, std::int64_t rows, std::int64_t cols) const {
  Tensor full = gather_full(shard, layout, *mesh, *backend, rows, cols);
  Matrix m(rows, cols);
  m.v = backend->to_f64(full);
  return m;
}

std::vector<double> ModeFixture::gather_vector(const Parameter& p, bool grad) const {
  Tensor full = gather_full(grad ? p.grad : p.value, p.layout, *mesh, *backend, 1, p.full_shape.back());
  return backend->to_f64(full);
}

Matrix ModeFixture::gather_matrix(const Parameter& p, bool grad) const {
  return gather(grad ? p.grad : p.value, p.layout, p.full_shape[0], p.full_shape[1]);
}

void ModeFixture::set_full_value(Parameter& p, const std::vector<double>& full) const {
  Tensor t = backend->from_f64(full, p.full_shape, dtype, MemCategory::other);
  Tensor shard = scatter_full(t, p.layout, *mesh, *backend, MemCategory::parameters, p.name);
  backend->copy(shard, p.value);
}

Matrix random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed, double scale) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  Matrix m(rows, cols);
  for (auto& x : m.v) x = dist(gen);
  return m;
}

Matrix full_parameter(std::uint64_t seed, const std::string& name, std::int64_t rows, std::int64_t cols,
                      const InitSpec& init) {
  Matrix m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m.v[static_cast<std::size_t>(i)] = init_value(seed, name, i, init);
  return m;
}

double tolerance(DType dtype) { return dtype == DType::f64 ? 1e-12 : 1e-5; }

}  // namespace mdtp::testing
