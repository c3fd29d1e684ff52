#include "cost/measured_tables.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <array>
#include <filesystem>

#include "core/data_files.hpp"
#include "core/error.hpp"
#include "cost/json_fields.hpp"
#include "cost/model_flops.hpp"

#include <fmt/format.h>

namespace mdtp::cost {

namespace {

namespace fs = std::filesystem;

// The columns of a row, in the order the file's "columns" must list them.
constexpr std::array<const char*, 10> kColumns = {"params_billions", "heads", "hidden", "layers", "tp", "pp",
                                                  "gpus", "batch", "tflops_per_gpu", "percent_of_peak"};

FlopCount parse_flop_count(const JsonFields& f, const std::string& key) {
  const std::string name = f.text(key);
  if (name == "narayanan") return FlopCount::narayanan;
  if (name == "model") return FlopCount::model;
  throw_error(f.head(), "field '", f.name(key), "' must be \"narayanan\" (the recomputed forward counted) or ",
              "\"model\" (model FLOPs); got \"", name, "\"");
}

template <typename Parse>
auto parse_named(const JsonFields& f, const std::string& key, Parse parse) {
  const std::string name = f.text(key);
  try {
    return parse(name);
  } catch (const Error& e) {
    throw_error(f.head(), "field '", f.name(key), "': ", e.what());
  }
}

MeasuredRule parse_rule(const JsonFields& r) {
  MeasuredRule rule;
  rule.text = r.text("text");
  rule.seq = r.integer("seq", 1, 1 << 24);
  rule.vocab = r.integer("vocab", 1, 1 << 30);
  rule.sequence_parallel = r.flag("sequence_parallel");
  StepConfig& c = rule.step;
  const StepConfig defaults;
  c.spec.precision.params = parse_named(r, "dtype", parse_dtype);
  c.spec.precision.grad_reduce = parse_named(r, "grad_dtype", parse_dtype);
  c.spec.zero.stage = static_cast<int>(r.integer("zero", 0, 3));
  c.spec.recompute = parse_named(r, "recompute", parse_recompute);
  c.spec.dropout = r.has("dropout") ? r.non_negative("dropout", 0.999, "[0, 1)") : 0.0;
  c.spec.model.tied_head = !r.has("tied_head") || r.flag("tied_head");
  c.attention_keeps_probabilities = !r.flag("streaming_attention");
  c.gradient_accumulation_fusion = r.flag("gradient_accumulation_fusion");
  // Optional: StepConfig's defaults (Megatron's).
  auto optional_flag = [&r](const char* key, bool fallback) { return r.has(key) ? r.flag(key) : fallback; };
  c.cross_entropy_fusion = optional_flag("cross_entropy_fusion", defaults.cross_entropy_fusion);
  c.p2p_scatter_gather = optional_flag("p2p_scatter_gather", defaults.p2p_scatter_gather);
  c.grad_nan_check = optional_flag("grad_nan_check", defaults.grad_nan_check);
  const JsonFields o = r.object("overlap");
  c.overlap.dp_gradients = o.flag("dp_gradients");
  c.overlap.pp_p2p = o.flag("pp_p2p");
  c.overlap.tp_comm = o.flag("tp_comm");
  c.overlap.param_gather = o.flag("param_gather");
  c.overlap.tp_backward = o.has("tp_backward") ? o.flag("tp_backward") : defaults.overlap.tp_backward;
  return rule;
}

// A row's optional last element: what the run's launch script set (RunSetup).
RunSetup parse_setup(const JsonFields& f, const JsonFields::json& node, const std::string& at) {
  require(node.is_object(), f.head(), "field '", at, "' must be an object (micro_batch, chunks, dp_overlap); got ",
          node.dump());
  const JsonFields s(node, "measured table", f.where(), at + ".");
  for (const auto& [key, value] : node.items())
    require(key == "micro_batch" || key == "chunks" || key == "dp_overlap", s.head(), "field '", s.name(key),
            "' is not a setup field; expected micro_batch, chunks or dp_overlap");
  RunSetup setup;
  if (s.has("micro_batch")) setup.micro_batch = static_cast<int>(s.integer("micro_batch", 1, 1 << 20));
  if (s.has("chunks")) setup.chunks = static_cast<int>(s.integer("chunks", 1, 1 << 20));
  if (s.has("dp_overlap")) setup.dp_overlap = s.flag("dp_overlap");
  return setup;
}

MeasuredRun parse_row(const JsonFields& f, const JsonFields::json& row, std::size_t i) {
  const std::string at = "rows[" + std::to_string(i) + "]";
  require(row.is_array() && (row.size() == kColumns.size() || row.size() == kColumns.size() + 1), f.head(), "field '",
          at, "' must list ", kColumns.size(), " values (the columns), then optionally the run's setup; got ",
          row.dump());
  auto whole = [&](std::size_t c) {
    return static_cast<int>(f.integer_of(row[c], at + "." + kColumns[c], 1, 1 << 30));
  };
  MeasuredRun r;
  r.billions = f.number_of(row[0], at + "." + kColumns[0], 0.0, 1e6);
  r.heads = whole(1);
  r.hidden = whole(2);
  r.layers = whole(3);
  r.tp = whole(4);
  r.pp = whole(5);
  r.gpus = whole(6);
  r.batch = whole(7);
  r.tflops_per_gpu = f.number_of(row[8], at + "." + kColumns[8], 0.0, 1e6);
  r.percent_of_peak = f.number_of(row[9], at + "." + kColumns[9], 0.0, 100.0);
  require(r.gpus % (r.tp * r.pp) == 0, f.head(), at, ": ", r.gpus, " GPUs are not a whole number of tp x pp = ",
          r.tp, " x ", r.pp, " replicas");
  if (row.size() > kColumns.size())
    r.setup = parse_setup(f, row[kColumns.size()], at + "[" + std::to_string(kColumns.size()) + "]");
  const int dp = r.gpus / (r.tp * r.pp);
  if (r.setup.micro_batch)
    require(r.batch % (dp * *r.setup.micro_batch) == 0, f.head(), at, ": micro_batch ", *r.setup.micro_batch,
            " must divide each replica's share of the batch (", r.batch, " sequences over dp ", dp, ")");
  if (r.setup.chunks)
    require((r.pp > 1 || *r.setup.chunks == 1) && r.layers % (r.pp * *r.setup.chunks) == 0, f.head(), at,
            ": chunks ", *r.setup.chunks, " must be 1 without a pipeline and divide the ", r.layers,
            " layers into pp x chunks = ", r.pp, " x ", *r.setup.chunks, " equal virtual stages");
  return r;
}

bool names_a_file(const std::string& key_or_path) {
  return key_or_path.find('/') != std::string::npos || key_or_path.ends_with(".json");
}

}  // namespace

MeasuredTable parse_measured_table(const std::string& json_text, const std::string& where) {
  const JsonFields::json doc = parse_json_object(json_text, "measured table", where);
  const JsonFields top(doc, "measured table", where);
  MeasuredTable t;
  t.key = top.text("key");
  t.title = top.text("title");
  t.citation = top.text("citation");
  t.cluster = top.text("cluster");
  t.flops = parse_flop_count(top, "flops");
  t.rule = parse_rule(top.object("rule"));
  const JsonFields::json& columns = top.field("columns");
  JsonFields::json expected = JsonFields::json::array();
  for (const char* c : kColumns) expected.push_back(c);
  require(columns == expected, top.head(), "field 'columns' must be ", expected.dump(), "; got ", columns.dump());
  const JsonFields::json& rows = top.field("rows");
  require(rows.is_array() && !rows.empty(), top.head(), "field 'rows' must be a non-empty list of rows");
  for (std::size_t i = 0; i < rows.size(); ++i) t.rows.push_back(parse_row(top, rows[i], i));
  const bool any_setup =
      std::any_of(t.rows.begin(), t.rows.end(), [](const MeasuredRun& r) { return !r.setup.empty(); });
  if (any_setup || top.has("setup_source")) t.setup_source = top.text("setup_source");
  return t;
}

MeasuredTable load_measured_table(const std::string& path) {
  MeasuredTable t = parse_measured_table(read_document(path, "measured table"), path);
  t.path = path;
  return t;
}

const std::vector<MeasuredTable>& measured_tables() {
  static const std::vector<MeasuredTable> tables = [] {
    const auto dir = find_data_file("measured");
    require(dir.has_value(), "the shipped tables of measured runs (data/measured/) were not found; looked in:",
            data_file_places("measured"));
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(*dir))
      if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path().string());
    std::vector<MeasuredTable> all;
    for (const auto& file : files) all.push_back(load_measured_table(file));
    std::sort(all.begin(), all.end(), [](const MeasuredTable& a, const MeasuredTable& b) { return a.key < b.key; });
    return all;
  }();
  return tables;
}

