#pragma once
// Shared pieces of the tensor-parallel tests: the meshes that fit the MPI world size, building a
// mode on them, and moving full matrices in and out of shards.
#include <mpi.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "core/backend.hpp"
#include "mesh/mesh.hpp"
#include "tp/reference.hpp"
#include "tp/mode.hpp"

namespace mdtp::testing {

struct ModeCase {
  TpMode mode = TpMode::none;
  MeshConfig config;  // world == the MPI world size
  std::string label() const;
  // Block sizes every dimension must be a multiple of (rows of activations, features).
  std::int64_t row_unit() const;
  std::int64_t feature_unit() const;
};

// The mode named `mode` (tp_mode_name) on a mesh of `world` ranks with that tp and depth.
ModeCase mode_case(const char* mode, int world, int tp, int depth = 1);

// Every (mode, mesh) of the TP issue that fits `world` ranks.
std::vector<ModeCase> cases_for_world(int world);

int world_size();

// A mode on its own mesh, ledger and backend.
struct ModeFixture {
  explicit ModeFixture(const ModeCase& c, DType dtype = DType::f64, TpOptions options = {});
  CommLedger ledger;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<TensorParallelMode> mode;
  DType dtype;

  Tensor scatter(const Matrix& full, const Layout& layout) const;
  Matrix gather(const Tensor& shard, const Layout& layout, std::int64_t rows, std::int64_t cols) const;
  std::vector<double> gather_vector(const Parameter& p, bool grad) const;
  Matrix gather_matrix(const Parameter& p, bool grad) const;
  void set_full_value(Parameter& p, const std::vector<double>& full) const;
};

// Random full matrix, identical on every rank (fixed seed).
Matrix random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed, double scale = 1.0);
// The full initial value of a parameter, computed from init_value (independent of sharding).
Matrix full_parameter(std::uint64_t seed, const std::string& name, std::int64_t rows, std::int64_t cols,
                      const InitSpec& init);

double tolerance(DType dtype);  // 1e-12 for f64, 1e-5 for f32

}  // namespace mdtp::testing
