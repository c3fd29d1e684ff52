// The layer interface that pipelines and ZeRO build on, in every mode on every mesh of the TP
// suite, in float64:
//  - micro-batches in flight together, their passes in any order, give what running them one
//    after another gives (outputs and input gradients bit for bit: the same computations; the
//    accumulated weight gradients to ≤ 1e-13, summed in another order);
//  - the backward-input pass then the weight pass equals the fused backward bit for bit, and the
//    weight pass is right even when the weights were overwritten with garbage in between (it
//    reads no weight values: ZeRO-3 frees them before it);
//  - gradients accumulated into storage the parameters do not own (views of flat buffers, as
//    ZeRO's buckets) equal the owned-storage path bit for bit.
#include <catch2/catch.hpp>

#include <functional>
#include <limits>

#include "tp/mlp.hpp"
#include "tp_checks.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

// One layer kind behind a uniform face: its own saved-state type erased into a shared_ptr.
struct LayerFace {
  std::function<std::shared_ptr<void>()> new_saved;
  std::function<Tensor(const Tensor&, void*)> forward;
  std::function<Tensor(const Tensor&, void*)> backward_input;
  std::function<void(void*)> backward_weight;
  std::function<Tensor(const Tensor&, void*)> backward;
  std::function<std::vector<Parameter*>()> parameters;
  Layout input, output;
  std::int64_t in = 0, out = 0;
};

template <class Layer, class Saved>
LayerFace face_of(std::shared_ptr<Layer> layer, Layout input, Layout output, std::int64_t in, std::int64_t out) {
  LayerFace f;
  f.new_saved = [] { return std::static_pointer_cast<void>(std::make_shared<Saved>()); };
  f.forward = [layer](const Tensor& x, void* s) { return layer->forward(x, *static_cast<Saved*>(s)); };
  f.backward_input = [layer](const Tensor& dy, void* s) { return layer->backward_input(dy, *static_cast<Saved*>(s)); };
  f.backward_weight = [layer](void* s) { layer->backward_weight(*static_cast<Saved*>(s)); };
  f.backward = [layer](const Tensor& dy, void* s) { return layer->backward(dy, *static_cast<Saved*>(s)); };
  f.parameters = [layer] { return layer->parameters(); };
  f.input = std::move(input);
  f.output = std::move(output);
  f.in = in;
  f.out = out;
  return f;
}

// A fresh layer of each kind, initialised identically every time it is made (values depend on
// the seed, the parameter's name and the element index only).
std::vector<std::pair<std::string, std::function<LayerFace()>>> layer_kinds(ModeFixture& f, const ModeCase& c) {
  const std::int64_t fu = c.feature_unit(), H = fu * 3, F = fu * 5;
  const Layout residual = f.mode->residual_layout();
  return {
      {"linear",
       [&f, residual, H, F] {
         std::shared_ptr<Linear> l = f.mode->linear(test_linear_spec("mb.lin", H, F), residual);
         return face_of<Linear, LinearSaved>(l, residual, l->output_layout(), H, F);
       }},
      {"layernorm",
       [&f, residual, H] {
         std::shared_ptr<LayerNorm> l = f.mode->layernorm("mb.ln", H, residual);
         return face_of<LayerNorm, LayerNormSaved>(l, residual, residual, H, H);
       }},
      {"mlp",
       [&f, residual, H, F] {
         auto l = std::make_shared<Mlp>(*f.mode, "mb.mlp", H, F, residual);
         return face_of<Mlp, MlpSaved>(l, residual, l->output_layout(), H, H);
       }},
  };
}

std::vector<double> values_of(const ModeFixture& f, const Tensor& t) { return f.backend->to_f64(t); }

std::vector<std::vector<double>> grads_of(const ModeFixture& f, LayerFace& layer) {
  std::vector<std::vector<double>> out;
  for (Parameter* p : layer.parameters()) out.push_back(values_of(f, p->grad));
  return out;
}

struct MicroBatchData {
  Tensor x, dy;
};

