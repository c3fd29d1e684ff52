#include "train/trainer.hpp"

#include <chrono>
#include <cstdio>

#include "comm/ledger_stats.hpp"
#include "io/results_file.hpp"
#include "mesh/mesh.hpp"
#include "modes/registry.hpp"
#include "run/provenance.hpp"
#include "run/root_task.hpp"
#include "io/token_data.hpp"

namespace mdtp {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The model shape: explicit values, else the checkpoint's (explicit ones must then agree), else
// the data's vocabulary and row length, else the defaults.
GptConfig resolve_model(const TrainConfig& tc, const TokenData* hdf5_data) {
  GptConfig m = tc.model;
  if (!tc.init_from.empty()) {
    const GptConfig saved = read_checkpoint_config(tc.init_from);
    auto take = [&](std::int64_t& value, std::int64_t from_file, const char* option) {
      require(value == 0 || value == from_file, "--init-from ", tc.init_from, " holds a model with ", option, " ",
              from_file, " but ", option, " ", value, " was given");
      value = from_file;
    };
    take(m.vocab_size, saved.vocab_size, "--vocab");
    take(m.n_layer, saved.n_layer, "--layers");
    take(m.n_head, saved.n_head, "--heads");
    take(m.n_embd, saved.n_embd, "--embd");
    take(m.block_size, saved.block_size, "--seq");
  }
  if (m.block_size == 0) m.block_size = hdf5_data ? hdf5_data->seq : kDefaultModel.block_size;
  if (m.n_layer == 0) m.n_layer = kDefaultModel.n_layer;
  if (m.n_head == 0) m.n_head = kDefaultModel.n_head;
  if (m.n_embd == 0) m.n_embd = kDefaultModel.n_embd;
  return m;
}

Table step_table() {
  Table t;
  t.integer("step").real("loss").real("grad_norm").real("seconds").real("tokens_per_s");
  return t;
}

Table ledger_table() {
  Table t;
  t.integer("step").text("phase").text("group").text("op").integer("group_size").real("calls").real("logical_bytes")
      .real("bus_bytes").real("seconds_mean").real("seconds_max");
  return t;
}

}  // namespace

