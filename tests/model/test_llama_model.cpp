// The Llama blocks (--model llama: RMSNorm, rotary positions, SwiGLU, grouped-query attention, no
// biases, tied or untied head) in every tensor-parallel mode against the serial model, which is
// checked against an independent plain-loop decoder (support/llama_reference.hpp, itself held
// against a numpy port of Hugging Face's modeling_llama) and against central finite differences.
// f64 throughout; ‖Δ‖∞ / ‖ref‖∞.  Key/value heads 1, 2 and = heads where the mode's head split
// allows them, MLP widths that are not multiples of 64.
#include <catch2/catch.hpp>
#include <iostream>

#include "core/error.hpp"
#include "mesh/mesh.hpp"
#include "model/fused_columns.hpp"
#include "spec/names.hpp"
#include "support/gpt_harness.hpp"
#include "support/llama_reference.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

ModelShape llama_shape(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t kv,
                       std::int64_t ffn, std::int64_t seq, std::int64_t vocab, bool tied) {
  ModelShape c{layers, hidden, heads, seq, vocab, ffn, kv};
  c.family = ModelFamily::llama;
  c.tied_head = tied;
  c.rope_theta = 500.0;  // short test sequences still turn through several periods
  c.norm_eps = 1e-6;
  return c;
}

// A tiny Llama per world size (vocabulary 19 padded by every split), FFN not a multiple of 64.
ModelSize llama_size_for_world(int world, std::int64_t kv, bool tied) {
  if (world == 18 || world == 27) return {llama_shape(2, 18, 3, kv, 36, 4, 19, tied), world == 18 ? 12 : 9};
  return {llama_shape(2, 24, 4, kv, 40, 4, 19, tied), 4};
}

LlamaShape reference_shape(const ModelShape& c) {
  return LlamaShape{c.layers, c.hidden, c.heads, c.kv(), c.ffn(), c.seq, c.vocab, c.rope_theta, c.norm_eps,
                    c.tied_head};
}

// mdtp's fused tensors in Hugging Face's names: qkv_proj [(heads + 2·kv)·d, H] → q/k/v_proj by rows,
// gate_up_proj [2F, H] → gate/up_proj.
ParamMap hf_names(const ParamMap& fused, const ModelShape& c) {
  ParamMap out;
  const std::int64_t H = c.hidden, d = H / c.heads;
  auto rows = [&](const std::vector<double>& t, std::int64_t first, std::int64_t count) {
    return std::vector<double>(t.begin() + first * H, t.begin() + (first + count) * H);
  };
  for (const auto& [name, values] : fused) {
    const auto at = name.find("self_attn.qkv_proj.weight");
    const auto mlp = name.find("mlp.gate_up_proj.weight");
    if (at != std::string::npos) {
      const std::string base = name.substr(0, at) + "self_attn.";
      out[base + "q_proj.weight"] = rows(values, 0, c.heads * d);
      out[base + "k_proj.weight"] = rows(values, c.heads * d, c.kv() * d);
      out[base + "v_proj.weight"] = rows(values, (c.heads + c.kv()) * d, c.kv() * d);
    } else if (mlp != std::string::npos) {
      const std::string base = name.substr(0, mlp) + "mlp.";
      out[base + "gate_proj.weight"] = rows(values, 0, c.ffn());
      out[base + "up_proj.weight"] = rows(values, c.ffn(), c.ffn());
    } else {
      out[name] = values;
    }
  }
  return out;
}

double max_error(const ParamMap& got, const ParamMap& ref, std::string* worst = nullptr) {
  double err = 0.0;
  for (const auto& [name, values] : ref) {
    const double e = relative_error(got.at(name), values);
    if (e >= err) {
      err = e;
      if (worst) *worst = name;
    }
  }
  return err;
}

}  // namespace

TEST_CASE("the serial Llama's loss matches an independent plain-loop Llama", "[model][llama][reference]") {
  for (const std::int64_t kv : {1, 2, 4})
    for (const bool tied : {false, true}) {
      const ModelSize size = llama_size_for_world(1, kv, tied);
      GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
      serial.set(random_parameters(serial, 6));
      const TokenBatch batch = random_batch(size.config, size.batch, 5);
      const double loss = whole_model_loss(*serial.model, batch.inputs, batch.targets);
      const double ref = llama_reference_loss(reference_shape(size.config), hf_names(serial.gather(false), size.config),
                                              batch.inputs, batch.targets);
      INFO("kv " << kv << (tied ? " tied" : " untied") << ": loss " << loss << ", reference " << ref);
      CHECK(std::abs(loss - ref) <= 1e-12 * std::abs(ref));
    }
}

