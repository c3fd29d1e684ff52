#pragma once
// Published tables of measured training runs, and the step model held against them (`mdtp plan
// --validate`).  Each table is a data file (data/measured/KEY.json: docs/performance-model.md,
// "Tables of measured runs") that states its hardware, how it counts FLOPs, its citation, its rows
// as published and ONE rule for what its rows leave out, written from the publication's stated
// setup, never fitted to its numbers.  Nothing in the model is tuned on these rows: they are how a
// user (and the tests) see how far the predictions are from real clusters, and a user's own table
// in the same format is validated the same way.
//
//   korthikanti-2022 Korthikanti et al. 2022 (the Megatron-LM README's A100 MFU table of 2022): GPT
//                    22B-1T on DGX A100 with sequence parallelism and selective recomputation, dp 1
//   narayanan-2021   Narayanan et al. 2021 (SC '21), Table 1: GPT 1.7B-1T on Selene (DGX A100)
//   megatron-h100    the Megatron-LM README's weak-scaling table (images/model_table.png): GPT
//                    1.7B-462B on DGX H100, all overlaps on
#include <optional>
#include <string>
#include <vector>

#include "cost/cluster.hpp"
#include "cost/step_model.hpp"

namespace mdtp::cost {

// What a publication's own launch scripts set for one run, where they are published (the table's
// "setup_source" cites them); each value left unset is decided by the table's rule.
struct RunSetup {
  std::optional<int> micro_batch;  // sequences per micro-batch
  std::optional<int> chunks;       // model chunks per stage v: 1 = 1F1B, > 1 = interleaved
  std::optional<bool> dp_overlap;  // the gradient reduction under the last micro-batch's backward
  bool empty() const { return !micro_batch && !chunks && !dp_overlap; }
};

// One measured run, as such tables print it.
struct MeasuredRun {
  double billions = 0.0;  // parameters, as the table states them
  int heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, batch = 0;
  double tflops_per_gpu = 0.0;  // measured, counted as the table counts (MeasuredTable::flops)
  double percent_of_peak = 0.0;
  RunSetup setup;  // an optional last element of the row: {"micro_batch": 16, "chunks": 1, "dp_overlap": true}
};

// How a table counts the FLOPs of a step, from which its TFLOP/s per GPU follow.
enum class FlopCount {
  narayanan,  // 96·B·s·l·h²(1 + s/6h + V/16lh): the recomputed forward counted (model_flops.hpp)
  model,      // model FLOPs, no recomputation counted (Megatron's num_floating_point_operations)
};

// What a table's rows leave out, fixed once for every row.  Shared by every table
// (measured_run_config): the GPT block at `seq` and `vocab`, the row's batch, tp, pp and
// dp = GPUs / (tp·pp), micro-batch 1, and with a pipeline the interleaved schedule with v = the
// smallest divisor > 1 of the layers per stage (1F1B when a stage has one layer); a row's RunSetup,
// where its publication states one, replaces these.
struct MeasuredRule {
  std::string text;  // the rule in words, printed above the table
  std::int64_t seq = 0, vocab = 0;
  bool sequence_parallel = false;  // 1D-SP wherever tp > 1; else 1D
  // Everything else every row runs, as a StepConfig: the precision, ZeRO stage, recomputation,
  // dropout, whether the LM head is tied (optional in the file, default true: the table's parameter
  // counts tell, and tests hold every row's count to the published one) and the step switches (the
  // overlaps, the attention kernel, the kernels' fusion, p2p scatter/gather, the NaN check; the
  // optional ones default to StepConfig's defaults).  Its model shape and layout are the row's.
  StepConfig step;
};

struct MeasuredTable {
  std::string key;       // "narayanan-2021", "megatron-h100", "korthikanti-2022"
  std::string title;     // printed above the table
  std::string citation;  // where the numbers are, exactly
  std::string cluster;   // the cluster preset of the hardware it was measured on
  std::string path;      // the file it was read from
  // Where the rows' setups come from (the launch scripts of the runs); required when a row has one.
  std::string setup_source;
  FlopCount flops = FlopCount::model;
  MeasuredRule rule;
  std::vector<MeasuredRun> rows;

