// mdtp train: trains the GPT model under mpiexec in any tensor-parallel mode, data parallelism
// filling the rest of the world (dp = world / tp).  Defaults: the shipped character-level corpus
// (data/corpus.txt), a 2-layer, 4-head, 64-wide GPT with block 32, global batch 8, AdamW.
//
//   mpiexec -n 8 mdtp train --tp-mode 2d --tp 4 --steps 50 --out results/train.h5
//   mpiexec -n 4 mdtp train --tp-mode 1d --tp 4 --init-from ckpt.h5 --save ckpt2.h5
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "plan/schedule.hpp"
#include "run/stop_request.hpp"
#include "train/trainer.hpp"
#ifdef MDTP_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/device_comm.hpp"
#endif

namespace mdtp::cli {
namespace {

struct TrainOptions {
  TrainConfig config;
  std::string device = "host";
};

// --device cuda: one GPU per local rank, the CUDA backend, NCCL communicators (MDTP_COMM=mpi for
// the staged MPI communicator, which lets ranks share a GPU).
TrainDevice train_device(const std::string& name) {
  TrainDevice device;
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

// The model of the activation peak inside a step: there is none with a pipeline, whose boundary
// tensors in flight depend on the peers' timing (docs/memory.md).
std::string in_step_model(const TrainResult& r) {
  const std::int64_t bytes = r.kept_activations.in_step_model;
  return bytes >= 0 ? std::to_string(bytes) + " B" : std::string("not modelled with a pipeline");
}

int run_train(TrainConfig c, const std::string& device, const std::string& command_line) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  c.device = train_device(device);
  c.command_line = command_line;
  const TrainResult r = train(c, MPI_COMM_WORLD, rank == 0 ? &std::cout : nullptr);
  if (rank == 0) {
    std::cout << "trained " << describe(r.model) << " in mode " << c.tp_mode << " (tp " << c.tp << ", pp " << c.pp
              << ", dp " << r.dp << ", zero " << c.zero.stage << (c.zero.offload ? " offload" : "") << "; stages "
              << r.partition << "): " << r.steps.size() << " steps";
    if (!r.steps.empty()) std::cout << ", final loss " << r.steps.back().loss;
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
    // faults (docs/failures.md): a run stopped by a signal says so and exits kStoppedExit.
    if (r.skipped_nonfinite > 0) std::cout << "skipped " << r.skipped_nonfinite << " steps with a non-finite loss\n";
    if (r.stop_signal != 0)
      std::cout << "mdtp train: stopped by " << run::signal_name(r.stop_signal) << " after step " << r.state.step
                << (c.save.empty() ? "" : "; checkpoint written") << (c.out.empty() ? "" : "; results written")
                << "\n" << std::flush;
  }
  return r.stop_signal != 0 ? run::kStoppedExit : 0;
}

// The model's shape; 0 (not given) takes it from the checkpoint, the data or kDefaultModel.
void add_model_options(CLI::App& app, GptConfig& model) {
  auto size = [&app](const char* name, std::int64_t& target, const std::string& what, std::int64_t fallback) {
    const std::string otherwise = fallback > 0 ? ", else " + std::to_string(fallback) : "";
    add(app, name, target, what + " (default: the checkpoint's, else the data's" + otherwise + ")")
        ->check(at_least(1))
        ->default_str("");
  };
  size("--layers", model.n_layer, "transformer layers", kDefaultModel.n_layer);
  size("--embd", model.n_embd, "embedding width", kDefaultModel.n_embd);
  size("--heads", model.n_head, "attention heads", kDefaultModel.n_head);
  size("--vocab", model.vocab_size, "vocabulary size", kDefaultModel.vocab_size);
  size("--seq", model.block_size, "sequence length T", kDefaultModel.block_size);
}

}  // namespace

Command add_train(CLI::App& root) {
  auto o = std::make_shared<TrainOptions>();
  TrainConfig& c = o->config;
  CLI::App* app = add_command(root, "train", "(MPI) train the GPT model in any tensor-parallel mode");
  app->footer("Run under mpiexec: trains GPT-2 on the launched ranks, dp = world / (tp · pp).  Examples:\n"
              "  mpiexec -n 8 mdtp train --tp-mode 1d --tp 2 --pp 2 --schedule 1f1b --micro-batches 4\n"
              "  mpiexec -n 8 mdtp train --tp-mode 2d --tp 4 --steps 10 --dtype f64 --grad-clip 1\n"
              "  mpiexec -n 8 mdtp train --tp-mode 1d --tp 2 --zero 3 --zero-bucket-mb 1");
  add_tp_mode(*app, "--tp-mode", c.tp_mode, "tensor-parallel mode");
  add(*app, "--tp", c.tp, "tensor-parallel size");
  add(*app, "--tp-depth", c.tp_depth, "2.5d depth d");
  add(*app, "--pp", c.pp, "pipeline stages (dp = world / (tp · pp))")->check(at_least(1));
  add_parsed(*app, "--schedule", c.schedule, [](const std::string& s) { return parse_schedule(s); }, "1f1b",
             "pipeline schedule: gpipe, 1f1b, interleaved or zb-h1");
  add(*app, "--micro-batches", c.micro_batches, "micro-batches per step (each replica's batch / m sequences each)")
      ->check(at_least(1));
  add(*app, "--chunks", c.chunks, "model chunks per stage (interleaved)")->check(at_least(1));
  add(*app, "--pp-layers", c.pp_layers, "blocks per virtual stage, pp·chunks counts (default: an even split)")
      ->type_name("N,N,...");
  add(*app, "--group-size", c.group_size, "interleaved: micro-batch group size N (0: pp)")->check(at_least(0));
  add_model_options(*app, c.model);
  add(*app, "--batch", c.batch, "global batch, in sequences");
  add(*app, "--steps", c.steps, "optimizer steps");
  add(*app, "--lr", c.optimizer.lr, "learning rate");
  add(*app, "--optimizer", c.optimizer.kind, "sgd or adamw (AdamW: beta 0.9, 0.95, eps 1e-8, weight decay 0.1)")
      ->check(one_of({"sgd", "adamw"}));
  add(*app, "--grad-clip", c.optimizer.grad_clip, "clip the global gradient norm to this (0: no clipping)");
  add(*app, "--zero", c.zero.stage, "ZeRO stage over dp: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters")
      ->check(between(0, 3));
  add(*app, "--zero-bucket-mb", c.zero.bucket_mb, "ZeRO bucket size cap, MiB");
  app->add_flag("--zero-offload", c.zero.offload, "ZeRO 1-3: master weights, moments and the update in host memory");
  add_parsed(*app, "--recompute", c.recompute, [](const std::string& s) { return parse_activation_recompute(s); },
             "none",
             "activation recomputation: none, selective (the attention core's probabilities again from the kept "
             "Q, K, V) or full (each block's forward again before its backward)");
  app->add_flag("--zero-keep-params", c.zero.keep_parameters_for_step,
                "ZeRO 3: gather each unit's parameters once per step, not once per pass");
  app->add_flag("--zero-reduce-per-micro-batch", c.zero.reduce_per_micro_batch,
                "ZeRO 2-3: reduce-scatter the gradients after every micro-batch (m x the traffic, full buckets "
                "freed per micro-batch), not once per step");
  add_dtype(*app, "--dtype", c.dtype, "f32 or f64");
  add(*app, "--seed", c.seed, "seed of the initial parameters and the data order");
  add(*app, "--data", c.data, "token data (.h5) or a text corpus (.txt) (default: the shipped corpus)")
      ->type_name("FILE");
  add(*app, "--init-from", c.init_from, "checkpoint to start from")->type_name("CKPT.h5");
  add(*app, "--save", c.save, "checkpoint to write after the last step")->type_name("CKPT.h5");
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
  return {app, true, [o](const std::string& command_line) { return run_train(o->config, o->device, command_line); }};
}

}  // namespace mdtp::cli