TEST_CASE("Llama gradients match central finite differences of the loss", "[model][llama][gradcheck]") {
  if (world_size() != 1) return;  // serial maths: checked once
  const ModelShape config = llama_shape(2, 8, 2, 1, 6, 3, 7, false);
  GptRun run(serial_case(), config, 2, MPI_COMM_SELF);
  run.set(random_parameters(run, 11, 0.3));
  const TokenBatch batch = random_batch(config, 2, 12);
  forward_backward(*run.model, batch.inputs, batch.targets);
  const double h = 1e-5;
  double worst = 0.0;
  for (const ModelParam& p : run.model->parameters()) {
    const std::vector<double> grad = run.backend->to_f64(p.param->grad);
    std::vector<double> value = run.backend->to_f64(p.param->value), fd(value.size());
    for (std::size_t i = 0; i < value.size(); ++i) {
      const double keep = value[i];
      value[i] = keep + h;
      run.backend->assign_f64(p.param->value, value);
      const double up = whole_model_loss(*run.model, batch.inputs, batch.targets);
      value[i] = keep - h;
      run.backend->assign_f64(p.param->value, value);
      const double down = whole_model_loss(*run.model, batch.inputs, batch.targets);
      value[i] = keep;
      fd[i] = (up - down) / (2 * h);
    }
    run.backend->assign_f64(p.param->value, value);
    const double err = relative_error(grad, fd);
    worst = std::max(worst, err);
    INFO(p.name() << ": analytic vs finite-difference gradient, relative error " << err);
    CHECK(err <= 1e-6);
  }
  std::cout << "[llama] largest finite-difference gradient error: " << worst << "\n";
}

TEST_CASE("every mode gives the serial Llama's initial values, loss and gradients", "[model][llama][modes]") {
  const int world = world_size();
  for (const std::int64_t kv : {4, 2, 1, 3})
    for (const bool tied : {false, true}) {
      const ModelSize size = llama_size_for_world(world, kv, tied);
      if (size.config.heads % kv != 0) continue;
      const TokenBatch batch = random_batch(size.config, size.batch, 21);
      GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
      const ParamMap init = serial.gather(false);
      const ParamMap values = random_parameters(serial, 22);
      serial.set(values);
      const double ref_loss = serial.step(batch);
      const ParamMap ref_grads = serial.gather(true);
      for (const ModeCase& c : model_cases_for_world(world)) {
        DYNAMIC_SECTION(c.label() << " dp=" << world / c.config.tp << " kv=" << kv << (tied ? " tied" : "")) {
          // g ranks split the heads: each holds kv/g K/V heads, or g/kv ranks hold copies of one;
          // anything else is refused by name.
          const int g = head_split_ranks(c.config.tp_mode, c.config.tp, c.config.tp_depth);
          if (kv % g != 0 && g % kv != 0) {
            CHECK_THROWS_WITH(GptRun(c, size.config, size.batch),
                              Catch::Contains("num_key_value_heads=" + std::to_string(kv)));
            continue;
          }
          auto run = std::make_unique<GptRun>(c, size.config, size.batch);
          std::string worst;
          CHECK(max_error(run->gather(false), init, &worst) == 0.0);  // same draws by logical index
          run->set(values);
          const double loss = run->step(batch);
          const double loss_err = std::abs(loss - ref_loss) / std::abs(ref_loss);
          const double grad_err = max_error(run->gather(true), ref_grads, &worst);
          INFO("loss " << loss << " vs " << ref_loss << "; worst gradient " << worst);
          CHECK(loss_err <= 1e-12);
          CHECK(grad_err <= 1e-12);
          // The global norm counts every element once, copies of a K/V head included.
          std::vector<Parameter*> raw;
          for (const ModelParam& p : run->model->parameters()) raw.push_back(p.param);
          const double norm = global_grad_norm(raw, *run->mesh, *run->backend, group::tp_pp);
          double ref_squares = 0.0;
          for (const auto& [name, grad] : ref_grads)
            for (const double v : grad) ref_squares += v * v;
          const double norm_err = std::abs(norm - std::sqrt(ref_squares)) / std::sqrt(ref_squares);
          CHECK(norm_err <= 1e-12);
          if (run->mesh->rank() == 0)
            std::cout << "[llama] " << c.label() << " dp=" << world / c.config.tp << " kv=" << kv
                      << (g > kv ? " (copies " + std::to_string(g / kv) + ")" : std::string()) << (tied ? " tied" : " untied")
                      << ": loss error " << loss_err << ", largest gradient error " << grad_err << " (" << worst
                      << "), norm error " << norm_err << "\n";
        }
      }
    }
}

TEST_CASE("block-grouped columns with copies of a narrower part", "[model][llama][layout]") {
  // Q of 4 columns split in 2 blocks, K and V of 2 columns each kept whole: both storage blocks
  // hold the one K/V block, so logical columns 4-7 appear twice.
  CHECK(block_grouped_columns({4, 2, 2}, {2, 1, 1}, 2, "t") ==
        std::vector<std::int64_t>{0, 1, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7});
  // Without copies it is the plain block grouping.
  CHECK(block_grouped_columns({4, 2, 2}, {2, 2, 2}, 2, "t") == block_grouped_columns({4, 2, 2}, 2, "t"));
  CHECK_THROWS_WITH(block_grouped_columns({8, 3, 3}, {4, 3, 3}, 4, "qkv"),
                    Catch::Contains("qkv: a fused part cut into 3 blocks cannot follow a split into 4"));
}
