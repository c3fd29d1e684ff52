#include "train/checkpoint_provenance.hpp"

#include <fmt/format.h>

#include "mdtp/build_info.hpp"

namespace mdtp {

void write_checkpoint_provenance(H5File& file, const Topology& topology) {
  file.set_attribute("/", "mdtp_version", std::string(build_info::version));
  file.set_attribute("/", "git_commit", std::string(build_info::git_commit));
  file.set_attribute("/", "mesh_world", static_cast<std::int64_t>(topology.world()));
  file.set_attribute("/", "mesh_tp", static_cast<std::int64_t>(topology.tp()));
  file.set_attribute("/", "mesh_pp", static_cast<std::int64_t>(topology.pp()));
  file.set_attribute("/", "mesh_dp", static_cast<std::int64_t>(topology.dp()));
  file.set_attribute("/", "mesh_cp", static_cast<std::int64_t>(topology.cp()));
  file.set_attribute("/", "mesh_tp_mode", std::string(tp_mode_name(topology.tp_mode())));
  file.set_attribute("/", "mesh_tp_depth", static_cast<std::int64_t>(topology.config().tp_depth));
  file.set_attribute("/", "mesh_order", topology.order());
}

std::string describe_checkpoint_provenance(const H5File& file) {
  const auto version = file.string_attribute("/", "mdtp_version");
  if (!version) return "";
  auto number = [&](const char* name) { return file.int_attribute("/", name).value_or(-1); };
  return fmt::format("mdtp {} (git {}), mesh world={} tp={} pp={} dp={} cp={} mode={} depth={} order={}", *version,
                     file.string_attribute("/", "git_commit").value_or("?"), number("mesh_world"), number("mesh_tp"),
                     number("mesh_pp"), number("mesh_dp"), number("mesh_cp"),
                     file.string_attribute("/", "mesh_tp_mode").value_or("?"), number("mesh_tp_depth"),
                     file.string_attribute("/", "mesh_order").value_or("?"));
}

}  // namespace mdtp
