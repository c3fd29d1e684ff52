#pragma once
// One set of flags for the run spec (spec/run_spec.hpp), registered once here and used by every
// command that takes a run — `train`, `cost`, `plan`, `schedule`, `bench` — so that a flag means the
// same thing everywhere: `--zero N` is a ZeRO stage, `--micro-batches M` the micro-batches per step,
// `--hidden H` the width.  A command registers the groups it applies.
//
// `--config FILE` reads a spec written by `--write-config` (or by hand: missing keys take the
// command's defaults); flags given beside it override its values.  So a user predicts a run
// (`mdtp cost … --write-config r.json`), runs it (`mdtp train --config r.json`) and plans around it
// (`mdtp plan --config r.json`) from the same file.
//
// Each flag records an edit of the spec when it parses; resolve() applies the file, then the edits.
// Spellings of the flags before this set (--embd, --batch, --microbatches, --micro-batch,
// --zero-stage, --no-dropout, --mode) are refused with one line naming the new flag.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/options.hpp"
#include "spec/run_spec.hpp"

namespace mdtp::cli {

// The groups of flags a command registers.
enum SpecFlagGroup : unsigned {
  kModelFlags = 1u << 0,      // --model --layers --hidden --heads --seq --vocab --ffn-hidden --kv-heads
                              // --rope-theta --norm-eps --tie-embeddings
  kBatchFlags = 1u << 1,      // --global-batch --micro-batch-size
  kTpFlags = 1u << 2,         // --tp-mode --tp --tp-depth --dp
  kPipelineFlags = 1u << 3,   // --pp --schedule --micro-batches --chunks --group-size --pp-layers
  kZeroFlags = 1u << 4,       // --zero --zero-bucket-mb --zero-offload --zero-keep-params --zero-reduce-per-micro-batch
  kRecomputeFlags = 1u << 5,  // --recompute
  kPrecisionFlags = 1u << 6,  // --dtype --grad-reduce-dtype --dropout
  kOptimizerFlags = 1u << 7,  // --optimizer --lr --grad-clip --seed
  kConfigFlags = 1u << 8,     // --config
  kWriteConfigFlag = 1u << 9, // --write-config
  kAllSpecFlags = (1u << 10) - 1,
};

class SpecFlags {
 public:
  // `defaults`: the spec without any flag (the command's defaults, shown in --help); `model_note`,
  // when not empty, is what --help says of a model size left at 0 (train: from the checkpoint or
  // the data).
  SpecFlags(CLI::App& app, unsigned groups, RunSpec defaults, std::string model_note = "");
  SpecFlags(const SpecFlags&) = delete;
  SpecFlags& operator=(const SpecFlags&) = delete;

  // The spec asked for: --config's file (or the defaults), then every flag given.  Not validated.
  RunSpec resolve() const;
  // Whether the command line gave this flag (or, for a spec member, whether --config did).
  bool given(const std::string& flag) const;
  bool config_given() const { return !config_path_.empty(); }
  // The micro-batch size --micro-batch-size asked for (sequences per micro-batch), if given: the
  // command turns it into micro-batches once it knows dp (m = global batch / (dp · b)).
  std::optional<std::int64_t> micro_batch_size() const { return micro_batch_size_; }
  // --write-config's path, "" when not given; checked before a run starts (io/output_path.hpp).
  const std::string& write_config_path() const { return write_config_path_; }
  // Writes the fully resolved spec to --write-config's file, if given (replaced atomically).
  void write_config(const RunSpec& spec) const;

 private:
  template <class T, class Apply>
  CLI::Option* flag(const std::string& name, const std::string& help, Apply apply);
  template <class Parse, class Apply>
  CLI::Option* named(const std::string& name, const std::string& help, Parse parse, Apply apply);
  void add_model(const std::string& model_note);
  void add_batch();
  void add_tp();
  void add_pipeline();
  void add_zero();
  void add_precision();
  void add_optimizer();

  CLI::App& app_;
  RunSpec defaults_;
  std::vector<std::function<void(RunSpec&)>> edits_;
  std::string config_path_, write_config_path_;
  std::optional<std::int64_t> micro_batch_size_;
  bool tie_embeddings_ = false;
  bool untie_embeddings_ = false;
};

// Old spellings refused with one line naming the new flag, e.g. {"--embd", "--hidden"}: the option is
// accepted by the parser (so it is not called unknown) and refused when it parses.  A command calls
// it after registering its own options; a name the command still uses (for something else) is left
// to it.
void add_renamed_flags(CLI::App& app, const std::vector<std::pair<std::string, std::string>>& old_to_new);
// The spellings the run flags replaced: --embd, --batch, --microbatches, --micro-batch, --zero-stage,
// --no-dropout, --mode.
const std::vector<std::pair<std::string, std::string>>& renamed_run_flags();

// m = global batch / (dp · b) for a --micro-batch-size b; an mdtp::Error naming the values when it
// does not divide.
int micro_batches_for(std::int64_t global_batch, int dp, std::int64_t micro_batch_size);

}  // namespace mdtp::cli