MeasuredTable measured_table(const std::string& key_or_path) {
  if (names_a_file(key_or_path)) return load_measured_table(key_or_path);
  std::string keys;
  for (const MeasuredTable& t : measured_tables()) {
    if (t.key == key_or_path) return t;
    keys += (keys.empty() ? "" : ", ") + t.key;
  }
  throw_error("no measured table '", key_or_path, "'; expected one of ", keys, " or a path to a table file");
}

StepConfig MeasuredTable::config(const MeasuredRun& row) const {
  StepConfig c = measured_run_config(row, rule.sequence_parallel && row.tp > 1 ? TpMode::d1_sp : TpMode::d1, rule.seq,
                                     rule.vocab, rule.step);
  if (row.setup.micro_batch) c.set_micro_batch(*row.setup.micro_batch);
  if (row.setup.chunks) {
    c.spec.layout.chunks = *row.setup.chunks;
    c.spec.layout.schedule = *row.setup.chunks > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  }
  if (row.setup.dp_overlap) c.overlap.dp_gradients = *row.setup.dp_overlap;
  return c;
}

double MeasuredTable::step_flops(const StepConfig& c) const {
  return flops == FlopCount::narayanan ? narayanan_flops(c.spec.model, c.spec.global_batch)
                                       : model_flops(c.spec.model, c.spec.global_batch);
}

