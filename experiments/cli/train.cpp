// mdtp train: trains the GPT model under mpiexec in any tensor-parallel mode, data parallelism
// filling the rest of the world (dp = world / tp).  Defaults: the shipped character-level corpus
// (data/corpus.txt), a 2-layer, 4-head, 64-wide GPT with block 32, global batch 8, AdamW.
//
//   mpiexec -n 8 mdtp train --tp-mode 2d --tp 4 --steps 50 --out results/train.h5
//   mpiexec -n 4 mdtp train --tp 4 --init-from ckpt.h5 --save ckpt2.h5
//   mpiexec -n 8 mdtp train --config run.json --steps 2        (a spec from mdtp cost/plan --write-config)
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/spec_flags.hpp"
#include "io/output_path.hpp"
#include "comm/run_clock.hpp"
#include "plan/schedule.hpp"
#include "run/simulation_context.hpp"
#include "run/stop_request.hpp"
#include "simulate/charging_backend.hpp"
#include "simulate/charging_gpt_kernels.hpp"
#include "simulate/kernel_tally.hpp"
#include "simulate/link_traffic.hpp"
#include "train/trainer.hpp"
#ifdef MDTP_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/device_comm.hpp"
#endif

namespace mdtp::cli {
namespace {

struct TrainOptions {
  TrainConfig config;  // everything but the spec, which the flags resolve
  std::string device = "host";
  std::unique_ptr<SpecFlags> spec;
};

// --device cuda: one GPU per local rank, the CUDA backend, NCCL communicators (MDTP_COMM=mpi for
// the staged MPI communicator, which lets ranks share a GPU).
// `kernels`: on a simulated cluster, where this rank's charged kernels are counted by kind (or none).
TrainDevice train_device(const std::string& name, const std::shared_ptr<simulate::KernelTally>& kernels) {
  TrainDevice device;
  if (name == "host" && simulated_build()) {
    // The SMPI build: host kernels whose modelled time on the preset's GPU is charged to the
    // simulated clock (docs/simulate.md).
    device.make_backend = [make = simulate::simulated_backend_factory(kernels)](MPI_Comm) { return make(); };
    device.make_kernels = simulate::simulated_gpt_kernels_factory(kernels);
    return device;
  }
  if (name == "host") return device;
  require(name == "cuda", "--device must be host or cuda; got '", name, "'");
#ifdef MDTP_HAVE_CUDA
  device.make_backend = [](MPI_Comm world) -> std::unique_ptr<Backend> {
    select_device_for_local_rank(world);
    return make_cuda_backend();
  };
  device.make_comm_factory = [](const Backend& backend, MPI_Comm world) -> CommFactory {
    const auto& cuda = static_cast<const CudaBackend&>(backend);  // made by make_backend above
    return make_device_comm_factory(cuda, world, resolve_device_comm_kind(),
                                    resolve_wait_policy(measure_node_occupancy(world)));
  };
  device.make_kernels = [](const Backend& backend) -> std::unique_ptr<GptKernels> {
    return make_cuda_gpt_kernels(static_cast<const CudaBackend&>(backend));
  };
  return device;
#else
  throw_error("--device cuda needs mdtp built with CUDA (cmake -DMDTP_CUDA=ON); this build is host-only");
#endif
}

// `mdtp simulate --values synthetic`: the simulated ranks' tensors hold no values.
bool synthetic_values() {
  const auto sim = run::simulation_from_environment();
  return simulated_build() && sim && !sim->real_values;
}

// The model of the activation peak inside a step: there is none with a pipeline, whose boundary
// tensors in flight depend on the peers' timing (docs/memory.md).
std::string in_step_model(const TrainResult& r) {
  const std::int64_t bytes = r.kept_activations.in_step_model;
  return bytes >= 0 ? std::to_string(bytes) + " B" : std::string("not modelled with a pipeline");
}

int run_train(TrainConfig c, const SpecFlags& flags, const std::string& device, const std::string& command_line) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  c.spec = flags.resolve();
  if (const auto b = flags.micro_batch_size()) {
    const int dp = c.spec.layout.dp > 0 ? c.spec.layout.dp : world / std::max(1, c.spec.layout.tp * c.spec.layout.pp);
    c.spec.layout.micro_batches = micro_batches_for(c.spec.global_batch, dp, *b);
  }
  if (!flags.write_config_path().empty()) check_text_output(flags.write_config_path(), "--write-config");
  // On a simulated cluster, rank 0 counts its charged kernels by kind while inside its steps.
  const auto kernels =
      simulated_build() && rank == 0 ? std::make_shared<simulate::KernelTally>() : std::shared_ptr<simulate::KernelTally>{};
  c.device = train_device(device, kernels);
  require(device != "cuda" || c.spec.model.family != ModelFamily::llama,
          "--model llama with --device cuda: the rotary embedding, SwiGLU and grouped-query attention have no CUDA "
          "kernels yet; run it with --device host");
#ifdef MDTP_HAVE_CUDA
  // NCCL matches point-to-point calls per peer in issue order, and the pipeline executor does not
  // yet issue the two directions of a stage pair in one agreed group (docs/pipeline.md, "NCCL"):
  // refused on every rank before anything starts, instead of a hang.
  if (device == "cuda" && c.spec.layout.pp > 1 && resolve_device_comm_kind() == DeviceCommKind::nccl)
    throw_error("--pp ", c.spec.layout.pp, " with --device cuda: pipelines over NCCL are not supported yet; "
                "run them over the staged MPI communicator (MDTP_COMM=mpi) or without a pipeline (--pp 1)");
#endif
  c.command_line = command_line;
  // On a simulated cluster: which links the steps shared, counted by the one simulator every rank
  // runs in while rank 0 is inside its steps (set-up and reports left out), and what rank 0's
  // kernels were charged; rank 0 installs the counters and writes their tables.
  std::shared_ptr<simulate::LinkTraffic> links;
  if (kernels) {
    links = simulate::LinkTraffic::start_counting_simulated_network();
    c.extra_tables = [links, kernels](std::int64_t steps_run) {
      return std::map<std::string, Table>{{"links", links->table()}, {"kernels", kernels->table(steps_run)}};
    };
    c.on_steps = [links, kernels](bool steps_running) {
      links->set_counting(steps_running);
      kernels->set_counting(steps_running);
    };
  }
  const TrainResult r = train(c, MPI_COMM_WORLD, rank == 0 ? &std::cout : nullptr);
  if (links) std::cout << links->summary(3) << "\n";
  if (kernels) std::cout << kernels->summary(static_cast<std::int64_t>(r.steps.size())) << "\n";
  if (rank == 0) flags.write_config(r.spec);  // the spec that ran, every size resolved
  if (rank == 0) {
    const ParallelLayout& l = r.spec.layout;
    std::cout << "trained " << describe(r.spec.model) << " in mode " << l.mode << " (tp " << l.tp << ", pp " << l.pp
              << ", dp " << l.dp << ", zero " << r.spec.zero.stage << (r.spec.zero.offload ? " offload" : "")
              << "; stages " << r.partition << "): " << r.steps.size() << " steps";
    if (!r.steps.empty() && synthetic_values())
      std::cout << ", values synthetic (no loss: the tensors held nothing, docs/simulate.md)";
    else if (!r.steps.empty())
      std::cout << ", final loss " << r.steps.back().loss;
    std::cout << "\n";
    // activation memory (docs/memory.md)
    // With no step run nothing was measured: there is no comparison to report.
    if (r.steps.empty())
      std::cout << "activations: no step ran, nothing measured; model kept peak " << r.kept_activations.model
                << " B, inside a step " << in_step_model(r) << ", parameters inside a pass "
                << r.kept_activations.parameters_in_pass_model
                << " B, gradients inside a step " << r.gradients_in_step.model << " B\n";
    else
      std::cout << "activations: kept peak " << r.kept_activations.measured << " B on rank 0, model "
                << r.kept_activations.model << " B; inside a step " << r.kept_activations.in_step << " B, model "
                << in_step_model(r) << "; parameters inside a pass "
                << r.kept_activations.parameters_in_pass << " B, model "
                << r.kept_activations.parameters_in_pass_model << " B; gradients inside a step "
                << r.gradients_in_step.measured << " B, model " << r.gradients_in_step.model << " B; "
                << (r.kept_activations.equal_on_every_rank ? "equal on every rank" : "NOT equal on every rank")
                << "\n";
    // Set-up beside the step (docs/host-performance.md): the first step also pays first touches.
    std::cout << fmt::format("set-up: model built and initialised in {:.1f} ms, optimizer in {:.1f} ms",
                             r.setup_model_seconds * 1e3, r.setup_optimizer_seconds * 1e3);
    if (const double median = r.median_later_step_seconds(); median > 0) {
      std::cout << fmt::format(" ({:.0f} % and {:.0f} % of the median step after the first, {:.1f} ms)",
                               100 * r.setup_model_seconds / median, 100 * r.setup_optimizer_seconds / median,
                               median * 1e3);
    }
    std::cout << "\n";
    if (!c.save.empty()) std::cout << "checkpoint: " << c.save << "\n";
    if (!c.out.empty()) std::cout << "results: " << c.out << "\n";
    if (!flags.write_config_path().empty()) std::cout << "run spec: " << flags.write_config_path() << "\n";
    // faults (docs/failures.md): a run stopped by a signal says so and exits kStoppedExit.
    if (r.skipped_nonfinite > 0) std::cout << "skipped " << r.skipped_nonfinite << " steps with a non-finite loss\n";
    if (r.stop_signal != 0)
      std::cout << "mdtp train: stopped by " << run::signal_name(r.stop_signal) << " after step " << r.state.step
                << (c.save.empty() ? "" : "; checkpoint written") << (c.out.empty() ? "" : "; results written")
                << "\n" << std::flush;
  }
  return r.stop_signal != 0 ? run::kStoppedExit : 0;
}

}  // namespace