std::vector<MicroBatchData> micro_batches(const ModeFixture& f, const ModeCase& c, const LayerFace& layer, int n) {
  std::vector<MicroBatchData> out;
  const std::int64_t B = c.row_unit() * 2;
  for (int i = 0; i < n; ++i)
    out.push_back({f.scatter(random_matrix(B, layer.in, 100 + i, 2.0), layer.input),
                   f.scatter(random_matrix(B, layer.out, 200 + i), layer.output)});
  return out;
}

}  // namespace

TEST_CASE("micro-batches in flight in any order equal running them one after another", "[tp][microbatch]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    ModeFixture f(c, DType::f64);
    for (auto& [kind, make] : layer_kinds(f, c)) {
      DYNAMIC_SECTION(c.label() << " " << kind) {
        for (int n : {2, 3}) {
          LayerFace one = make(), many = make();
          const std::vector<MicroBatchData> mb = micro_batches(f, c, one, n);
          std::vector<std::vector<double>> y_seq, dx_seq, y_mix(static_cast<std::size_t>(n)),
              dx_mix(static_cast<std::size_t>(n));
          for (int i = 0; i < n; ++i) {
            auto s = one.new_saved();
            y_seq.push_back(values_of(f, one.forward(mb[static_cast<std::size_t>(i)].x, s.get())));
            dx_seq.push_back(values_of(f, one.backward(mb[static_cast<std::size_t>(i)].dy, s.get())));
          }
          // All forwards, then backward-input passes in reverse, then the weight passes in
          // another order (zero-bubble style), the last micro-batch fused.
          std::vector<std::shared_ptr<void>> saved;
          for (int i = 0; i < n; ++i) {
            saved.push_back(many.new_saved());
            y_mix[static_cast<std::size_t>(i)] = values_of(f, many.forward(mb[static_cast<std::size_t>(i)].x, saved.back().get()));
          }
          for (int i = n - 2; i >= 0; --i)
            dx_mix[static_cast<std::size_t>(i)] =
                values_of(f, many.backward_input(mb[static_cast<std::size_t>(i)].dy, saved[static_cast<std::size_t>(i)].get()));
          for (int i = 0; i < n - 1; ++i) many.backward_weight(saved[static_cast<std::size_t>(i)].get());
          dx_mix[static_cast<std::size_t>(n - 1)] =
              values_of(f, many.backward(mb[static_cast<std::size_t>(n - 1)].dy, saved[static_cast<std::size_t>(n - 1)].get()));
          CHECK(y_mix == y_seq);
          CHECK(dx_mix == dx_seq);
          const auto g_seq = grads_of(f, one), g_mix = grads_of(f, many);
          for (std::size_t p = 0; p < g_seq.size(); ++p) {
            INFO(n << " micro-batches, parameter " << p << ": relative error " << relative_error(g_mix[p], g_seq[p]));
            CHECK(relative_error(g_mix[p], g_seq[p]) <= 1e-13);
          }
        }
      }
    }
  }
}

TEST_CASE("backward-input then weight pass equals the fused backward and reads no weights", "[tp][microbatch]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    ModeFixture f(c, DType::f64);
    for (auto& [kind, make] : layer_kinds(f, c)) {
      DYNAMIC_SECTION(c.label() << " " << kind) {
        LayerFace fused = make(), split = make();
        const MicroBatchData mb = micro_batches(f, c, fused, 1).front();
        auto s1 = fused.new_saved(), s2 = split.new_saved();
        fused.forward(mb.x, s1.get());
        const std::vector<double> dx_fused = values_of(f, fused.backward(mb.dy, s1.get()));
        split.forward(mb.x, s2.get());
        const std::vector<double> dx_split = values_of(f, split.backward_input(mb.dy, s2.get()));
        // Between the passes the weights are gone (ZeRO-3) or changed (an optimizer step of
        // another stage in a zero-bubble schedule): garbage must not reach the weight gradients.
        for (Parameter* p : split.parameters()) f.backend->fill(p->value, std::numeric_limits<double>::quiet_NaN());
        split.backward_weight(s2.get());
        CHECK(dx_split == dx_fused);
        CHECK(grads_of(f, split) == grads_of(f, fused));
        // The saved state was released: a second weight pass is refused (LayerNorm's weight pass
        // is empty: its γ/β gradients come with the input gradient).
        if (kind != "layernorm") CHECK_THROWS_AS(split.backward_weight(s2.get()), Error);
      }
    }
  }
}

