#include "spec/run_spec_json.hpp"

#include <fstream>
#include <limits>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace mdtp {
namespace {

using Json = nlohmann::json;

// ---- writing ----------------------------------------------------------------------------------
// One writer for both JSON types: nlohmann::json (keys sorted, what to_json returns) and
// ordered_json (keys in the order of the structs, what a file shows).  Sub-objects are built
// whole and then inserted, because ordered_json keeps its members in a vector and a reference
// into it does not survive the next insertion.

template <class J>
J write(const RunSpec& s) {
  const ModelShape& m = s.model;
  J model;
  model["layers"] = m.layers;
  model["hidden"] = m.hidden;
  model["heads"] = m.heads;
  model["seq"] = m.seq;
  model["vocab"] = m.vocab;
  model["ffn_hidden"] = m.ffn_hidden;
  model["kv_heads"] = m.kv_heads;
  model["family"] = model_family_name(m.family);
  model["tied_head"] = m.tied_head;
  model["rope_theta"] = m.rope_theta;
  model["norm_eps"] = m.norm_eps;

  const ParallelLayout& p = s.layout;
  J pp_layers = J::array();
  for (int blocks : p.pp_layers) pp_layers.push_back(blocks);
  J parallel;
  parallel["mode"] = tp_mode_name(p.mode);
  parallel["tp"] = p.tp;
  parallel["depth"] = p.depth;
  parallel["pp"] = p.pp;
  parallel["dp"] = p.dp;
  parallel["schedule"] = schedule_name(p.schedule);
  parallel["micro_batches"] = p.micro_batches;
  parallel["chunks"] = p.chunks;
  parallel["group_size"] = p.group_size;
  parallel["pp_layers"] = std::move(pp_layers);
  parallel["stage_mapping"] = stage_mapping_name(p.stage_mapping);

  J zero;
  zero["stage"] = s.zero.stage;
  zero["bucket_mb"] = s.zero.bucket_mb;
  zero["offload"] = s.zero.offload;
  zero["keep_parameters"] = s.zero.keep_parameters;
  zero["reduce_per_micro_batch"] = s.zero.reduce_per_micro_batch;

  J precision;
  precision["params"] = dtype_name(s.precision.params);
  precision["grad_reduce"] = dtype_name(s.precision.grad_reduce);
  precision["loss_scale"] = s.precision.loss_scaling.fixed;
  precision["initial_loss_scale"] = s.precision.loss_scaling.initial;
  precision["min_loss_scale"] = s.precision.loss_scaling.min;
  precision["loss_scale_window"] = s.precision.loss_scaling.window;
  precision["hysteresis"] = s.precision.loss_scaling.hysteresis;

  const OptimizerSpec& o = s.optimizer;
  J optimizer;
  optimizer["kind"] = optimizer_kind_name(o.kind);
  optimizer["lr"] = o.lr;
  optimizer["beta1"] = o.beta1;
  optimizer["beta2"] = o.beta2;
  optimizer["eps"] = o.eps;
  optimizer["weight_decay"] = o.weight_decay;
  optimizer["grad_clip"] = o.grad_clip;

  J j;
  j["version"] = kRunSpecVersion;
  j["model"] = std::move(model);
  j["global_batch"] = s.global_batch;
  j["parallel"] = std::move(parallel);
  j["zero"] = std::move(zero);
  j["recompute"] = recompute_name(s.recompute);
  j["precision"] = std::move(precision);
  j["optimizer"] = std::move(optimizer);
  j["dropout"] = s.dropout;
  j["seed"] = s.seed;
  return j;
}

// ---- reading ----------------------------------------------------------------------------------

// A value's JSON type and text, shortened, for messages.
std::string shown(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(value.type_name()) + " " + text;
}

[[noreturn]] void wrong_type(const std::string& where, const char* expected, const Json& value) {
  throw_error("run spec: '", where, "' must be ", expected, "; got ", shown(value));
}

// One JSON object of the spec at `path` ("" at the top): refuses anything but an object and any
// key not in `keys`, and reads its members into the spec, leaving those it lacks as they are.
class Section {
 public:
  Section(const Json& json, std::string path, std::vector<const char*> keys)
      : json_(json), path_(std::move(path)), keys_(std::move(keys)) {
    if (!json_.is_object()) {
      if (path_.empty()) throw_error("run spec: expected a JSON object; got ", shown(json_));
      wrong_type(path_, "an object", json_);
    }
    for (const auto& item : json_.items()) {
      bool known = false;
      for (const char* k : keys_) known = known || item.key() == k;
      if (known) continue;
      std::string expected;
      for (const char* k : keys_) expected += (expected.empty() ? "" : ", ") + std::string(k);
      throw_error("run spec: unknown key '", where(item.key()), "'; expected one of ", expected);
    }
  }

