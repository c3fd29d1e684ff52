#include "cli/step_options.hpp"

#include <set>

#include "core/error.hpp"

namespace mdtp::cli {

cost::OverlapAssumptions StepAssumptions::overlap() const {
  cost::OverlapAssumptions o;
  o.dp_gradients = !no_dp_overlap;
  o.pp_p2p = p2p_overlap;
  o.tp_comm = tp_comm_overlap;
  o.param_gather = overlap_param_gather;
  o.tp_backward = !no_tp_backward_overlap;
  o.input_gradient_first = input_grad_first;
  return o;
}

cost::StepConfig StepAssumptions::step(const RunSpec& spec) const {
  return cost::StepConfig{.spec = spec,
                          .overlap = overlap(),
                          .attention_keeps_probabilities = !streaming_attention,
                          .gradient_accumulation_fusion = !no_gradient_accumulation_fusion,
                          .cross_entropy_fusion = cross_entropy_fusion,
                          .p2p_scatter_gather = !no_p2p_scatter_gather,
                          .grad_nan_check = !no_grad_nan_check,
                          .engine_kernels = engine_kernels};
}

cost::Cluster StepAssumptions::cluster_at(const std::string& name_or_path) const {
  cost::Cluster c = cost::load_cluster(cost::find_cluster(name_or_path));
  c.nccl_algorithms = cost::parse_nccl_algorithms(nccl_algo);
  if (own_collectives) {
    // One ring per group: where it crosses nodes, each node boundary is one GPU's NIC, not the k
    // NICs NCCL's channels spread over.
    require(nccl_algo == "auto" || nccl_algo == "ring", "--own-collectives runs every all-reduce as a ring; got --nccl-algo ",
            nccl_algo);
    c.nccl_algorithms = cost::parse_nccl_algorithms("ring");
    c.nics_per_node = 1;
    // Over MPI, no NCCL channels hold SMs beside the compute (collective_sms.hpp).
    c.intra_node.channel_bandwidth = c.inter_node.channel_bandwidth = 0.0;
  }
  return c;
}

void add_step_assumptions(CLI::App& app, StepAssumptions& a) {
  const std::size_t before = app.get_options().size();
  add(app, "--cluster", a.cluster, "a name in data/clusters/ (dgx-a100, dgx-h100, dgx-h200, pcie-a100) or a path to a cluster JSON");
  add(app, "--gpus", a.gpus, "GPUs in the job (dp = gpus / (tp x pp) unless --dp is given)")
      ->check(at_least(1))
      ->default_str("");
  app.add_flag("--no-dp-overlap", a.no_dp_overlap, "gradients reduced after backward, not under it");
  app.add_flag("--p2p-overlap", a.p2p_overlap, "pipeline sends hidden under compute");
  app.add_flag("--tp-comm-overlap", a.tp_comm_overlap,
               "Megatron's --tp-comm-overlap: 1D-SP's all-gathers and reduce-scatters hidden under the GEMMs of "
               "their pass (other modes are priced without it)");
  app.add_flag("--no-tp-backward-overlap", a.no_tp_backward_overlap,
               "1D: each backward TP all-reduce (reduce-scatter under SP) waits before the weight gradient, as mdtp's "
               "engine runs it, instead of Megatron's always-on overlap with the weight-gradient GEMM");
  app.add_flag("--input-grad-first", a.input_grad_first,
               "pipelines: each backward sends its input gradient upstream before computing the weight gradients, "
               "as mdtp's engine runs it (GPipe, 1F1B and interleaved then drain in (p-1)(T_F + T_B)), instead of "
               "after them as Megatron's one autograd backward per stage does");
  app.add_flag("--overlap-param-gather", a.overlap_param_gather,
               "Megatron's --overlap-param-gather: ZeRO-1/2's parameter all-gather under the next step's first "
               "forward (needs the gradient overlap; other stages are priced without it)");
  app.add_flag("--no-gradient-accumulation-fusion", a.no_gradient_accumulation_fusion,
               "Megatron's switch: each micro-batch's weight gradient added into the gradient buffer by its own "
               "kernel (dW read, the buffer read and written), not in the GEMM's epilogue");
  app.add_flag("--cross-entropy-fusion", a.cross_entropy_fusion,
               "Megatron's --cross-entropy-loss-fusion: the cross-entropy as one kernel each way, not as its fp32 "
               "PyTorch operations (six kernels forward, two backward)");
  app.add_flag("--no-p2p-scatter-gather", a.no_p2p_scatter_gather,
               "1D without sequence parallelism: every TP rank sends the whole activation to the next pipeline "
               "stage (Megatron-core since 2023, and --no-scatter-gather-tensors-in-pipeline before), not 1/tp of it "
               "all-gathered there (Megatron-LM's scatter/gather until 2023, mdtp's engine)");
  app.add_flag("--no-check-for-nan-in-grad", a.no_grad_nan_check,
               "Megatron's --no-check-for-nan-in-loss-and-grad: no norm of each gradient bucket taken before its "
               "reduction (Megatron-core's default takes it: one more read of the gradient buffer per step)");
  add(app, "--nccl-algo", a.nccl_algo,
      "NCCL's all-reduce algorithms, as NCCL_ALGO lists them: auto (whichever of ring, tree, nvls and nvlstree the "
      "model times quickest and the cluster can run, as NCCL's tuner picks) or a comma list of them: ring,tree for "
      "NCCL before 2.17 (no NVLink SHARP), ring for what mdtp's own collectives and a simulated cluster run")
      ->check([](const std::string& value) {
        try {
          cost::parse_nccl_algorithms(value);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  app.add_flag("--own-collectives", a.own_collectives,
               "the collectives as mdtp's engine runs them over MPI (a simulated cluster): every all-reduce a ring "
               "(--nccl-algo ring) and one ring per group, so a group crossing nodes leaves each node through one "
               "NIC, not the k NICs NCCL's channels spread over, and none holding SMs beside the compute as NCCL's "
               "channels do");
  app.add_flag("--engine-kernels", a.engine_kernels,
               "the streaming kernels as mdtp's own engine launches them (each LayerNorm as five kernels, bias adds, "
               "bias-gradient sums and residual adds apart, its cross-entropy and optimizer kernels), what a "
               "simulated cluster charges it, instead of Megatron-LM's fused ones");
  app.add_flag("--streaming-attention", a.streaming_attention,
               "the attention kernel keeps no T x T probabilities (FlashAttention-style): selective = none");
  // Listed from what was registered, so a switch added above is refused by the other forms without
  // a second list to keep.
  static const std::set<std::string> read_by_every_form = {"--cluster", "--nccl-algo", "--own-collectives"};
  const std::vector<CLI::Option*> options = app.get_options();
  a.step_only_options.clear();
  for (std::size_t i = before; i < options.size(); ++i) {
    const std::string name = "--" + options[i]->get_lnames().front();
    if (!read_by_every_form.count(name)) a.step_only_options.push_back(name);
  }
}

void resolve_world(RunSpec& spec, const StepAssumptions& a, const SpecFlags& flags) {
  ParallelLayout& l = spec.layout;
  if (a.gpus > 0) {
    const int tp_pp = l.tp * l.pp;
    require(tp_pp > 0 && a.gpus % tp_pp == 0, "--gpus ", a.gpus, " must be divisible by tp x pp = ", l.tp, " x ",
            l.pp);
    require(!flags.given("--dp") || l.dp * tp_pp == a.gpus, "--dp ", l.dp, " x tp ", l.tp, " x pp ", l.pp,
            " must equal --gpus ", a.gpus);
    l.dp = a.gpus / tp_pp;
  }
  if (const auto b = flags.micro_batch_size()) l.micro_batches = micro_batches_for(spec.global_batch, l.dp, *b);
}

}  // namespace mdtp::cli