TEST_CASE("gradients accumulated into storage the parameters do not own equal the owned path", "[tp][views]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    ModeFixture f(c, DType::f64);
    for (auto& [kind, make] : layer_kinds(f, c)) {
      DYNAMIC_SECTION(c.label() << " " << kind) {
        LayerFace owned = make(), viewed = make();
        // One flat value buffer and one flat gradient buffer for all the layer's parameters, with
        // a gap after each parameter up to the next 64-byte boundary (at least one element), as a
        // bucket pads them: GEMM libraries may sum in another order for another alignment, so the
        // alignment is part of what makes a bucket bit-identical to owned storage.
        auto next_start = [](std::int64_t end) { return (end + 1 + 7) / 8 * 8; };
        std::int64_t total = 0;
        for (Parameter* p : viewed.parameters()) total = next_start(total + p->value.numel());
        Tensor values = f.backend->zeros({total}, DType::f64, MemCategory::parameters);
        Tensor grads = f.backend->zeros({total}, DType::f64, MemCategory::gradients);
        std::int64_t offset = 0;
        for (Parameter* p : viewed.parameters()) {
          const std::int64_t n = p->value.numel();
          bind_to_storage(*p, values.row_slice(offset, offset + n), grads.row_slice(offset, offset + n), *f.backend);
          offset = next_start(offset + n);
        }
        for (const MicroBatchData& mb : micro_batches(f, c, owned, 2)) {
          auto so = owned.new_saved(), sv = viewed.new_saved();
          CHECK(values_of(f, owned.forward(mb.x, so.get())) == values_of(f, viewed.forward(mb.x, sv.get())));
          CHECK(values_of(f, owned.backward(mb.dy, so.get())) == values_of(f, viewed.backward(mb.dy, sv.get())));
        }
        CHECK(grads_of(f, viewed) == grads_of(f, owned));
        // The gradients really are in the flat buffer, and the gaps are untouched.
        offset = 0;
        const std::vector<double> flat = values_of(f, grads);
        const auto owned_grads = grads_of(f, owned);
        for (std::size_t p = 0; p < owned_grads.size(); ++p) {
          const auto n = static_cast<std::int64_t>(owned_grads[p].size());
          CHECK(std::vector<double>(flat.begin() + offset, flat.begin() + offset + n) == owned_grads[p]);
          const std::int64_t gap = next_start(offset + n) - offset - n;
          CHECK(std::vector<double>(flat.begin() + offset + n, flat.begin() + offset + n + gap) ==
                std::vector<double>(static_cast<std::size_t>(gap), 0.0));
          offset = next_start(offset + n);
        }
      }
    }
  }
}

TEST_CASE("a saved state cannot serve two micro-batches, and passes run in order", "[tp][microbatch][errors]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    ModeFixture f(c, DType::f64);
    DYNAMIC_SECTION(c.label()) {
      const std::int64_t fu = c.feature_unit();
      auto linear = f.mode->linear(test_linear_spec("order", fu * 3, fu * 5), f.mode->residual_layout());
      const Tensor x = f.scatter(random_matrix(c.row_unit() * 2, fu * 3, 1), linear->input_layout());
      const Tensor dy = f.scatter(random_matrix(c.row_unit() * 2, fu * 5, 2), linear->output_layout());
      LinearSaved saved;
      f.ledger.clear();
      CHECK_THROWS_WITH(linear->backward_weight(saved), Catch::Contains("backward_input of the same micro-batch"));
      CHECK_THROWS_WITH(linear->backward_input(dy, saved), Catch::Contains("before forward"));
      CHECK(f.ledger.entries().empty());  // refused before any collective
      linear->forward(x, saved);
      CHECK_THROWS_WITH(linear->forward(x, saved), Catch::Contains("still in flight"));
      linear->backward_input(dy, saved);
      CHECK_THROWS_WITH(linear->backward_input(dy, saved), Catch::Contains("called twice"));
      linear->backward_weight(saved);
      CHECK(saved.stage == LinearSaved::Stage::empty);
    }
  }
}