  // A row as a StepConfig, by the rule.
  StepConfig config(const MeasuredRun& row) const;
  // The FLOPs of one step of `config` as the table counts them.
  double step_flops(const StepConfig& config) const;
};

// Reads and validates a table file; mdtp::Error "measured table F: field X ..." on any problem.
MeasuredTable load_measured_table(const std::string& path);
MeasuredTable parse_measured_table(const std::string& json_text, const std::string& where);

// Every shipped table (data/measured/*.json, core/data_files.hpp), ordered by key.
const std::vector<MeasuredTable>& measured_tables();
// A shipped table by key, or a table file by path (anything with a '/' or ending in .json); an
// mdtp::Error names the shipped keys.
MeasuredTable measured_table(const std::string& key_or_path);

struct ValidationRow {
  MeasuredRun row;
  StepEstimate estimate;
  double predicted = 0.0;       // TFLOP/s per GPU, counted as the table counts
  double error = 0.0;           // (predicted − measured) / measured
  double baseline_error = 0.0;  // the same for the constant-throughput baseline
  // TFLOP/s per GPU of the same configuration on the cluster at its data sheet (at_data_sheet): no
  // run of this configuration on this hardware is faster, so a row measured above it ran something
  // the rule does not describe.
  double bound = 0.0;
};

// Whether the model orders a set of measured runs as they measured: Spearman's rank correlation of
// predicted and measured TFLOP/s (ties averaged), and the pairs whose measured TFLOP/s differ by more
// than 10 % (the larger over the smaller) with how many of them the model predicts in that order.
struct RankOrder {
  std::size_t runs = 0;
  double spearman = 0.0;
  int distinct_pairs = 0, distinct_pairs_ordered = 0;
};

// The runs of one model in a table (the same layers, hidden size and heads: the table fixes the
// sequence and vocabulary) and their order: the configurations of that model a user chooses between,
// which is what the prediction goal's order condition is about.
struct ModelOrder {
  int layers = 0, hidden = 0, heads = 0;
  RankOrder order;  // order.runs: the configurations this model was measured in
};

struct Validation {
  const MeasuredTable* table = nullptr;
  std::vector<ValidationRow> rows;
  double baseline_tflops = 0.0;  // one figure for every row: the one with the least worst error
  double max_error = 0.0, mean_abs_error = 0.0, baseline_max_error = 0.0, baseline_mean_abs_error = 0.0;
  // The order over every row of the table, models and configurations alike (a weak-scaling table's
  // rows are each a different model on a different cluster size): reported, not part of the goal.
  RankOrder across;
  // Each model's configurations, in the order the table first names the model.
  std::vector<ModelOrder> models;
};

// RankOrder's pair count over parallel series of measured and predicted values.
struct PairOrder {
  int pairs = 0, ordered = 0;
};
PairOrder distinct_pair_order(const std::vector<double>& measured, const std::vector<double>& predicted,
                              double apart = 0.10);

// The rank order of parallel series of measured and predicted TFLOP/s.
RankOrder rank_order(const std::vector<double>& measured, const std::vector<double>& predicted);

Validation validate(const MeasuredTable& table, const Cluster& cluster);

// The goal a prediction is held to on measured runs it has never seen: mean |error| within 10 %,
// every row within 25 %, and the measured order of configurations kept — for a model measured in at
// least five configurations, Spearman's ρ ≥ 0.8 over them and every pair of them measured more than
// 10 % apart predicted in that order.  Rows of different models are not configurations to choose
// between: their order across the table (Validation::across) is reported, not held.
struct PredictionGoal {
  double mean_abs_error = 0.10, max_error = 0.25, spearman = 0.8;
  std::size_t order_configurations = 5;
};
// "l=48 h=6144 a=64": a model of a table, as the text and the misses name it.
std::string model_name(const ModelOrder& m);
// Whether any model of `v` has enough configurations for the goal's order condition.
bool order_held(const Validation& v, const PredictionGoal& goal = {});
// What a validation misses of the goal, one phrase each ("mean |error| 15.1% > 10%", "l=24 h=2048
// a=16: Spearman 0.40 < 0.8"); empty when it meets it.
std::vector<std::string> goal_misses(const Validation& v, const PredictionGoal& goal = {});

// What every table's rule shares (MeasuredRule's comment), in `mode`: the row's model and layout
// on `rest` (a rule's StepConfig: its precision, ZeRO, recomputation, tied head and switches).
StepConfig measured_run_config(const MeasuredRun& row, TpMode mode, std::int64_t seq, std::int64_t vocab,
                               const StepConfig& rest);

// Spearman's ρ of two equally long series (average ranks for ties); 0 for fewer than 2 values.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace mdtp::cost
