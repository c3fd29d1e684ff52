#pragma once
// What `mdtp cost` and `mdtp plan` assume beyond the run spec when they model a whole GPT step: the
// cluster, the job's size in GPUs (dp = gpus / (tp · pp) when --dp is not given), what the engines
// overlap and the attention kernel.  Registered once for both commands; the spec itself comes from
// the one set of run flags (cli/spec_flags.hpp).
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "cli/spec_flags.hpp"
#include "cost/cluster.hpp"
#include "cost/step_config.hpp"

namespace mdtp::cli {

struct StepAssumptions {
  std::string cluster = "dgx-a100";
  int gpus = 0;  // 0: not given
  bool no_dp_overlap = false, p2p_overlap = false, streaming_attention = false;
  bool no_gradient_accumulation_fusion = false, cross_entropy_fusion = false, no_p2p_scatter_gather = false;
  bool no_grad_nan_check = false;
  bool tp_comm_overlap = false, overlap_param_gather = false, no_tp_backward_overlap = false;
  bool input_grad_first = false;
  bool own_collectives = false;  // mdtp's ring over MPI: ring only, one NIC per node and group
  bool engine_kernels = false;
  std::string nccl_algo = "auto";  // NCCL's all-reduce algorithms: "auto" or a list, "ring,tree" (cost::NcclAlgorithms)
  // The options add_step_assumptions registered that only a whole GPT step reads (all but
  // --cluster, --nccl-algo and --own-collectives, which `mdtp cost`'s layer form reads too): what
  // another form refuses by name.
  std::vector<std::string> step_only_options;

  cost::OverlapAssumptions overlap() const;
  // The step model's configuration: the spec and these assumptions.
  cost::StepConfig step(const RunSpec& spec) const;
  // A cluster file as these assumptions run it (`--nccl-algo`, `--own-collectives`).
  cost::Cluster cluster_at(const std::string& name_or_path) const;
};

void add_step_assumptions(CLI::App& app, StepAssumptions& assumptions);

// dp from --gpus when --dp is not given (an mdtp::Error naming the values when tp · pp does not
// divide it), then the micro-batches from --micro-batch-size when given.
void resolve_world(RunSpec& spec, const StepAssumptions& assumptions, const SpecFlags& flags);

}  // namespace mdtp::cli
