// The GPT model (src/model/gpt.hpp) on the GPU: the tiny GPT of tests/model built on a CudaBackend
// with the device communicators, one forward + backward (+ reduce_gradients) from the same
// parameters and batch, against the same model on the host backend — the serial model (mode
// none, f64) that tests/model checks against an independent reference and finite differences,
// computed on every rank over MPI_COMM_SELF.  Checked: the initial parameters (the same GPT-2
// init by logical index), the loss and every gathered (logical, checkpoint-layout) gradient;
// f64 within 1e-10 and f32 within 1e-4, ‖Δ‖∞/‖ref‖∞ (the loss: |Δ|/|ref|).
//
// Cases by world size (mesh and communicators as in test_gpu_tp_layers.cpp: NCCL with one GPU
// per rank, otherwise — or with MDTP_COMM=mpi — the staged MPI communicator, so ctest's 4 ranks
// share one GPU):
//   1: none;   4: 1d (tp=4), 2d (tp=4, q=2), 1d (tp=2, dp=2), none (dp=4).
// Without a GPU the binary prints "SKIPPED: no GPU available" and exits 77 (gpu_skip_listener.cpp).
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
#include "support/gpt_harness.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "modes/registry.hpp"
#include "tp/mode.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;
using namespace mdtp::testing;
using mdtp::gpu_test::DeviceSetup;
using mdtp::gpu_test::device_setup;

namespace {

ModeCase make_case(const char* mode, int world, int tp) {
  MeshConfig c;
  c.world = world;
  c.tp = tp;
  c.tp_mode = parse_tp_mode(mode);
  c.tp_depth = 1;
  return ModeCase{c.tp_mode, c};
}

std::vector<ModeCase> gpu_model_cases(int world) {
  switch (world) {
    case 1: return {make_case("none", 1, 1)};
    case 4:
      return {make_case("1d", 4, 4), make_case("2d", 4, 4), make_case("1d", 4, 2),
              make_case("none", 4, 1)};
    default: return {};
  }
}

// GptRun (tests/support/gpt_harness.hpp) on a CudaBackend and a mesh of device communicators.
// Members are destroyed in reverse order: model, mode, mesh (its communicators) before the
// backend, the ledger last.
struct CudaGptRun {
  CudaGptRun(const ModeCase& c, const ModelShape& config, std::int64_t global_batch, DType dtype) {
    const DeviceSetup& setup = device_setup("gpu_gpt");
    backend = make_cuda_backend();
    // With the mesh's topology, NCCL splits every group from one world communicator, up front.
    const Topology topology(c.config);
    DeviceCommFactory factory =
        make_device_comm_factory(*backend, MPI_COMM_WORLD, setup.kind, setup.policy, nullptr, &topology);
    mesh = std::make_unique<Mesh>(c.config, MPI_COMM_WORLD, ledger, factory);
    mode = make_tp_mode(c.mode, TpContext{*mesh, *backend, dtype, 1234, {}});
    const int dp = mesh->comm("dp").size();
    REQUIRE(global_batch % dp == 0);
    kernels = make_cuda_gpt_kernels(*backend);
    model = std::make_unique<GptModel>(*mode, config, global_batch / dp, std::vector<UnitRange>{}, "dp", kernels.get());
  }
  CommLedger ledger;
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<TensorParallelMode> mode;
  std::unique_ptr<GptKernels> kernels;
  std::unique_ptr<GptModel> model;

  std::vector<std::int32_t> replica_rows(const std::vector<std::int32_t>& global) const {
    const std::int64_t n = model->batch_per_replica() * model->config().seq;
    const auto first = global.begin() + mesh->comm("dp").rank() * n;
    return std::vector<std::int32_t>(first, first + n);
  }
  double step(const TokenBatch& batch) {
    const double loss = forward_backward(*model, replica_rows(batch.inputs), replica_rows(batch.targets));
    model->reduce_gradients();
    return loss;
  }
  ParamMap gather(bool grad) const {
    ParamMap out;
    for (const ModelParam& p : model->parameters()) {
      const Tensor& t = grad ? p.param->grad : p.param->value;
      CHECK(t.device() == DeviceKind::cuda);
      out[p.name()] = gather_logical(p, t, *mesh, *backend);
    }
    return out;
  }
  void set(const ParamMap& values) {
    for (ModelParam& p : model->parameters()) scatter_logical(p, values.at(p.name()), p.param->value, *mesh, *backend);
  }
};

double max_error(const ParamMap& got, const ParamMap& ref, std::string& worst) {
  double err = 0.0;
  worst.clear();
  for (const auto& [name, values] : ref) {
    const auto it = got.find(name);
    const double e = it == got.end() ? INFINITY : relative_error(it->second, values);
    if (e >= err) {
      err = e;
      worst = name;
    }
  }
  return err;
}

}  // namespace

TEST_CASE("GPU: the GPT's loss and gradients match the host model", "[gpu][model]") {
  const int world = world_size();
  const ModelSize size = model_size_for_world(world);
  const TokenBatch batch = random_batch(size.config, size.batch, 21);
  // The host reference: serial f64, identical on every rank.
  GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const ParamMap init = serial.gather(false);
  const ParamMap values = random_parameters(serial, 22);
  serial.set(values);
  const double ref_loss = serial.step(batch);
  const ParamMap ref_grads = serial.gather(true);

  for (const ModeCase& c : gpu_model_cases(world)) {
    for (DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label() << " dp=" << world / c.config.tp << " " << dtype_name(dtype)) {
        const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
        CudaGptRun run(c, size.config, size.batch, dtype);
        for (const char* group : {"world", "tp", "dp"}) {
          INFO("group " << group);
          CHECK(std::string(run.mesh->comm(group).backend_name()) ==
                device_setup("gpu_gpt").comm_name());
        }
        std::string worst;
        // Same GPT-2 init by logical index (exact in f64; f32 rounding of the same draws).
        const double init_err = max_error(run.gather(false), init, worst);
        INFO("initial values: worst " << worst << " " << init_err);
        CHECK(init_err <= (dtype == DType::f64 ? 0.0 : 1e-7));

        run.set(values);
        const double loss = run.step(batch);
        const double loss_err = std::abs(loss - ref_loss) / std::abs(ref_loss);
        const double grad_err = max_error(run.gather(true), ref_grads, worst);
        INFO("loss " << loss << " vs host " << ref_loss << " (error " << loss_err << "); worst gradient " << worst
                     << " " << grad_err << " (tolerance " << tol << ")");
        CHECK(loss_err <= tol);
        CHECK(grad_err <= tol);
        CHECK(ref_grads.size() == run.model->parameters().size());
        if (run.mesh->rank() == 0)
          std::printf("[gpu_gpt] %s dp=%d %s: loss %.12g, loss error %.3g, largest gradient error %.3g (%s)\n",
                      c.label().c_str(), world / c.config.tp, dtype_name(dtype), loss, loss_err, grad_err,
                      worst.c_str());
      }
    }
  }
}
