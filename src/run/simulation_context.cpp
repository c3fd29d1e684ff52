#include "run/simulation_context.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>

#include "core/error.hpp"

namespace mdtp::run {

std::string simulation_json(const SimulationContext& c) {
  return nlohmann::json{{"cluster", c.cluster},         {"cluster_path", c.cluster_path},
                        {"platform_path", c.platform_path}, {"gpus", c.gpus},
                        {"simgrid_version", c.simgrid_version}, {"settings", c.settings},
                        {"values", c.real_values ? "real" : "synthetic"}}
      .dump();
}

SimulationContext parse_simulation_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    SimulationContext c;
    c.cluster = j.at("cluster").get<std::string>();
    c.cluster_path = j.at("cluster_path").get<std::string>();
    c.platform_path = j.at("platform_path").get<std::string>();
    c.gpus = j.at("gpus").get<int>();
    c.simgrid_version = j.at("simgrid_version").get<std::string>();
    c.settings = j.at("settings").get<std::vector<std::string>>();
    const auto values = j.at("values").get<std::string>();
    require(values == "real" || values == "synthetic", kSimulationEnvironment, ": values must be real or synthetic; got '",
            values, "'");
    c.real_values = values == "real";
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw_error(kSimulationEnvironment, " is not what `mdtp simulate` writes: ", e.what());
  }
}

std::optional<SimulationContext> simulation_from_environment() {
  const char* text = std::getenv(kSimulationEnvironment);
  if (text == nullptr || *text == '\0') return std::nullopt;
  return parse_simulation_json(text);
}

}  // namespace mdtp::run