  std::string where(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  // The member `key`, or nullptr when the object lacks it.
  const Json* find(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() ? nullptr : &*it;
  }

  // A nested object (an empty one when missing, so that its members keep their defaults).
  Section section(const char* key, std::vector<const char*> keys) const {
    static const Json empty = Json::object();
    const Json* value = find(key);
    return Section(value ? *value : empty, where(key), std::move(keys));
  }

  void read(const char* key, int& out) const {
    if (const Json* v = find(key))
      out = static_cast<int>(integer(*v, where(key), std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  }
  void read(const char* key, std::int64_t& out) const {
    if (const Json* v = find(key))
      out = integer(*v, where(key), std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  }
  void read(const char* key, std::uint64_t& out) const {
    const Json* v = find(key);
    if (!v) return;
    if (!v->is_number_integer()) wrong_type(where(key), "a non-negative integer", *v);
    if (!v->is_number_unsigned()) {
      const std::int64_t signed_value = v->get<std::int64_t>();
      require(signed_value >= 0, "run spec: '", where(key), "' must be a non-negative integer; got ", signed_value);
      out = static_cast<std::uint64_t>(signed_value);
      return;
    }
    out = v->get<std::uint64_t>();
  }
  void read(const char* key, double& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_number()) wrong_type(where(key), "a number", *v);
      out = v->get<double>();
    }
  }
  void read(const char* key, bool& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_boolean()) wrong_type(where(key), "true or false", *v);
      out = v->get<bool>();
    }
  }
  void read(const char* key, std::vector<int>& out) const {
    const Json* v = find(key);
    if (!v) return;
    if (!v->is_array()) wrong_type(where(key), "an array of integers", *v);
    std::vector<int> values;
    for (std::size_t i = 0; i < v->size(); ++i)
      values.push_back(static_cast<int>(integer((*v)[i], where(key) + "[" + std::to_string(i) + "]",
                                                std::numeric_limits<int>::min(), std::numeric_limits<int>::max())));
    out = std::move(values);
  }
  // An enum given by its name, parsed by `parse` (whose message names the value and the choices).
  template <class E, class Parse>
  void read_name(const char* key, E& out, Parse parse) const {
    const Json* v = find(key);
    if (!v) return;
    if (!v->is_string()) wrong_type(where(key), "a name (string)", *v);
    try {
      out = parse(v->get<std::string>());
    } catch (const Error& e) {
      throw_error("run spec: '", where(key), "': ", e.what());
    }
  }

 private:
  static std::int64_t integer(const Json& v, const std::string& where, std::int64_t lo, std::int64_t hi) {
    if (!v.is_number_integer()) wrong_type(where, "an integer", v);
    if (v.is_number_unsigned()) {
      const std::uint64_t u = v.get<std::uint64_t>();
      require(u <= static_cast<std::uint64_t>(hi), "run spec: '", where, "'=", u, " is out of range [", lo, ", ", hi,
              "]");
      return static_cast<std::int64_t>(u);
    }
    const std::int64_t i = v.get<std::int64_t>();
    require(i >= lo && i <= hi, "run spec: '", where, "'=", i, " is out of range [", lo, ", ", hi, "]");
    return i;
  }

  const Json& json_;
  std::string path_;
  std::vector<const char*> keys_;
};

}  // namespace

nlohmann::json to_json(const RunSpec& spec) { return write<nlohmann::json>(spec); }