Command add_train(CLI::App& root) {
  auto o = std::make_shared<TrainOptions>();
  TrainConfig& c = o->config;
  CLI::App* app = add_command(root, "train", "(MPI) train the GPT model in any tensor-parallel mode");
  app->footer("Run under mpiexec: trains GPT-2 on the launched ranks, dp = world / (tp · pp).  Examples:\n"
              "  mpiexec -n 8 mdtp train --tp 2 --pp 2 --schedule 1f1b --micro-batches 4\n"
              "  mpiexec -n 8 mdtp train --tp-mode 2d --tp 4 --steps 10 --dtype f64 --grad-clip 1\n"
              "  mpiexec -n 8 mdtp train --tp 2 --zero 3 --zero-bucket-mb 1\n"
              "  mpiexec -n 8 mdtp train --config run.json --steps 2   (a spec from mdtp cost/plan --write-config)");
  o->spec = std::make_unique<SpecFlags>(
      *app, kAllSpecFlags, c.spec,
      "the checkpoint's, else the data's, else " + std::to_string(kDefaultModel.layers) + " layers, hidden " +
          std::to_string(kDefaultModel.hidden) + ", " + std::to_string(kDefaultModel.heads) + " heads, seq " +
          std::to_string(kDefaultModel.seq));
  add(*app, "--steps", c.steps, "optimizer steps");
  add(*app, "--data", c.data, "token data (.h5) or a text corpus (.txt) (default: the shipped corpus)")
      ->type_name("FILE");
  add(*app, "--init-from", c.init_from,
      "checkpoint to start from: mdtp's HDF5 (resumes exactly), or Hugging Face GPT-2 or Llama weights (.safetensors, or "
      "a sharded model's .index.json, with config.json beside it)")
      ->type_name("CKPT");
  add(*app, "--save", c.save,
      "checkpoint to write after the last step: .h5 (weights, optimizer state, data position) or .safetensors "
      "(Hugging Face GPT-2 or Llama weights and a config.json beside them)")
      ->type_name("CKPT");
  add(*app, "--dump-grads", c.dump_grads, "write the first step's reduced gradients")->type_name("FILE.h5");
  add(*app, "--out", c.out, "results file to append a /runs/NNNN-train group to")->type_name("FILE.h5");
  // faults (docs/failures.md)
  app->add_flag("--skip-nonfinite", c.skip_nonfinite,
                "skip a step whose loss is NaN/Inf (counted in the results) instead of stopping");
  app->add_flag("--sync-timing", c.sync_timing,
                "time each blocking collective after a barrier on its group: transfer and wait for the last peer "
                "apart in the ledger table (also MDTP_SYNC_TIMING=1)");
  add(*app, "--device", o->device, "host, or cuda (a build with -DMDTP_CUDA=ON; one GPU per local rank)")
      ->check(one_of({"host", "cuda"}));
  add_renamed_flags(*app, renamed_run_flags());
  return {app, true, [o](const std::string& command_line) {
            return run_train(o->config, *o->spec, o->device, command_line);
          }};
}

}  // namespace mdtp::cli
