#pragma once
// What a simulated run was run on, handed from `mdtp simulate` to the SMPI build of mdtp that it
// launches under smpirun (docs/simulate.md): the environment variable MDTP_SIMULATION holds it as
// JSON.  The simulated ranks read it to charge kernel times on the preset's GPU and to write the
// provenance of a simulated run.
#include <optional>
#include <string>
#include <vector>

namespace mdtp::run {

inline constexpr const char* kSimulationEnvironment = "MDTP_SIMULATION";
// A file a simulated rank writes its exit status to before MPI_Abort: smpirun exits 0 after an
// abort, so `mdtp simulate` reads the status from here.
inline constexpr const char* kSimulationFailureEnvironment = "MDTP_SIMULATION_FAILURE";

struct SimulationContext {
  std::string cluster;        // the preset's name
  std::string cluster_path;   // the file it was read from
  std::string platform_path;  // the SimGrid platform the ranks run on
  int gpus = 0;
  std::string simgrid_version;
  std::vector<std::string> settings;  // every --cfg given to smpirun, as "key:value"
  // False under `mdtp simulate --values synthetic`: the model's tensors hold no values, its kernels
  // are charged but not run (simulate/synthetic_allocator.hpp, docs/simulate.md).
  bool real_values = true;
};

std::string simulation_json(const SimulationContext& context);
// mdtp::Error naming MDTP_SIMULATION when the text is not a context.
SimulationContext parse_simulation_json(const std::string& text);
// The context in this process's environment, if any.
std::optional<SimulationContext> simulation_from_environment();

}  // namespace mdtp::run