RunSpec run_spec_from_json(const nlohmann::json& json, const RunSpec& defaults) {
  if (!json.is_object()) throw_error("run spec: expected a JSON object; got ", shown(json));
  // The version before the keys: a newer format's new keys are best explained by its version.
  if (const auto it = json.find("version"); it != json.end()) {
    if (!it->is_number_integer()) wrong_type("version", "an integer", *it);
    require(*it == kRunSpecVersion, "run spec: version ", it->dump(), " is not supported; expected ", kRunSpecVersion);
  }
  const Section top(json, "",
                    {"version", "model", "global_batch", "parallel", "zero", "recompute", "precision", "optimizer",
                     "dropout", "seed"});
  RunSpec s = defaults;

  const Section model = top.section("model", {"layers", "hidden", "heads", "seq", "vocab", "ffn_hidden", "kv_heads",
                                              "family", "tied_head", "rope_theta", "norm_eps"});
  model.read_name("family", s.model.family, parse_model_family);
  model.read("layers", s.model.layers);
  model.read("hidden", s.model.hidden);
  model.read("heads", s.model.heads);
  model.read("seq", s.model.seq);
  model.read("vocab", s.model.vocab);
  model.read("ffn_hidden", s.model.ffn_hidden);
  model.read("kv_heads", s.model.kv_heads);
  model.read("tied_head", s.model.tied_head);
  model.read("rope_theta", s.model.rope_theta);
  model.read("norm_eps", s.model.norm_eps);

  top.read("global_batch", s.global_batch);

  const Section parallel = top.section("parallel", {"mode", "tp", "depth", "pp", "dp", "schedule", "micro_batches",
                                                    "chunks", "group_size", "pp_layers", "stage_mapping"});
  parallel.read_name("mode", s.layout.mode, parse_tp_mode);
  parallel.read("tp", s.layout.tp);
  parallel.read("depth", s.layout.depth);
  parallel.read("pp", s.layout.pp);
  parallel.read("dp", s.layout.dp);
  parallel.read_name("schedule", s.layout.schedule, parse_schedule);
  parallel.read("micro_batches", s.layout.micro_batches);
  parallel.read("chunks", s.layout.chunks);
  parallel.read("group_size", s.layout.group_size);
  parallel.read("pp_layers", s.layout.pp_layers);
  parallel.read_name("stage_mapping", s.layout.stage_mapping, parse_stage_mapping);
  // A schedule fixes its stage mapping and (but for interleaved) its chunks per stage: a spec that
  // names the schedule without them means the schedule's.
  if (parallel.find("schedule")) {
    if (!parallel.find("stage_mapping")) s.layout.stage_mapping = stage_mapping_of(s.layout.schedule);
    if (!parallel.find("chunks") && fixed_chunks(s.layout.schedule) > 0)
      s.layout.chunks = fixed_chunks(s.layout.schedule);
  }

  const Section zero =
      top.section("zero", {"stage", "bucket_mb", "offload", "keep_parameters", "reduce_per_micro_batch"});
  zero.read("stage", s.zero.stage);
  zero.read("bucket_mb", s.zero.bucket_mb);
  zero.read("offload", s.zero.offload);
  zero.read("keep_parameters", s.zero.keep_parameters);
  zero.read("reduce_per_micro_batch", s.zero.reduce_per_micro_batch);

  top.read_name("recompute", s.recompute, parse_recompute);

  const Section precision = top.section("precision", {"params", "grad_reduce", "loss_scale", "initial_loss_scale",
                                                      "min_loss_scale", "loss_scale_window", "hysteresis"});
  precision.read_name("params", s.precision.params, parse_dtype);
  precision.read_name("grad_reduce", s.precision.grad_reduce, parse_dtype);
  precision.read("loss_scale", s.precision.loss_scaling.fixed);
  precision.read("initial_loss_scale", s.precision.loss_scaling.initial);
  precision.read("min_loss_scale", s.precision.loss_scaling.min);
  precision.read("loss_scale_window", s.precision.loss_scaling.window);
  precision.read("hysteresis", s.precision.loss_scaling.hysteresis);

  const Section optimizer =
      top.section("optimizer", {"kind", "lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip"});
  optimizer.read_name("kind", s.optimizer.kind, parse_optimizer_kind);
  optimizer.read("lr", s.optimizer.lr);
  optimizer.read("beta1", s.optimizer.beta1);
  optimizer.read("beta2", s.optimizer.beta2);
  optimizer.read("eps", s.optimizer.eps);
  optimizer.read("weight_decay", s.optimizer.weight_decay);
  optimizer.read("grad_clip", s.optimizer.grad_clip);

  top.read("dropout", s.dropout);
  top.read("seed", s.seed);
  return s;
}

std::string run_spec_text(const RunSpec& spec) { return write<nlohmann::ordered_json>(spec).dump(2) + "\n"; }

RunSpec read_run_spec_file(const std::string& path, const RunSpec& defaults) {
  std::ifstream in(path);
  if (!in) throw_error("run spec: cannot read '", path, "'");
  Json json;
  try {
    json = Json::parse(in);
  } catch (const Json::exception& e) {
    throw_error("run spec: '", path, "' is not JSON: ", e.what());
  }
  try {
    return run_spec_from_json(json, defaults);
  } catch (const Error& e) {
    throw_error(e.what(), " (in '", path, "')");
  }
}

}  // namespace mdtp
