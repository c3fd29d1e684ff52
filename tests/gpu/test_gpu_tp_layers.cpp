// The tensor-parallel layers on the GPU: the checks of tests/tp/test_tp_layers.cpp with a
// CudaBackend and the device communicators.  Every mode against the serial float64 reference
// (tests/tp/reference.hpp) — a chain of three Linears (3D parity), LayerNorm and the MLP, forward
// output and every gradient, non-square sizes — in f64 (≤ 1e-12) and f32 (≤ 1e-5), ‖Δ‖∞/‖ref‖∞;
// and a bf16 Linear chain forward (fp32 GEMM accumulation, ≤ 1e-2) against an f64 product of the
// bf16 values the layers hold.
//
// The mesh's communicators come from make_device_comm_factory: MDTP_COMM=nccl|mpi when set,
// otherwise NCCL when every rank has its own GPU and the staged MPI communicator when ranks of a
// node share one (ctest runs 2, 4 and 8 ranks on one machine: with one GPU they share it).
// Cases by world size:
//   1: none, 1d, 1d-sp, 2d, 2.5d, 3d, all with tp=1 (their code paths with trivial groups);
//   2: 1d, 1d-sp;  4: 1d, 1d-sp, 2d q=2, 2.5d q=2 d=1;  8: 2.5d q=2 d=2, 3d q=2.
// Inputs go to the device with from_f64 + scatter_full, results come back with gather_full +
// to_f64.  Without a GPU the binary prints "SKIPPED: no GPU available" and exits 77
// (gpu_skip_listener.cpp).
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/device_comm.hpp"
#include "gpu_test_support.hpp"
#include "mesh/mesh.hpp"
#include "tp/layout.hpp"
#include "tp/mlp.hpp"
#include "modes/registry.hpp"
#include "tp/mode.hpp"
#include "tp/tp_checks.hpp"

using namespace mdtp;
using namespace mdtp::testing;
using mdtp::gpu_test::DeviceSetup;
using mdtp::gpu_test::device_setup;

namespace {

constexpr double kBf16Tolerance = 1e-2;

// The (mode, mesh) pairs the GPU runs check at `world` ranks (see the header comment).
std::vector<ModeCase> gpu_cases_for_world(int world) {
  auto make = [&](const char* mode, int tp, int depth = 1) { return mode_case(mode, world, tp, depth); };
  std::vector<ModeCase> cases;
  switch (world) {
    case 1:
      cases = {make("none", 1), make("1d", 1),     make("1d-sp", 1),
               make("2d", 1),   make("2.5d", 1), make("3d", 1)};
      break;
    case 2: cases = {make("1d", 2), make("1d-sp", 2)}; break;
    case 4:
      cases = {make("1d", 4), make("1d-sp", 4), make("2d", 4), make("2.5d", 4, 1)};
      break;
    case 8: cases = {make("2.5d", 8, 2), make("3d", 8)}; break;
    default: break;
  }
  return cases;
}

// A mode on its own mesh of device communicators, ledger and CudaBackend (the CUDA counterpart
// of tp_harness's host-only ModeFixture).  Members are destroyed in reverse order: the mode and
// the mesh (its communicators) before the backend they use, the ledger last.
struct CudaModeFixture {
  CudaModeFixture(const ModeCase& c, DType dt) : dtype(dt) {
    const DeviceSetup& setup = device_setup("gpu_tp_layers");
    backend = make_cuda_backend();
    // With the mesh's topology, NCCL splits every group from one world communicator, up front.
    const Topology topology(c.config);
    DeviceCommFactory factory =
        make_device_comm_factory(*backend, MPI_COMM_WORLD, setup.kind, setup.policy, nullptr, &topology);
    mesh = std::make_unique<Mesh>(c.config, MPI_COMM_WORLD, ledger, factory);
    mode = make_tp_mode(c.mode, TpContext{*mesh, *backend, dtype, 1234, TpOptions{}});
    comm_name = setup.comm_name();
  }

  CommLedger ledger;
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<TensorParallelMode> mode;
  DType dtype;
  std::string comm_name;  // backend_name() of the mesh's communicators

