#include "support/gpt_harness.hpp"

#include <filesystem>
#include <random>
#include <system_error>
#include <unistd.h>

#include "modes/registry.hpp"
#include "spec/run_spec.hpp"
#include "run/root_task.hpp"
#include "support/whole_model.hpp"

namespace mdtp::testing {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::vector<ModeCase> model_cases_for_world(int world) {
  std::vector<ModeCase> cases;
  switch (world) {
    case 1:
      cases = {mode_case("none", 1, 1)};
      break;
    case 2:
      cases = {mode_case("none", 2, 1), mode_case("1d", 2, 2), mode_case("1d-sp", 2, 2)};
      break;
    case 4:
      cases = {mode_case("1d", 4, 4),         mode_case("1d-sp", 4, 4), mode_case("2d", 4, 4),
               mode_case("2.5d", 4, 4, 1),  mode_case("1d", 4, 2),    mode_case("none", 4, 1)};
      break;
    case 8:
      cases = {mode_case("3d", 8, 8),          mode_case("2.5d", 8, 8, 2), mode_case("2d", 8, 4),
               mode_case("2.5d", 8, 4, 1),   mode_case("1d-sp", 8, 4),     mode_case("1d", 8, 2)};
      break;
    case 18:
      cases = {mode_case("2.5d", 18, 18, 2), mode_case("2d", 18, 9)};
      break;
    case 27:
      cases = {mode_case("3d", 27, 27)};
      break;
    default:
      break;
  }
  return cases;
}

ModelSize model_size_for_world(int world) {
  // Vocabulary 19 is padded by every vocabulary split of 2, 4, 6, 8 or 9 ranks.
  if (world == 18) return {ModelShape{2, 18, 3, 4, 19}, 12};  // q = 3: H, heads by 3; batch by dp·d·q
  if (world == 27) return {ModelShape{2, 18, 3, 3, 19}, 9};   // q = 3: H by q² = 9, batch by q²
  return {ModelShape{2, 24, 4, 4, 19}, 4};
}

TokenBatch random_batch(const ModelShape& config, std::int64_t batch, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(config.vocab - 1));
  TokenBatch b;
  for (std::int64_t i = 0; i < batch * config.seq; ++i) {
    b.inputs.push_back(token(gen));
    b.targets.push_back(token(gen));
  }
  return b;
}

GptRun::GptRun(const ModeCase& c, const ModelShape& config, std::int64_t global_batch, MPI_Comm comm, DType dtype,
               std::uint64_t seed)
    : backend(make_host_backend()) {
  // The tp.kv groups a model of fewer key/value heads than head-splitting ranks needs, as
  // mesh_config gives mdtp train.
  MeshConfig mesh_config = c.config;
  mesh_config.kv_copies = kv_copies_for(config.kv(), head_split_ranks(c.config.tp_mode, c.config.tp, c.config.tp_depth));
  mesh = std::make_unique<Mesh>(mesh_config, comm, ledger);
  // Mixed precision for 16-bit parameters: their gradients in f32, as mdtp train keeps them.
  mode = make_tp_mode(c.mode, TpContext{*mesh, *backend, dtype, seed, {}, false, precision_for(dtype).grad_reduce});
  const int dp = mesh->comm("dp").size();
  require(global_batch % dp == 0, "test: global batch ", global_batch, " does not divide over dp=", dp);
  model = std::make_unique<GptModel>(*mode, config, global_batch / dp);
}

std::vector<std::int32_t> GptRun::replica_rows(const std::vector<std::int32_t>& global) const {
  const std::int64_t n = model->batch_per_replica() * model->config().seq;
  const auto first = global.begin() + mesh->comm("dp").rank() * n;
  return std::vector<std::int32_t>(first, first + n);
}

double GptRun::step(const TokenBatch& batch) {
  const double loss = forward_backward(*model, replica_rows(batch.inputs), replica_rows(batch.targets));
  model->reduce_gradients();
  return loss;
}

ParamMap GptRun::gather(bool grad) const {
  ParamMap out;
  for (const ModelParam& p : model->parameters())
    out[p.name()] = gather_logical(p, grad ? p.param->grad : p.param->value, *mesh, *backend);
  return out;
}

void GptRun::set(const ParamMap& values) {
  for (ModelParam& p : model->parameters()) scatter_logical(p, values.at(p.name()), p.param->value, *mesh, *backend);
}

ModeCase serial_case() { return mode_case("none", 1, 1); }

ParamMap random_parameters(const GptRun& run, unsigned seed, double scale) {
  ParamMap out;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, scale);
  for (const ModelParam& p : run.model->parameters()) {
    std::vector<double> v(static_cast<std::size_t>(shape_numel(p.checkpoint_shape())));
    const bool gamma = p.init.kind == InitSpec::Kind::constant && p.init.value == 1.0;
    for (auto& x : v) x = (gamma ? 1.0 : 0.0) + normal(gen);
    out[p.name()] = v;
  }
  return out;
}

}  // namespace mdtp::testing
