// mdtp train: trains the GPT model under mpiexec in any tensor-parallel mode, data parallelism
// filling the rest of the world (dp = world / tp).  Defaults: the shipped character-level corpus
// (data/corpus.txt), a 2-layer, 4-head, 64-wide GPT with block 32, global batch 8, AdamW.
//
//   mpiexec -n 8 mdtp train --tp-mode 2d --tp 4 --steps 50 --out results/train.h5
//   mpiexec -n 4 mdtp train --tp-mode 1d --tp 4 --init-from ckpt.h5 --save ckpt2.h5
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "train/trainer.hpp"
#ifdef MDTP_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/device_comm.hpp"
#endif

namespace mdtp::cli {
namespace {

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

}  // namespace

int run_train(const std::vector<std::string>& argv) {
  Args args(argv,
            {"--tp-mode", "--tp", "--tp-depth", "--layers", "--embd", "--heads", "--vocab", "--seq", "--batch", "--steps",
             "--lr", "--optimizer", "--grad-clip", "--dtype", "--seed", "--data", "--init-from", "--save", "--dump-grads",
             "--out", "--device"},
            {});
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TrainConfig c;
  c.tp_mode = parse_tp_mode(args.get("--tp-mode", "none"));
  c.tp = static_cast<int>(args.get_int("--tp", 1));
  c.tp_depth = static_cast<int>(args.get_int("--tp-depth", 1));
  c.model.n_layer = args.get_int("--layers", 0);
  c.model.n_embd = args.get_int("--embd", 0);
  c.model.n_head = args.get_int("--heads", 0);
  c.model.vocab_size = args.get_int("--vocab", 0);
  c.model.block_size = args.get_int("--seq", 0);
  for (const char* option : {"--layers", "--embd", "--heads", "--vocab", "--seq"})
    require(!args.has(option) || args.get_int(option, 0) > 0, "option ", option, " needs a positive number; got ",
            args.get(option, ""));
  c.batch = args.get_int("--batch", c.batch);
  c.steps = args.get_int("--steps", c.steps);
  c.optimizer.kind = args.get("--optimizer", c.optimizer.kind);
  c.optimizer.lr = args.get_double("--lr", c.optimizer.lr);
  c.optimizer.grad_clip = args.get_double("--grad-clip", c.optimizer.grad_clip);
  c.dtype = parse_dtype(args.get("--dtype", "f32"));
  const long long seed = args.get_int("--seed", static_cast<long long>(c.seed));
  require(seed >= 0, "--seed must be >= 0; got ", seed);
  c.seed = static_cast<std::uint64_t>(seed);
  c.data = args.get("--data", "");
  c.init_from = args.get("--init-from", "");
  c.save = args.get("--save", "");
  c.dump_grads = args.get("--dump-grads", "");
  c.out = args.get("--out", "");
  c.device = train_device(args.get("--device", "host"));
  c.command_line = "mdtp train " + args.command_line();

  const TrainResult r = train(c, MPI_COMM_WORLD, rank == 0 ? &std::cout : nullptr);
  if (rank == 0) {
    std::cout << "trained " << describe(r.model) << " in mode " << c.tp_mode << " (tp " << c.tp << ", dp " << r.dp
              << "): " << r.steps.size() << " steps";
    if (!r.steps.empty()) std::cout << ", final loss " << r.steps.back().loss;
    std::cout << "\n";
    if (!c.save.empty()) std::cout << "checkpoint: " << c.save << "\n";
    if (!c.out.empty()) std::cout << "results: " << c.out << "\n";
  }
  return 0;
}

}  // namespace mdtp::cli