namespace {

// Ranks 1..n, ties given the mean of the ranks they span.
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return x[i] < x[j]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
    i = j + 1;
  }
  return r;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  require(a.size() == b.size(), "spearman: series of ", a.size(), " and ", b.size(), " values");
  if (a.size() < 2) return 0.0;
  // Pearson's correlation of the ranks (exact with ties, unlike 1 − 6Σd²/(n(n²−1))).
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1.0) / 2.0;
  double sab = 0.0, saa = 0.0, sbb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa == 0.0 || sbb == 0.0 ? 0.0 : sab / std::sqrt(saa * sbb);
}

StepConfig measured_run_config(const MeasuredRun& row, TpMode mode, std::int64_t seq, std::int64_t vocab,
                               const StepConfig& rest) {
  StepConfig c = rest;
  c.spec.model = ModelShape{row.layers, row.hidden, row.heads, seq, vocab};
  c.spec.model.tied_head = rest.spec.model.tied_head;
  c.spec.global_batch = row.batch;
  c.spec.layout = ParallelLayout{};
  c.spec.layout.mode = mode;
  c.spec.layout.tp = row.tp;
  c.spec.layout.pp = row.pp;
  c.spec.layout.dp = row.gpus / (row.tp * row.pp);
  c.set_micro_batch(1);
  c.spec.layout.schedule = ScheduleKind::one_f_one_b;
  c.spec.layout.chunks = 1;
  const int per_stage = row.layers / row.pp;
  if (row.pp > 1)
    for (int v = 2; v <= per_stage; ++v)
      if (per_stage % v == 0) {
        c.spec.layout.schedule = ScheduleKind::interleaved;
        c.spec.layout.chunks = v;
        break;
      }
  return c;
}

PairOrder distinct_pair_order(const std::vector<double>& measured, const std::vector<double>& predicted,
                              double apart) {
  require(measured.size() == predicted.size(), "pair order: series of ", measured.size(), " and ", predicted.size(),
          " values");
  PairOrder o;
  for (std::size_t i = 0; i < measured.size(); ++i)
    for (std::size_t j = 0; j < measured.size(); ++j) {
      if (measured[i] <= measured[j] * (1.0 + apart)) continue;  // i not more than `apart` above j
      ++o.pairs;
      if (predicted[i] > predicted[j]) ++o.ordered;
    }
  return o;
}

RankOrder rank_order(const std::vector<double>& measured, const std::vector<double>& predicted) {
  RankOrder o;
  o.runs = measured.size();
  o.spearman = spearman(predicted, measured);
  const PairOrder pairs = distinct_pair_order(measured, predicted);
  o.distinct_pairs = pairs.pairs;
  o.distinct_pairs_ordered = pairs.ordered;
  return o;
}

