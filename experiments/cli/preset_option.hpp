#pragma once
// `--preset NAME` of `mdtp cost` and `mdtp plan`: a published model (cost/model_presets.hpp) as the
// base of the run spec, under the flags given beside it (each flag overrides its member).
#include <string>

#include "cli/options.hpp"
#include "cli/spec_flags.hpp"

namespace mdtp::cli {

struct PresetOption {
  std::string name;  // "" when not given

  void add(CLI::App& app);
  bool given() const { return !name.empty(); }
  // The spec the flags ask for, with the preset's members under them (refuses --preset with
  // --config: one base at a time).
  RunSpec resolve(const SpecFlags& flags) const;
  // The line the commands print: the preset's model and the global batch used ("" without one).
  std::string line(const RunSpec& spec) const;
};

}  // namespace mdtp::cli