TrainResult train(const TrainConfig& tc, MPI_Comm world, std::ostream* progress) {
  // ---- Everything below up to the Mesh is local and identical on every rank.
  int world_size = 1;
  MPI_Comm_size(world, &world_size);
  MeshConfig mesh_config;
  mesh_config.world = world_size;
  mesh_config.tp = tc.tp;
  mesh_config.tp_mode = tc.tp_mode;
  mesh_config.tp_depth = tc.tp_depth;
  const Topology topology(mesh_config);  // validates tp against the world and the mode's grid
  const int dp = topology.dp();
  require(tc.steps >= 0, "--steps must be >= 0; got ", tc.steps);
  require(tc.batch > 0 && tc.batch % dp == 0, "the global batch --batch ", tc.batch,
          " must be a positive multiple of dp=", dp, " (world ", world_size, " / tp ", tc.tp, ")");
  require(tc.dtype == DType::f32 || tc.dtype == DType::f64, "--dtype must be f32 or f64 on the host; got ",
          dtype_name(tc.dtype));
  validate(tc.optimizer);

  const bool text = tc.data.empty() || ends_with(tc.data, ".txt");
  TokenData data;
  if (!text) data = read_token_file(tc.data);
  TrainResult result;
  result.dp = dp;
  result.model = resolve_model(tc, text ? nullptr : &data);
  if (text) data = text_corpus_tokens(tc.data.empty() ? find_default_corpus() : tc.data, result.model.block_size);
  if (result.model.vocab_size == 0) result.model.vocab_size = data.vocab_size;
  validate(result.model);
  check_token_data(data, result.model.vocab_size, result.model.block_size, tc.batch);

  // ---- Collective from here on.
  CommLedger ledger;
  std::unique_ptr<Backend> backend = tc.device.make_backend ? tc.device.make_backend(world) : make_host_backend();
  Mesh mesh(mesh_config, world, ledger,
            tc.device.make_comm_factory ? tc.device.make_comm_factory(*backend, world) : CommFactory{});
  auto mode = make_tp_mode(tc.tp_mode, TpContext{mesh, *backend, tc.dtype, tc.seed, {}});
  const std::int64_t per_replica = tc.batch / dp;
  std::unique_ptr<GptKernels> kernels =
      tc.device.make_kernels ? tc.device.make_kernels(*backend) : make_host_gpt_kernels(*backend);
  GptModel model(*mode, result.model, per_replica, {}, "dp", kernels.get());
  Optimizer optimizer(tc.optimizer, model.parameters(), mesh, *backend);
  TrainingState& state = result.state;
  state.rng_state = tc.seed;
  if (!tc.init_from.empty()) state = load_checkpoint(tc.init_from, model, &optimizer);
  state.data_position %= data.rows;

  Table steps = step_table(), ledger_rows = ledger_table();
  const int replica = mesh.comm("dp").rank();
  const double tokens = static_cast<double>(tc.batch * result.model.block_size);
  for (std::int64_t s = 0; s < tc.steps; ++s) {
    const TokenRows rows = batch_rows(data, state.data_position, replica * per_replica, per_replica);
    ledger.clear();
    const auto t0 = std::chrono::steady_clock::now();
    model.zero_gradients();
    const double loss = model.forward_backward(rows.inputs, rows.targets);
    model.reduce_gradients();
    const auto t1 = std::chrono::steady_clock::now();
    if (s == 0 && !tc.dump_grads.empty()) {
      ledger.set_enabled(false);
      dump_gradients(tc.dump_grads, model, state.step + 1, loss, world);
      ledger.set_enabled(true);
    }
    const auto t2 = std::chrono::steady_clock::now();
    const double norm = optimizer.step();
    const auto t3 = std::chrono::steady_clock::now();
    state.step += 1;
    state.data_position = (state.data_position + tc.batch) % data.rows;

    // The slowest rank's step time (the gradient dump excluded), outside the ledger.
    ledger.set_enabled(false);
    Tensor seconds = backend->from_f64({std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count()}, {1}, DType::f64,
                                       MemCategory::other);
    mesh.comm("world").all_reduce(seconds, ReduceOp::max);
    ledger.set_enabled(true);
    StepRecord r{state.step, loss, norm, backend->to_f64(seconds)[0], 0.0};
    r.tokens_per_second = tokens / r.seconds;
    result.steps.push_back(r);
    steps.row()(r.step)(r.loss)(r.grad_norm)(r.seconds)(r.tokens_per_second);
    for (const LedgerStat& stat : reduce_ledger_stats(ledger, world, mesh.wait_policy()))
      ledger_rows.row()(r.step)(stat.key.phase)(stat.key.group)(collective_name(stat.key.op))(stat.group_size)(
          stat.calls.max)(stat.logical_bytes.max)(stat.bus_bytes.max)(stat.seconds.mean)(stat.seconds.max);
    if (progress) {
      char line[160];
      std::snprintf(line, sizeof line, "step %5lld  loss %.6f  grad-norm %.4f  %8.1f ms  %10.0f tok/s\n",
                    static_cast<long long>(r.step), r.loss, r.grad_norm, r.seconds * 1e3, r.tokens_per_second);
      *progress << line << std::flush;
    }
  }

  if (!tc.save.empty()) save_checkpoint(tc.save, model, &optimizer, state, world);
  if (!tc.out.empty()) {
    // Every run carries the same provenance (code, machine, mesh, MPI, oversubscription), then
    // what is particular to training.  Collective (host names are gathered), so outside the ledger.
    ledger.set_enabled(false);
    Attributes attrs = run::collect_provenance(
        mesh, world, {tc.command_line, tp_mode_name(tc.tp_mode), dtype_name(tc.dtype), backend->name()});
    ledger.set_enabled(true);
    const GptConfig& m = result.model;
    const Attributes training{{"tp", std::int64_t{tc.tp}},
                             {"tp_depth", std::int64_t{tc.tp_depth}},
                             {"dp", std::int64_t{dp}},
                             {"vocab_size", m.vocab_size},
                             {"n_layer", m.n_layer},
                             {"n_head", m.n_head},
                             {"n_embd", m.n_embd},
                             {"block_size", m.block_size},
                             {"batch", tc.batch},
                             {"optimizer", tc.optimizer.kind},
                             {"lr", tc.optimizer.lr},
                             {"grad_clip", tc.optimizer.grad_clip},
                             {"seed", static_cast<std::int64_t>(tc.seed)},
                             {"data", data.source}};
    attrs.insert(training.begin(), training.end());
    run::run_on_root(world, [&] { ResultsFile(tc.out).append_run("train", attrs, {{"steps", steps}, {"ledger", ledger_rows}}); });
  }
  return result;
}

}  // namespace mdtp