std::string model_name(const ModelOrder& m) { return fmt::format("l={} h={} a={}", m.layers, m.hidden, m.heads); }

bool order_held(const Validation& v, const PredictionGoal& goal) {
  return std::any_of(v.models.begin(), v.models.end(),
                     [&](const ModelOrder& m) { return m.order.runs >= goal.order_configurations; });
}

std::vector<std::string> goal_misses(const Validation& v, const PredictionGoal& goal) {
  std::vector<std::string> misses;
  if (v.mean_abs_error > goal.mean_abs_error)
    misses.push_back(fmt::format("mean |error| {:.1f}% > {:.0f}%", 100 * v.mean_abs_error, 100 * goal.mean_abs_error));
  if (v.max_error > goal.max_error)
    misses.push_back(fmt::format("worst |error| {:.1f}% > {:.0f}%", 100 * v.max_error, 100 * goal.max_error));
  for (const ModelOrder& m : v.models) {
    if (m.order.runs < goal.order_configurations) continue;
    if (m.order.spearman < goal.spearman)
      misses.push_back(fmt::format("{}: Spearman {:.2f} < {:.1f}", model_name(m), m.order.spearman, goal.spearman));
    if (m.order.distinct_pairs_ordered < m.order.distinct_pairs)
      misses.push_back(fmt::format("{}: {} of {} pairs in order", model_name(m), m.order.distinct_pairs_ordered,
                                   m.order.distinct_pairs));
  }
  return misses;
}

Validation validate(const MeasuredTable& table, const Cluster& cluster) {
  Validation v;
  v.table = &table;
  double lo = table.rows.front().tflops_per_gpu, hi = lo;
  for (const auto& r : table.rows) {
    lo = std::min(lo, r.tflops_per_gpu);
    hi = std::max(hi, r.tflops_per_gpu);
  }
  // The constant c minimising max |c/x − 1| over the measured x: c/lo − 1 = 1 − c/hi.
  v.baseline_tflops = 2.0 / (1.0 / lo + 1.0 / hi);
  const double n = static_cast<double>(table.rows.size());
  std::vector<double> measured, predicted;
  const Cluster data_sheet = at_data_sheet(cluster);
  for (const auto& r : table.rows) {
    ValidationRow row;
    row.row = r;
    const StepConfig config = table.config(r);
    row.estimate = estimate_step(config, cluster);
    const auto tflops_per_gpu = [&](double step_seconds) {
      return table.step_flops(config) / (step_seconds * config.gpus()) / 1e12;
    };
    row.predicted = tflops_per_gpu(row.estimate.step_seconds);
    row.bound = tflops_per_gpu(estimate_step(config, data_sheet).step_seconds);
    row.error = (row.predicted - r.tflops_per_gpu) / r.tflops_per_gpu;
    row.baseline_error = (v.baseline_tflops - r.tflops_per_gpu) / r.tflops_per_gpu;
    v.max_error = std::max(v.max_error, std::abs(row.error));
    v.baseline_max_error = std::max(v.baseline_max_error, std::abs(row.baseline_error));
    v.mean_abs_error += std::abs(row.error) / n;
    v.baseline_mean_abs_error += std::abs(row.baseline_error) / n;
    measured.push_back(r.tflops_per_gpu);
    predicted.push_back(row.predicted);
    v.rows.push_back(row);
  }
  v.across = rank_order(measured, predicted);
  // Each model's rows, in the order the table first names it.
  std::vector<bool> taken(v.rows.size(), false);
  for (std::size_t i = 0; i < v.rows.size(); ++i) {
    if (taken[i]) continue;
    const MeasuredRun& first = v.rows[i].row;
    std::vector<double> model_measured, model_predicted;
    for (std::size_t j = i; j < v.rows.size(); ++j) {
      const MeasuredRun& r = v.rows[j].row;
      if (r.layers != first.layers || r.hidden != first.hidden || r.heads != first.heads) continue;
      taken[j] = true;
      model_measured.push_back(r.tflops_per_gpu);
      model_predicted.push_back(v.rows[j].predicted);
    }
    v.models.push_back({first.layers, first.hidden, first.heads, rank_order(model_measured, model_predicted)});
  }
  return v;
}

}  // namespace mdtp::cost