  Tensor scatter(const Matrix& full, const Layout& layout) const {
    Tensor t = backend->from_f64(full.v, {full.rows, full.cols}, dtype, MemCategory::other);
    return scatter_full(t, layout, *mesh, *backend, MemCategory::activations);
  }
  Matrix gather(const Tensor& shard, const Layout& layout, std::int64_t rows, std::int64_t cols) const {
    CHECK(shard.device() == DeviceKind::cuda);
    CHECK(shard.dtype() == dtype);
    Tensor full = gather_full(shard, layout, *mesh, *backend, rows, cols);
    Matrix m(rows, cols);
    m.v = backend->to_f64(full);
    return m;
  }
  std::vector<double> gather_vector(const Parameter& p, bool grad) const {
    const Tensor& t = grad ? p.grad : p.value;
    CHECK(t.device() == DeviceKind::cuda);
    Tensor full = gather_full(t, p.layout, *mesh, *backend, 1, p.full_shape.back());
    return backend->to_f64(full);
  }
  Matrix gather_matrix(const Parameter& p, bool grad) const {
    return gather(grad ? p.grad : p.value, p.layout, p.full_shape[0], p.full_shape[1]);
  }
  void set_full_value(Parameter& p, const std::vector<double>& full) const {
    Tensor t = backend->from_f64(full, p.full_shape, dtype, MemCategory::other);
    Tensor shard = scatter_full(t, p.layout, *mesh, *backend, MemCategory::parameters, p.name);
    backend->copy(shard, p.value);
  }
  // The mesh carries device tensors (no silent host fallback) with the communicator chosen.
  void check_device_mesh() const {
    for (const char* group : {"world", "tp"}) {
      INFO("group " << group);
      CHECK(std::string(mesh->comm(group).backend_name()) == comm_name);
    }
  }
};

}  // namespace

TEST_CASE("GPU: Linear and a chain of three Linears match the serial reference", "[gpu][tp][linear]") {
  for (const ModeCase& c : gpu_cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        CudaModeFixture f(c, dtype);
        f.check_device_mesh();
        const double tol = tolerance(dtype);
        check_linear_chain(f, c, tol);
      }
    }
  }
}

TEST_CASE("GPU: LayerNorm matches the serial reference", "[gpu][tp][layernorm]") {
  for (const ModeCase& c : gpu_cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        CudaModeFixture f(c, dtype);
        f.check_device_mesh();
        const double tol = tolerance(dtype);
        check_layernorm(f, c, tol);
      }
    }
  }
}

TEST_CASE("GPU: two-layer MLP (Linear → GeLU → Linear) matches the serial MLP", "[gpu][tp][mlp]") {
  for (const ModeCase& c : gpu_cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype)) {
        CudaModeFixture f(c, dtype);
        f.check_device_mesh();
        const double tol = tolerance(dtype);
        check_mlp(f, c, tol);
      }
    }
  }
}

// bf16 is a storage type on the CUDA backend: its GEMM is cublasGemmEx on bf16 operands with
// CUBLAS_COMPUTE_32F (fp32 accumulation), elementwise ops compute in fp32.  The reference is an
// f64 product of the values as the layers hold them (x, W, b rounded to bf16 once, read back from
// the device), so the tolerance measures the layer — fp32 accumulation, the bf16 rounding of its
// output and of the partial sums its collectives carry — not the rounding of the inputs.  Each
// layer of the chain is checked on the bf16 input it was actually given.
TEST_CASE("GPU: bf16 Linear chain forward (fp32 accumulation) matches f64 products of its bf16 values",
          "[gpu][tp][linear][bf16]") {
  for (const ModeCase& c : gpu_cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label() << " bf16") {
      CudaModeFixture f(c, DType::bf16);
      f.check_device_mesh();
      const std::int64_t fu = c.feature_unit(), B = c.row_unit() * 3;
      const std::int64_t dims[3] = {fu * 5, fu * 7, fu * 3};
      std::vector<std::unique_ptr<Linear>> layers;
      Layout layout = f.mode->residual_layout();
      for (int l = 0; l < 2; ++l) {
        layers.push_back(f.mode->linear(test_linear_spec("bf16." + std::to_string(l), dims[l], dims[l + 1]), layout));
        layout = layers.back()->output_layout();
      }
      Tensor h = f.scatter(random_matrix(B, dims[0], 7), f.mode->residual_layout());
      Matrix in = f.gather(h, f.mode->residual_layout(), B, dims[0]);  // x as rounded to bf16
      for (int l = 0; l < 2; ++l) {
        std::vector<Parameter*> ps = layers[l]->parameters();
        CHECK(ps[0]->value.dtype() == DType::bf16);
        const Matrix w = f.gather_matrix(*ps[0], false);
        const std::vector<double> b = f.gather_vector(*ps[1], false);
        const Matrix ref = add_row(matmul(in, w), b);
        LinearSaved saved;  // forward only: dropped at the end of the iteration
        h = layers[l]->forward(h, saved);
        Matrix got = f.gather(h, layers[l]->output_layout(), B, dims[l + 1]);
        check_close(got.v, ref.v, kBf16Tolerance, "bf16 forward output of layer " + std::to_string(l));
        in = std::move(got);
      }
    }
  }
}
