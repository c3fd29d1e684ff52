// The run spec (src/spec): every enum's names parse back, validate refuses each rule with a message
// naming the member, and the JSON writes every member, reads back exactly, takes a missing key from
// the defaults and refuses unknown keys, wrong types, bad names and other versions in one line.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "spec/names.hpp"
#include "spec/run_spec.hpp"
#include "spec/run_spec_json.hpp"

using namespace mdtp;
using Catch::Contains;
using Catch::Equals;
using Json = nlohmann::json;

namespace {

// A valid spec that differs from the defaults in every member (but stage_mapping, which has one
// value today).
RunSpec everything_changed() {
  RunSpec s;
  s.model.layers = 8;
  s.model.hidden = 96;
  s.model.heads = 6;
  s.model.seq = 48;
  s.model.vocab = 1000;
  s.model.ffn_hidden = 256;
  s.model.kv_heads = 2;
  s.model.family = ModelFamily::llama;
  s.model.tied_head = false;
  s.model.rope_theta = 500000;
  s.model.norm_eps = 1e-6;
  s.global_batch = 48;
  s.layout.mode = TpMode::d2p5;
  s.layout.tp = 8;
  s.layout.depth = 2;
  s.layout.pp = 2;
  s.layout.dp = 3;
  s.layout.schedule = ScheduleKind::interleaved;
  s.layout.micro_batches = 4;
  s.layout.chunks = 2;
  s.layout.group_size = 2;
  s.layout.pp_layers = {1, 3, 3, 1};
  s.zero.stage = 3;
  s.zero.bucket_mb = 12.5;
  s.zero.offload = true;
  s.zero.keep_parameters = true;
  s.zero.reduce_per_micro_batch = true;
  s.recompute = Recompute::selective;
  s.precision.params = DType::f16;
  s.precision.grad_reduce = DType::f64;
  s.precision.loss_scaling = LossScaling{1024.0, 65536.0, 2.0, 500, 3};
  s.optimizer.kind = OptimizerKind::sgd;
  s.optimizer.lr = 3e-4;
  s.optimizer.beta1 = 0.8;
  s.optimizer.beta2 = 0.999;
  s.optimizer.eps = 1e-6;
  s.optimizer.weight_decay = 0.01;
  s.optimizer.grad_clip = 1.0;
  s.dropout = 0.1;
  s.seed = (std::uint64_t{1} << 53) + 1;  // not a double
  return s;
}

RunSpec round_trip(const RunSpec& s) { return run_spec_from_json(to_json(s)); }
RunSpec text_round_trip(const RunSpec& s) { return run_spec_from_json(Json::parse(run_spec_text(s))); }

// The paths of every member of a JSON object, depth first: leaves and nested objects alike.
void collect_paths(const Json& j, const std::string& prefix, std::vector<std::string>& out, bool leaves_only) {
  for (const auto& item : j.items()) {
    const std::string path = prefix + "/" + item.key();
    if (item.value().is_object()) {
      if (!leaves_only) out.push_back(path);
      collect_paths(item.value(), path, out, leaves_only);
    } else {
      out.push_back(path);
    }
  }
}

std::vector<std::string> paths(const Json& j, bool leaves_only) {
  std::vector<std::string> out;
  collect_paths(j, "", out, leaves_only);
  return out;
}

// `json` with one member changed.
Json with(Json json, const std::string& pointer, Json value) {
  json[Json::json_pointer(pointer)] = std::move(value);
  return json;
}

void check_refused(const Json& json, const std::string& message) {
  INFO(json.dump());
  CHECK_THROWS_WITH(run_spec_from_json(json), Equals(message));
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mdtp_spec_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("the default spec is valid and describes itself in one line", "[spec]") {
  const RunSpec s;
  CHECK_NOTHROW(validate(s));
  CHECK(describe(s) == "GPT l=2 h=64 a=4 s=32 V=64 B=8 | 1d tp=1 pp=1 dp=1 1f1b m=1 | zero=0 recompute=none f32 | "
                       "adamw lr=0.001 | seed=1234");
  CHECK(s.model.ffn() == 4 * s.model.hidden);
  CHECK(s.model.kv() == s.model.heads);
  CHECK(s.layout.world() == 1);
  // The optimizer's defaults are zero/optimizer.hpp's OptimizerSpec's.
  CHECK(s.optimizer.kind == OptimizerKind::adamw);
  CHECK(s.optimizer.lr == 1e-3);
  CHECK(s.optimizer.beta1 == 0.9);
  CHECK(s.optimizer.beta2 == 0.95);
  CHECK(s.optimizer.eps == 1e-8);
  CHECK(s.optimizer.weight_decay == 0.1);
  CHECK(s.optimizer.grad_clip == 0.0);

  const RunSpec c = everything_changed();
  CHECK_NOTHROW(validate(c));
  CHECK(c.model.ffn() == 256);
  CHECK(c.model.kv() == 2);
  CHECK(c.layout.world() == 48);
  CHECK(describe(c) ==
        "Llama l=8 h=96 a=6 s=48 V=1000 ffn=256 kv=2 theta=500000 B=48 | 2.5d tp=8 d=2 pp=2 dp=3 interleaved "
        "m=4 v=2 N=2 layers=1,3,3,1 | zero=3 bucket=12.5MiB offload reduce-per-micro-batch keep-params "
        "recompute=selective f16 (grads f64) loss-scale=1024 dropout=0.1 | sgd lr=0.0003 clip=1 | seed=9007199254740993");
}

TEST_CASE("every enum name parses back to its value, and unknown names are refused", "[spec]") {
  for (TpMode m : all_tp_modes()) CHECK(parse_tp_mode(tp_mode_name(m)) == m);
  CHECK(all_tp_modes().size() == 6);
  for (ScheduleKind k : all_schedules()) CHECK(parse_schedule(schedule_name(k)) == k);
  CHECK(all_schedules().size() == 8);
  for (Recompute r : all_recomputes()) CHECK(parse_recompute(recompute_name(r)) == r);
  CHECK(all_recomputes().size() == 3);
  for (OptimizerKind k : all_optimizer_kinds()) CHECK(parse_optimizer_kind(optimizer_kind_name(k)) == k);
  CHECK(all_optimizer_kinds().size() == 2);
  for (ModelFamily k : {ModelFamily::gpt2, ModelFamily::llama}) CHECK(parse_model_family(model_family_name(k)) == k);
  CHECK(parse_stage_mapping(stage_mapping_name(StageMapping::round_robin)) == StageMapping::round_robin);
  for (DType d : {DType::f32, DType::f64, DType::bf16, DType::f16}) CHECK(parse_dtype(dtype_name(d)) == d);

  // The names the results files, the command line and the analysis scripts already use.
  CHECK(std::string(tp_mode_name(TpMode::d1_sp)) == "1d-sp");
  CHECK(std::string(tp_mode_name(TpMode::d2p5)) == "2.5d");
  CHECK(std::string(schedule_name(ScheduleKind::one_f_one_b)) == "1f1b");
  CHECK(std::string(schedule_name(ScheduleKind::zb_h1)) == "zb-h1");
  CHECK(std::string(recompute_name(Recompute::selective)) == "selective");
  CHECK(std::string(optimizer_kind_name(OptimizerKind::adamw)) == "adamw");
  CHECK(std::string(stage_mapping_name(StageMapping::round_robin)) == "round-robin");
  CHECK(is_sequence_parallel(TpMode::d1_sp));
  CHECK_FALSE(is_sequence_parallel(TpMode::d1));

  CHECK_THROWS_WITH(parse_tp_mode("4d"),
                    Equals("unknown tensor-parallel mode '4d'; expected one of none, 1d, 1d-sp, 2d, 2.5d, 3d"));
  CHECK_THROWS_WITH(parse_schedule("1F1B"),
                    Equals("unknown pipeline schedule '1F1B'; expected one of gpipe, 1f1b, interleaved, zb-h1, zb-h2, "
                           "zb-v, dualpipev, dualpipe"));
  CHECK_THROWS_WITH(parse_recompute("sometimes"),
                    Equals("activation recomputation must be none, selective or full; got 'sometimes'"));
  CHECK_THROWS_WITH(parse_optimizer_kind("adam"), Equals("unknown optimizer 'adam'; expected sgd or adamw"));
  CHECK_THROWS_WITH(parse_model_family("mistral"), Equals("unknown model family 'mistral'; expected gpt2 or llama"));
  CHECK(parse_stage_mapping("v-shape") == StageMapping::v_shape);
  CHECK(parse_stage_mapping("mirrored") == StageMapping::mirrored);
  CHECK_THROWS_WITH(parse_stage_mapping("mirror"),
                    Equals("unknown stage mapping 'mirror'; expected round-robin, v-shape or mirrored"));
}

TEST_CASE("the phase and group names are the strings the ledger and the mesh use", "[spec]") {
  CHECK(std::string(phase::forward) == "forward");
  CHECK(std::string(phase::backward) == "backward");
  CHECK(std::string(phase::recompute) == "recompute");
  CHECK(std::string(phase::pipeline) == "pipeline");
  CHECK(std::string(phase::grad_sync) == "grad-sync");
  CHECK(std::string(phase::loss) == "loss");
  CHECK(std::string(phase::optimizer) == "optimizer");
  CHECK(std::string(phase::param_gather) == "param-gather");
  CHECK(std::string(phase::checkpoint) == "checkpoint");

  CHECK(std::string(group::world) == "world");
  CHECK(std::string(group::tp) == "tp");
  CHECK(std::string(group::pp) == "pp");
  CHECK(std::string(group::dp) == "dp");
  CHECK(std::string(group::cp) == "cp");
  CHECK(std::string(group::tp_pp) == "tp-pp");
  CHECK(std::string(group::tp_dp) == "tp-dp");
  CHECK(std::string(group::dp_cp) == "dp-cp");
  CHECK(std::string(group::tp_dp_cp) == "tp-dp-cp");
  CHECK(std::string(group::embedding) == "embedding");
  CHECK(std::string(group::tp_row) == "tp.row");
  CHECK(std::string(group::tp_col) == "tp.col");
  CHECK(std::string(group::tp_dep) == "tp.dep");
  CHECK(std::string(group::tp_row_dep) == "tp.row-dep");
  CHECK(std::string(group::tp_col_dep) == "tp.col-dep");
  CHECK(std::string(group::tp_input) == "tp.input");
  CHECK(std::string(group::tp_weight) == "tp.weight");
  CHECK(std::string(group::tp_output) == "tp.output");
  CHECK(std::string(group::tp_input_weight) == "tp.input-weight");
  CHECK(std::string(group::tp_output_weight) == "tp.output-weight");
  CHECK(std::string(group::dp_depth) == "dp-tp.dep");
}

TEST_CASE("validate refuses each rule with a message naming the member", "[spec]") {
  struct Bad {
    std::function<void(RunSpec&)> edit;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {[](RunSpec& s) { s.model.layers = 0; }, "run spec: model.layers must be > 0; got 0"},
      {[](RunSpec& s) { s.model.hidden = -64; }, "run spec: model.hidden must be > 0; got -64"},
      {[](RunSpec& s) { s.model.heads = 0; }, "run spec: model.heads must be > 0; got 0"},
      {[](RunSpec& s) { s.model.seq = 0; }, "run spec: model.seq must be > 0; got 0"},
      {[](RunSpec& s) { s.model.vocab = 0; }, "run spec: model.vocab must be > 0; got 0"},
      {[](RunSpec& s) { s.model.ffn_hidden = -1; }, "run spec: model.ffn_hidden must be >= 0 (0: 4 x hidden); got -1"},
      {[](RunSpec& s) { s.model.kv_heads = -1; }, "run spec: model.kv_heads must be >= 0 (0: heads); got -1"},
      {[](RunSpec& s) { s.model.heads = 5; },
       "run spec: model.heads=5 must divide model.hidden=64 (every head has hidden/heads features)"},
      {[](RunSpec& s) { s.model.kv_heads = 3; },
       "run spec: model.kv_heads=3 must divide model.heads=4 (each key/value head serves heads/kv_heads query heads)"},
      {[](RunSpec& s) { s.layout.tp = 0; }, "run spec: parallel.tp must be >= 1; got 0"},
      {[](RunSpec& s) { s.layout.depth = 0; }, "run spec: parallel.depth must be >= 1; got 0"},
      {[](RunSpec& s) { s.layout.pp = 0; }, "run spec: parallel.pp must be >= 1; got 0"},
      {[](RunSpec& s) { s.layout.dp = -2; }, "run spec: parallel.dp must be >= 1; got -2"},
      {[](RunSpec& s) {
         s.layout.mode = TpMode::none;
         s.layout.tp = 2;
       },
       "run spec: parallel.mode none is the serial reference and needs parallel.tp=1; got tp=2"},
      {[](RunSpec& s) { s.layout.depth = 2; }, "run spec: parallel.depth=2 applies only to the 2.5d mode, not 1d"},
      {[](RunSpec& s) { s.layout.micro_batches = 0; }, "run spec: parallel.micro_batches must be >= 1; got 0"},
      {[](RunSpec& s) { s.layout.chunks = 0; }, "run spec: parallel.chunks must be >= 1; got 0"},
      {[](RunSpec& s) { s.layout.group_size = -1; }, "run spec: parallel.group_size must be >= 0 (0: pp); got -1"},
      {[](RunSpec& s) { s.layout.schedule = ScheduleKind::interleaved; },
       "run spec: the interleaved schedule needs parallel.chunks >= 2 (one chunk is 1f1b); got 1"},
      {[](RunSpec& s) { s.layout.chunks = 2; },
       "run spec: parallel.chunks=2; the 1f1b schedule runs 1 chunk per stage (only interleaved takes another count)"},
      {[](RunSpec& s) {
         s.layout.schedule = ScheduleKind::gpipe;
         s.layout.group_size = 2;
       },
       "run spec: parallel.group_size=2 applies only to the interleaved schedule, not gpipe"},
      {[](RunSpec& s) { s.layout.pp = 4; },
       "run spec: model.layers=2 does not split evenly over pp x chunks = 4 x 1; give parallel.pp_layers"},
      {[](RunSpec& s) {
         s.layout.pp = 2;
         s.layout.pp_layers = {1, 1, 0};
       },
       "run spec: parallel.pp_layers has 3 entries; expected pp x chunks = 2 x 1 = 2"},
      {[](RunSpec& s) {
         s.layout.pp = 2;
         s.layout.pp_layers = {3, -1};
       },
       "run spec: parallel.pp_layers[1]=-1 must be >= 0"},
      {[](RunSpec& s) {
         s.layout.pp = 2;
         s.layout.pp_layers = {1, 2};
       },
       "run spec: parallel.pp_layers sums to 3 blocks; model.layers=2"},
      {[](RunSpec& s) { s.global_batch = 0; }, "run spec: global_batch must be > 0; got 0"},
      {[](RunSpec& s) {
         s.global_batch = 6;
         s.layout.dp = 2;
         s.layout.micro_batches = 2;
       },
       "run spec: global_batch=6 must be divisible by dp x micro_batches = 2 x 2"},
      {[](RunSpec& s) { s.zero.stage = 4; }, "run spec: zero.stage must be 0, 1, 2 or 3; got 4"},
      {[](RunSpec& s) { s.zero.stage = -1; }, "run spec: zero.stage must be 0, 1, 2 or 3; got -1"},
      {[](RunSpec& s) { s.zero.bucket_mb = 0; }, "run spec: zero.bucket_mb must be a finite size > 0; got 0"},
      {[](RunSpec& s) { s.zero.bucket_mb = std::numeric_limits<double>::infinity(); },
       "run spec: zero.bucket_mb must be a finite size > 0; got inf"},
      {[](RunSpec& s) { s.zero.offload = true; }, "run spec: zero.offload needs ZeRO stage 1, 2 or 3; got stage 0"},
      {[](RunSpec& s) {
         s.zero.stage = 1;
         s.zero.reduce_per_micro_batch = true;
       },
       "run spec: zero.reduce_per_micro_batch needs ZeRO stage 2 or 3; got stage 1"},
      {[](RunSpec& s) {
         s.zero.stage = 2;
         s.zero.keep_parameters = true;
       },
       "run spec: zero.keep_parameters needs ZeRO stage 3; got stage 2"},
      {[](RunSpec& s) { s.precision.grad_reduce = DType::bf16; },
       "run spec: precision.grad_reduce=bf16 is narrower than precision.params=f32; gradients are reduced in the "
       "parameters' dtype or a wider one"},
      {[](RunSpec& s) { s.precision.params = DType::f64; },
       "run spec: precision.grad_reduce=f32 is narrower than precision.params=f64; gradients are reduced in the "
       "parameters' dtype or a wider one"},
      {[](RunSpec& s) {
         s.precision.params = DType::bf16;
         s.precision.grad_reduce = DType::f16;
       },
       "run spec: precision.grad_reduce=f16 with precision.params=bf16; 16-bit gradients are the parameters' own "
       "format (or use f32)"},
      {[](RunSpec& s) {
         s.precision.params = DType::bf16;
         s.precision.loss_scaling.fixed = 8;
       },
       "run spec: precision.loss_scale=8 applies to f16 training only; got bf16 (bf16 has f32's exponent range and "
       "needs no loss scaling)"},
      {[](RunSpec& s) { s.precision.loss_scaling.fixed = -1; },
       "run spec: precision.loss_scale must be >= 0 (0: dynamic under f16); got -1"},
      {[](RunSpec& s) { s.precision.loss_scaling.min = 1e10; },
       "run spec: the dynamic loss scale needs 0 < min_loss_scale <= initial_loss_scale; got 1e+10 and 4.29497e+09"},
      {[](RunSpec& s) { s.precision.loss_scaling.window = 0; },
       "run spec: precision.loss_scale_window must be >= 1 step; got 0"},
      {[](RunSpec& s) { s.precision.loss_scaling.hysteresis = 0; }, "run spec: precision.hysteresis must be >= 1; got 0"},
      {[](RunSpec& s) { s.optimizer.lr = 0; }, "run spec: optimizer.lr must be > 0; got 0"},
      {[](RunSpec& s) { s.optimizer.beta1 = 1; }, "run spec: optimizer.beta1 must lie in [0, 1); got 1"},
      {[](RunSpec& s) { s.optimizer.beta2 = -0.5; }, "run spec: optimizer.beta2 must lie in [0, 1); got -0.5"},
      {[](RunSpec& s) { s.optimizer.eps = 0; }, "run spec: optimizer.eps must be > 0; got 0"},
      {[](RunSpec& s) { s.optimizer.weight_decay = -0.1; }, "run spec: optimizer.weight_decay must be >= 0; got -0.1"},
      {[](RunSpec& s) { s.optimizer.grad_clip = -1; },
       "run spec: optimizer.grad_clip must be >= 0 (0: no clipping); got -1"},
      {[](RunSpec& s) { s.dropout = 1; }, "run spec: dropout must lie in [0, 1); got 1"},
      {[](RunSpec& s) { s.dropout = -0.1; }, "run spec: dropout must lie in [0, 1); got -0.1"},
  };
  for (const Bad& bad : cases) {
    RunSpec s;
    bad.edit(s);
    INFO(bad.message);
    CHECK_THROWS_WITH(validate(s), Equals(bad.message));
  }

  // What the rules allow.
  struct Good {
    std::function<void(RunSpec&)> edit;
    const char* what;
  };
  const std::vector<Good> good = {
      {[](RunSpec& s) {
         s.layout.pp = 2;
         s.layout.schedule = ScheduleKind::interleaved;
         s.layout.chunks = 2;
         s.model.layers = 4;
         s.layout.micro_batches = 4;
       },
       "interleaved, even split"},
      {[](RunSpec& s) {
         s.layout.pp = 2;
         s.layout.schedule = ScheduleKind::interleaved;
         s.layout.chunks = 2;
         s.model.layers = 4;
         s.layout.pp_layers = {0, 2, 2, 0};
       },
       "interleaved, empty first and last virtual stages"},
      {[](RunSpec& s) {
         s.layout.mode = TpMode::d2p5;
         s.layout.tp = 8;
         s.layout.depth = 2;
       },
       "2.5d with depth"},
      {[](RunSpec& s) {
         s.zero.stage = 3;
         s.zero.offload = s.zero.keep_parameters = s.zero.reduce_per_micro_batch = true;
       },
       "zero 3 with every option"},
      {[](RunSpec& s) {
         s.precision.params = DType::bf16;
         s.precision.grad_reduce = DType::f32;
       },
       "bf16 reduced in f32"},
      {[](RunSpec& s) {
         s.precision.params = DType::bf16;
         s.precision.grad_reduce = DType::bf16;
       },
       "bf16 reduced in bf16"},
      {[](RunSpec& s) {
         s.layout.mode = TpMode::none;
         s.dropout = 0.5;
         s.optimizer.beta1 = 0;
       },
       "serial, dropout 0.5, beta1 0"},
  };
  for (const Good& g : good) {
    RunSpec s;
    g.edit(s);
    INFO(g.what);
    CHECK_NOTHROW(validate(s));
  }
}

TEST_CASE("the JSON writes every member, explicitly, with a version", "[spec][json]") {
  const Json j = to_json(RunSpec{});
  const std::vector<std::string> expected = {
      "/dropout",
      "/global_batch",
      "/model/family",
      "/model/ffn_hidden",
      "/model/heads",
      "/model/hidden",
      "/model/kv_heads",
      "/model/layers",
      "/model/norm_eps",
      "/model/rope_theta",
      "/model/seq",
      "/model/tied_head",
      "/model/vocab",
      "/optimizer/beta1",
      "/optimizer/beta2",
      "/optimizer/eps",
      "/optimizer/grad_clip",
      "/optimizer/kind",
      "/optimizer/lr",
      "/optimizer/weight_decay",
      "/parallel/chunks",
      "/parallel/depth",
      "/parallel/dp",
      "/parallel/group_size",
      "/parallel/micro_batches",
      "/parallel/mode",
      "/parallel/pp",
      "/parallel/pp_layers",
      "/parallel/schedule",
      "/parallel/stage_mapping",
      "/parallel/tp",
      "/precision/grad_reduce",
      "/precision/hysteresis",
      "/precision/initial_loss_scale",
      "/precision/loss_scale",
      "/precision/loss_scale_window",
      "/precision/min_loss_scale",
      "/precision/params",
      "/recompute",
      "/seed",
      "/version",
      "/zero/bucket_mb",
      "/zero/keep_parameters",
      "/zero/offload",
      "/zero/reduce_per_micro_batch",
      "/zero/stage",
  };
  CHECK(paths(j, true) == expected);  // nlohmann::json keeps its keys sorted
  CHECK(j["version"] == 1);
  // Enums as their names.
  CHECK(j["parallel"]["mode"] == "1d");
  CHECK(j["parallel"]["schedule"] == "1f1b");
  CHECK(j["parallel"]["stage_mapping"] == "round-robin");
  CHECK(j["recompute"] == "none");
  CHECK(j["precision"]["params"] == "f32");
  CHECK(j["optimizer"]["kind"] == "adamw");
  CHECK(j["model"]["family"] == "gpt2");
  CHECK(j["parallel"]["pp_layers"] == Json::array());

  // A spec that changes every member changes every value written (stage_mapping has one value).
  const Json c = to_json(everything_changed());
  CHECK(paths(c, true) == expected);
  for (const std::string& p : expected) {
    INFO(p);
    const Json::json_pointer at(p);
    if (p == "/version" || p == "/parallel/stage_mapping")
      CHECK(c.at(at) == j.at(at));
    else
      CHECK(c.at(at) != j.at(at));
  }
  CHECK(c["parallel"]["mode"] == "2.5d");
  CHECK(c["parallel"]["schedule"] == "interleaved");
  CHECK(c["recompute"] == "selective");
  CHECK(c["precision"]["params"] == "f16");
  CHECK(c["precision"]["loss_scale"] == 1024.0);
  CHECK(c["optimizer"]["kind"] == "sgd");
  CHECK(c["parallel"]["pp_layers"] == Json::array({1, 3, 3, 1}));
  // Doubles in their shortest form; the seed as an unsigned integer, exactly.
  const std::string compact = c.dump();
  CHECK_THAT(compact, Contains("\"dropout\":0.1,"));
  CHECK_THAT(compact, Contains("\"lr\":0.0003,"));
  CHECK_THAT(compact, Contains("\"seed\":9007199254740993"));

  // The file form: the members in the order of the structs, 2-space indent, a trailing newline.
  const std::string text = run_spec_text(RunSpec{});
  CHECK(text.rfind("{\n  \"version\": 1,\n  \"model\": {\n    \"layers\": 2,\n", 0) == 0);
  CHECK_THAT(text, Contains("\n  },\n  \"global_batch\": 8,\n  \"parallel\": {\n    \"mode\": \"1d\",\n"));
  CHECK_THAT(text, Contains("\"dropout\": 0.0,\n  \"seed\": 1234\n}\n"));
  CHECK(text.back() == '\n');
}

TEST_CASE("to_json then run_spec_from_json gives back the spec exactly", "[spec][json]") {
  std::vector<RunSpec> specs = {RunSpec{}, everything_changed()};
  for (TpMode mode : all_tp_modes())
    for (ScheduleKind schedule : all_schedules())
      for (Recompute recompute : all_recomputes()) {
        RunSpec s;
        s.layout.mode = mode;
        s.layout.schedule = schedule;
        s.recompute = recompute;
        s.layout.tp = mode == TpMode::d3 ? 8 : 4;
        s.layout.pp = 4;
        s.layout.chunks = schedule == ScheduleKind::interleaved ? 3 : fixed_chunks(schedule);
        s.layout.stage_mapping = stage_mapping_of(schedule);
        specs.push_back(s);
      }
  for (int stage = 0; stage <= 3; ++stage)
    for (bool option : {false, true}) {
      RunSpec s;
      s.zero.stage = stage;
      s.zero.bucket_mb = 0.1 * (stage + 1);
      s.zero.offload = option;
      s.zero.keep_parameters = !option;
      s.zero.reduce_per_micro_batch = option;
      specs.push_back(s);
    }
  for (DType params : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    RunSpec s;
    s.precision.params = params;
    s.precision.grad_reduce = DType::f32;
    specs.push_back(s);
  }
  // Doubles that need every digit, a subnormal, the largest seeds.
  RunSpec awkward = everything_changed();
  awkward.optimizer.lr = 1.0 / 3.0;
  awkward.optimizer.eps = 5e-324;
  awkward.optimizer.weight_decay = 1e300;
  awkward.optimizer.beta2 = 0.1 + 0.2;
  awkward.dropout = 0.1;
  awkward.seed = std::numeric_limits<std::uint64_t>::max();
  specs.push_back(awkward);
  awkward.seed = (std::uint64_t{1} << 63) + 12345;
  awkward.model.layers = std::numeric_limits<std::int64_t>::max();
  awkward.layout.pp_layers = {std::numeric_limits<int>::min(), 0, std::numeric_limits<int>::max()};
  specs.push_back(awkward);

  for (const RunSpec& s : specs) {
    INFO(to_json(s).dump());
    CHECK(round_trip(s) == s);
    CHECK(text_round_trip(s) == s);
  }
  CHECK(specs.size() == 2 + 6 * 8 * 3 + 8 + 4 + 2);
}

TEST_CASE("a missing key takes the default given; a missing section all of them", "[spec][json]") {
  const RunSpec base = everything_changed();
  const Json full = to_json(base), defaults = to_json(RunSpec{});
  const std::vector<std::string> every = paths(defaults, false);
  CHECK(every.size() == 46 + 5);  // the leaves and the five sections
  for (const std::string& p : every) {
    INFO(p);
    const Json::json_pointer at(p);
    Json missing = full;
    missing[at.parent_pointer()].erase(at.back());
    Json expected = full;
    expected[at] = defaults.at(at);
    CHECK(to_json(run_spec_from_json(missing)) == expected);
  }
  // The defaults are the caller's: an empty object is exactly them.
  CHECK(run_spec_from_json(Json::object()) == RunSpec{});
  CHECK(run_spec_from_json(Json::object(), base) == base);
  CHECK(run_spec_from_json(Json{{"parallel", {{"tp", 2}}}}, base).layout.tp == 2);
  RunSpec partial = base;
  partial.layout.tp = 2;
  CHECK(run_spec_from_json(Json{{"parallel", {{"tp", 2}}}}, base) == partial);
  // Integers are numbers too, and dtype aliases are accepted.
  CHECK(run_spec_from_json(Json{{"dropout", 0}, {"zero", {{"bucket_mb", 40}}}}).zero.bucket_mb == 40.0);
  CHECK(run_spec_from_json(Json{{"precision", {{"params", "bfloat16"}}}}).precision.params == DType::bf16);
}

TEST_CASE("the reader refuses unknown keys, wrong types, bad names and other versions in one line", "[spec][json]") {
  const Json good = to_json(RunSpec{});
  Json unknown_top = good;
  unknown_top["modle"] = Json::object();
  check_refused(unknown_top,
                "run spec: unknown key 'modle'; expected one of version, model, global_batch, parallel, zero, "
                "recompute, precision, optimizer, dropout, seed");
  check_refused(with(good, "/parallel/tpp", 2),
                "run spec: unknown key 'parallel.tpp'; expected one of mode, tp, depth, pp, dp, schedule, "
                "micro_batches, chunks, group_size, pp_layers, stage_mapping");
  check_refused(with(good, "/model/n_embd", 64),
                "run spec: unknown key 'model.n_embd'; expected one of layers, hidden, heads, seq, vocab, ffn_hidden, "
                "kv_heads, family, tied_head, rope_theta, norm_eps");
  check_refused(with(good, "/parallel/tp", "2"), "run spec: 'parallel.tp' must be an integer; got string \"2\"");
  check_refused(with(good, "/parallel/tp", 2.0), "run spec: 'parallel.tp' must be an integer; got number 2.0");
  check_refused(with(good, "/parallel/tp", 3000000000LL),
                "run spec: 'parallel.tp'=3000000000 is out of range [-2147483648, 2147483647]");
  check_refused(with(good, "/parallel/mode", "4d"),
                "run spec: 'parallel.mode': unknown tensor-parallel mode '4d'; expected one of none, 1d, 1d-sp, 2d, "
                "2.5d, 3d");
  check_refused(with(good, "/parallel/mode", 1), "run spec: 'parallel.mode' must be a name (string); got number 1");
  check_refused(with(good, "/parallel/schedule", "2f2b"),
                "run spec: 'parallel.schedule': unknown pipeline schedule '2f2b'; expected one of gpipe, 1f1b, "
                "interleaved, zb-h1, zb-h2, zb-v, dualpipev, dualpipe");
  check_refused(with(good, "/recompute", "sometimes"),
                "run spec: 'recompute': activation recomputation must be none, selective or full; got 'sometimes'");
  check_refused(with(good, "/optimizer/kind", "adam"),
                "run spec: 'optimizer.kind': unknown optimizer 'adam'; expected sgd or adamw");
  check_refused(with(good, "/precision/params", "fp8"),
                "run spec: 'precision.params': unknown dtype 'fp8'; expected one of f32, f64, bf16, f16");
  check_refused(with(good, "/parallel/pp_layers", Json::array({1, "2"})),
                "run spec: 'parallel.pp_layers[1]' must be an integer; got string \"2\"");
  check_refused(with(good, "/parallel/pp_layers", 4),
                "run spec: 'parallel.pp_layers' must be an array of integers; got number 4");
  check_refused(with(good, "/zero/offload", 1), "run spec: 'zero.offload' must be true or false; got number 1");
  check_refused(with(good, "/dropout", "0.1"), "run spec: 'dropout' must be a number; got string \"0.1\"");
  check_refused(with(good, "/seed", -1), "run spec: 'seed' must be a non-negative integer; got -1");
  check_refused(with(good, "/seed", 1.5), "run spec: 'seed' must be a non-negative integer; got number 1.5");
  check_refused(with(good, "/zero", 3), "run spec: 'zero' must be an object; got number 3");
  check_refused(with(good, "/version", 2), "run spec: version 2 is not supported; expected 1");
  check_refused(with(good, "/version", "1"), "run spec: 'version' must be an integer; got string \"1\"");
  check_refused(Json::array({1, 2}), "run spec: expected a JSON object; got array [1,2]");
  // The version is checked first: a newer format's new keys are explained by it.
  check_refused(with(with(good, "/version", 2), "/parallel/cp", 2), "run spec: version 2 is not supported; expected 1");
  // A long value is shortened in the message.
  check_refused(with(good, "/model", Json::array({1111111111, 2222222222, 3333333333, 4444444444})),
                "run spec: 'model' must be an object; got array [1111111111,2222222222,3333333333,444...");
}

TEST_CASE("a spec file is read, or refused naming its path", "[spec][json]") {
  const std::string path = temp_path("spec.json");
  const RunSpec s = everything_changed();
  {
    std::ofstream out(path);
    out << run_spec_text(s);
  }
  CHECK(read_run_spec_file(path) == s);

  {
    std::ofstream out(path);
    out << "{\"parallel\": {\"tp\": 4, \"pp\": 2}}\n";
  }
  RunSpec expected;
  expected.layout.tp = 4;
  expected.layout.pp = 2;
  CHECK(read_run_spec_file(path) == expected);

  {
    std::ofstream out(path);
    out << "{\"parallel\": {\"tpp\": 4}}\n";
  }
  CHECK_THROWS_WITH(read_run_spec_file(path),
                    Equals("run spec: unknown key 'parallel.tpp'; expected one of mode, tp, depth, pp, dp, schedule, "
                           "micro_batches, chunks, group_size, pp_layers, stage_mapping (in '" + path + "')"));

  {
    std::ofstream out(path);
    out << "{\"parallel\": {\"tp\": 4,}}\n";
  }
  CHECK_THROWS_WITH(read_run_spec_file(path), Contains("run spec: '" + path + "' is not JSON: ") &&
                                                   Contains("parse error at line 1"));
  std::remove(path.c_str());

  const std::string missing = temp_path("missing.json");
  CHECK_THROWS_WITH(read_run_spec_file(missing), Equals("run spec: cannot read '" + missing + "'"));
}

TEST_CASE("precision_for: f32 gradients under bf16 and f16, the parameters' own otherwise", "[spec]") {
  CHECK(precision_for(DType::bf16) == Precision{DType::bf16, DType::f32, {}});
  CHECK(precision_for(DType::f16) == Precision{DType::f16, DType::f32, {}});
  CHECK(precision_for(DType::f32) == Precision{DType::f32, DType::f32, {}});
  CHECK(precision_for(DType::f64) == Precision{DType::f64, DType::f64, {}});
}
