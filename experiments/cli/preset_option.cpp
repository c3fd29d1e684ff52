#include "cli/preset_option.hpp"

#include "cost/model_presets.hpp"

namespace mdtp::cli {

void PresetOption::add(CLI::App& app) {
  std::vector<std::string> names;
  for (const cost::ModelPreset& p : cost::model_presets()) names.push_back(p.name);
  std::string aliases;
  for (const auto& [alias, preset] : cost::model_preset_aliases()) {
    names.push_back(alias);
    aliases += (aliases.empty() ? "" : ", ") + alias + " = " + preset;
  }
  mdtp::cli::add(app, "--preset", name,
                 "a published model as the base of the spec (flags given beside it override): " +
                     cost::model_preset_names() + " (" + aliases + ")")
      ->check(one_of(names))
      ->type_name("NAME");
}

RunSpec PresetOption::resolve(const SpecFlags& flags) const {
  RunSpec spec = flags.resolve();
  if (!given()) return spec;
  require(!flags.config_given(), "give --preset or --config, not both");
  cost::apply_model_preset(spec, cost::find_model_preset(name), [&](const std::string& f) { return flags.given(f); });
  return spec;
}

std::string PresetOption::line(const RunSpec& spec) const {
  return given() ? cost::describe_preset(cost::find_model_preset(name), spec) + "\n" : "";
}

}  // namespace mdtp::cli
