#include "simulate/platform.hpp"

#include <fmt/format.h>

#include <regex>

#include "core/error.hpp"

namespace mdtp::simulate {
namespace {

// SimGrid reads "450000000000Bps" and "1.5e-06s" exactly as written; %.17g keeps every digit.
std::string bandwidth(double bytes_per_second) { return fmt::format("{:.17g}Bps", bytes_per_second); }
std::string latency(double seconds) { return fmt::format("{:.17g}s", seconds); }

void check_link(const cost::ClusterLink& link, const char* which, const std::string& cluster) {
  require(link.bandwidth > 0 && link.efficiency > 0 && link.alpha >= 0, "cluster '", cluster, "': the ", which,
          " link needs bandwidth > 0, efficiency > 0 and alpha >= 0 to be simulated; got bandwidth ", link.bandwidth,
          ", efficiency ", link.efficiency, ", alpha ", link.alpha);
}

// One direction-aware edge of the routing graph: `from` -> `to` over `link` (UP), and back (DOWN).
void add_edge(std::string& xml, const std::string& from, const std::string& to, const std::string& link) {
  xml += fmt::format("    <route src=\"{0}\" dst=\"{1}\" symmetrical=\"NO\"><link_ctn id=\"{2}\" direction=\"UP\"/></route>\n"
                     "    <route src=\"{1}\" dst=\"{0}\" symmetrical=\"NO\"><link_ctn id=\"{2}\" direction=\"DOWN\"/></route>\n",
                     from, to, link);
}

}  // namespace

std::string gpu_host_name(int node, int gpu) { return fmt::format("n{}-gpu{}", node, gpu); }

Platform rail_optimised_platform(const cost::Cluster& cluster, int gpus) {
  require(gpus >= 1, "a simulated cluster needs --gpus >= 1; got ", gpus);
  require(cluster.gpus_per_node >= 1, "cluster '", cluster.name, "': gpus_per_node must be >= 1; got ",
          cluster.gpus_per_node);
  check_link(cluster.intra_node, "intra-node", cluster.name);
  check_link(cluster.inter_node, "inter-node", cluster.name);
  const int per_node = cluster.gpus_per_node;
  const int nodes = (gpus + per_node - 1) / per_node;
  const int rails = std::max(1, std::min(cluster.nics_per_node, per_node));
  const double nvlink = cluster.intra_node.bandwidth * cluster.intra_node.efficiency;
  const double nic = cluster.inter_node.bandwidth * cluster.inter_node.efficiency;
  // GPUs sharing one NIC (rails < GPUs per node) share its link: one NIC link per (node, rail).
  Platform platform;
  std::string& xml = platform.xml;
  xml += "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n";
  xml += fmt::format("<!-- mdtp simulate: {} GPUs of cluster '{}' ({}), {} node(s) of {}, {} rail(s).\n"
                     "     NVLink {} and NIC {} per GPU each way (bandwidth x efficiency); route latency = the preset's alpha. -->\n",
                     gpus, cluster.name, cluster.gpu_name, nodes, per_node, rails, bandwidth(nvlink), bandwidth(nic));
  xml += "<platform version=\"4.1\">\n  <zone id=\"cluster\" routing=\"DijkstraCache\">\n";
  for (int n = 0; n < nodes; ++n) {
    const int here = std::min(per_node, gpus - n * per_node);
    for (int g = 0; g < here; ++g) {
      const std::string host = gpu_host_name(n, g);
      platform.hosts.push_back(host);
      xml += fmt::format("    <host id=\"{}\" speed=\"{:.17g}f\"><prop id=\"node\" value=\"n{}\"/></host>\n", host,
                         kHostSpeed, n);
    }
  }
  for (int n = 0; n < nodes; ++n) xml += fmt::format("    <router id=\"n{}-nvswitch\"/>\n", n);
  for (int r = 0; r < rails; ++r) xml += fmt::format("    <router id=\"rail{}\"/>\n", r);
  if (rails > 1 || nodes > 1) xml += "    <router id=\"spine\"/>\n";
  for (int n = 0; n < nodes; ++n) {
    const int here = std::min(per_node, gpus - n * per_node);
    for (int g = 0; g < here; ++g)
      xml += fmt::format("    <link id=\"{}-nvlink\" bandwidth=\"{}\" latency=\"{}\" sharing_policy=\"SPLITDUPLEX\"/>\n",
                         gpu_host_name(n, g), bandwidth(nvlink), latency(cluster.intra_node.alpha / 2));
    for (int r = 0; r < std::min(rails, here); ++r)
      xml += fmt::format("    <link id=\"n{}-nic{}\" bandwidth=\"{}\" latency=\"{}\" sharing_policy=\"SPLITDUPLEX\"/>\n", n,
                         r, bandwidth(nic), latency(cluster.inter_node.alpha / 2));
  }
  if (rails > 1 || nodes > 1)
    for (int r = 0; r < rails; ++r)
      xml += fmt::format("    <link id=\"rail{}-uplink\" bandwidth=\"{}\" latency=\"0s\" sharing_policy=\"SPLITDUPLEX\"/>\n", r,
                         bandwidth(nic * nodes));
  for (int n = 0; n < nodes; ++n) {
    const int here = std::min(per_node, gpus - n * per_node);
    for (int g = 0; g < here; ++g) {
      const std::string host = gpu_host_name(n, g);
      add_edge(xml, host, fmt::format("n{}-nvswitch", n), host + "-nvlink");
      add_edge(xml, host, fmt::format("rail{}", g % rails), fmt::format("n{}-nic{}", n, g % rails));
    }
  }
  if (rails > 1 || nodes > 1)
    for (int r = 0; r < rails; ++r) add_edge(xml, fmt::format("rail{}", r), "spine", fmt::format("rail{}-uplink", r));
  xml += "  </zone>\n</platform>\n";
  return platform;
}

std::string host_file(const Platform& platform) {
  std::string text;
  for (const auto& host : platform.hosts) text += host + ":1\n";
  return text;
}

std::vector<std::string> platform_hosts(const std::string& xml) {
  static const std::regex host(R"(<host\s+[^>]*\bid\s*=\s*["']([^"']+)["'])");
  std::vector<std::string> hosts;
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), host); it != std::sregex_iterator(); ++it)
    hosts.push_back((*it)[1]);
  return hosts;
}

}  // namespace mdtp::simulate
