#include "cost/cluster.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/data_files.hpp"
#include "cost/json_fields.hpp"
#include "cost/kernel_time.hpp"
#include "cost/straggler_pace.hpp"

namespace mdtp::cost {

namespace {

using nlohmann::json;

ClusterLink read_link(const JsonFields& links, const std::string& key) {
  const JsonFields r = links.object(key);
  ClusterLink l;
  l.kind = r.text("kind");
  l.alpha = r.number("alpha", 0.0, 1.0);
  l.bandwidth = r.number("bandwidth", 0.0, 1e15);
  l.efficiency = r.number("efficiency", 0.0, 1.0);
  if (r.has("channel_bandwidth")) l.channel_bandwidth = r.number("channel_bandwidth", 0.0, 1e15);
  l.source = r.text("source");
  return l;
}

json link_json(const ClusterLink& l) {
  json j = {{"kind", l.kind}, {"alpha", l.alpha}, {"bandwidth", l.bandwidth}, {"efficiency", l.efficiency},
            {"source", l.source}};
  if (l.channel_bandwidth > 0) j["channel_bandwidth"] = l.channel_bandwidth;
  return j;
}

}  // namespace

double Cluster::peak(DType dtype) const {
  auto it = peak_flops.find(dtype);
  require(it != peak_flops.end(), "cluster '", name, "' declares no peak FLOP/s for dtype ", dtype_name(dtype),
          " (gpu.peak_flops)");
  return it->second;
}

Cluster parse_cluster(const std::string& json_text, const std::string& where) {
  const json doc = parse_json_object(json_text, "cluster file", where);
  const JsonFields top(doc, "cluster file", where);
  Cluster c;
  c.name = top.text("name");
  c.description = top.has("description") ? top.text("description") : "";
  c.source = top.text("source");
  c.gpus_per_node = static_cast<int>(top.integer("gpus_per_node", 1, 1024));
  c.nics_per_node = top.has("nics_per_node") ? static_cast<int>(top.integer("nics_per_node", 1, 1024)) : 1;
  c.library = parse_collective_library(top.text("library"));

  const JsonFields gpu = top.object("gpu");
  c.gpu_name = gpu.text("name");
  const JsonFields peaks = gpu.object("peak_flops");
  require(!peaks.node().empty(), "cluster file ", where, ": field 'gpu.peak_flops' must name at least one dtype");
  for (const auto& [dtype, value] : peaks.node().items()) {
    DType d;
    try {
      d = parse_dtype(dtype);
    } catch (const Error&) {
      throw_error("cluster file ", where, ": field 'gpu.peak_flops.", dtype, "' is not a dtype (f32, f64, bf16, f16)");
    }
    c.peak_flops[d] = peaks.number_of(value, "gpu.peak_flops." + dtype, 0.0, 1e18);
  }
  c.gemm_efficiency = gpu.number("gemm_efficiency", 0.0, 1.0);
  c.synchronous_pace = gpu.has("synchronous_pace") ? gpu.number("synchronous_pace", 0.0, 1.0) : 1.0;
  c.rate_sigma = gpu.has("rate_sigma") ? gpu.number("rate_sigma", 0.0, 0.1) : 0.0;
  c.sm_count = gpu.has("sm_count") ? static_cast<int>(gpu.integer("sm_count", 1, 100000)) : 0;
  if (gpu.has("gemm_reference_shape")) {
    const auto& shape = gpu.field("gemm_reference_shape");
    require(shape.is_array() && shape.size() == 3, "cluster file ", where,
            ": field 'gpu.gemm_reference_shape' must be [m, n, k], three positive integers; got ", shape.dump());
    const std::string name = gpu.name("gemm_reference_shape");
    c.gemm_reference_shape = GemmShape{gpu.integer_of(shape[0], name + "[0]", 1, 1LL << 40),
                                       gpu.integer_of(shape[1], name + "[1]", 1, 1LL << 40),
                                       gpu.integer_of(shape[2], name + "[2]", 1, 1LL << 40)};
  }
  c.kernel_overhead = gpu.has("kernel_overhead") ? gpu.non_negative("kernel_overhead", 1e-3, "[0, 1e-3] s") : 0.0;
  c.attention_efficiency = gpu.has("attention_efficiency") ? gpu.number("attention_efficiency", 0.0, 1.0) : 0.0;
  c.attention_backward_efficiency =
      gpu.has("attention_backward_efficiency") ? gpu.number("attention_backward_efficiency", 0.0, 1.0) : 0.0;
  c.attention_reference_seq =
      gpu.has("attention_reference_seq") ? gpu.integer("attention_reference_seq", 1, 1LL << 24) : 0;
  c.attention_tile_overhead = gpu.has("attention_tile_overhead")
                                  ? gpu.non_negative("attention_tile_overhead", 1000.0, "[0, 1000] tiles")
                                  : 0.0;
  require(c.attention_reference_seq == 0 || c.attention_efficiency > 0, "cluster file ", where,
          ": field 'gpu.attention_reference_seq' needs 'gpu.attention_efficiency', the rate measured at that length");
  c.hbm_bytes = gpu.number("hbm_bytes", 0.0, 1e15);
  c.hbm_bandwidth = gpu.number("hbm_bandwidth", 0.0, 1e15);
  c.memory_efficiency = gpu.number("memory_efficiency", 0.0, 1.0);
  c.reserved_bytes = gpu.has("reserved_bytes") ? gpu.number_of(gpu.field("reserved_bytes"), "gpu.reserved_bytes", -1.0,
                                                                c.hbm_bytes)
                                               : 0.0;
  require(c.reserved_bytes >= 0 && c.reserved_bytes < c.hbm_bytes, "cluster file ", where,
          ": field 'gpu.reserved_bytes' must be in [0, hbm_bytes); got ", c.reserved_bytes);

  const JsonFields links = top.object("links");
  c.intra_node = read_link(links, "intra_node");
  c.inter_node = read_link(links, "inter_node");
  if (links.has("pcie")) c.pcie = read_link(links, "pcie");
  if (top.has("host")) {
    const JsonFields host = top.object("host");
    c.host = ClusterHost{host.number("memory_bandwidth", 0.0, 1e15), host.number("memory_efficiency", 0.0, 1.0),
                         host.number("memory_bytes", 0.0, 1e18),
                         host.has("gpus_per_pcie_uplink")
                             ? static_cast<int>(host.integer("gpus_per_pcie_uplink", 1, c.gpus_per_node))
                             : 1,
                         host.text("source")};
  }
  if (const JsonFields intra = links.object("intra_node"); intra.has("nvls")) {
    const JsonFields nvls = intra.object("nvls");
    c.nvls = ClusterNvls{{nvls.number("alpha", 0.0, 1.0), nvls.number("bandwidth", 0.0, 1e15)}, nvls.text("source")};
  }
  // The reference shape must leave its main loops time to run: checked here, once, where the file
  // can be named, rather than at the first GEMM priced on it.
  if (c.gemm_reference_shape && c.sm_count > 0) {
    try {
      (void)gemm_mainloop_rate(c.peak_flops.begin()->first, c);
    } catch (const Error& e) {
      throw_error("cluster file ", where, ": field 'gpu.gemm_reference_shape' does not fit gemm_efficiency: ", e.what());
    }
  }
  return c;
}

Cluster load_cluster(const std::string& path) {
  Cluster c = parse_cluster(read_document(path, "cluster file"), path);
  c.path = path;
  return c;
}

std::string find_cluster(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  require(!name_or_path.empty(), "no cluster given: name one in data/clusters/ (dgx-a100, dgx-h100, dgx-h200, pcie-a100) or give a path");
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (is_path) {
    require(fs::exists(name_or_path), "cluster file ", name_or_path, " does not exist");
    return name_or_path;
  }
  const std::string file = name_or_path + ".json";
  if (const auto found = find_data_file("clusters/" + file)) return found->string();
  throw_error("no cluster named '", name_or_path, "' (", file, "); looked in:", data_file_places("clusters/" + file));
}

Cluster for_job(Cluster cluster, int gpus) {
  if (gpus <= 1)
    cluster.synchronous_pace = 1.0;
  else if (cluster.rate_sigma > 0)
    cluster.synchronous_pace =
        slowest_gpu_pace(cluster.synchronous_pace, cluster.rate_sigma, cluster.gpus_per_node, gpus);
  return cluster;
}

Cluster at_data_sheet(Cluster cluster) {
  cluster.gemm_efficiency = 1.0;
  cluster.gemm_reference_shape.reset();
  cluster.synchronous_pace = 1.0;
  cluster.rate_sigma = 0.0;
  cluster.sm_count = 0;
  cluster.kernel_overhead = 0.0;
  cluster.attention_efficiency = 1.0;
  cluster.attention_backward_efficiency = 1.0;
  cluster.attention_reference_seq = 0;  // the peak on the work the kernel does
  cluster.attention_tile_overhead = 0.0;
  cluster.memory_efficiency = 1.0;
  for (ClusterLink* link : {&cluster.intra_node, &cluster.inter_node, cluster.pcie ? &*cluster.pcie : nullptr}) {
    if (!link) continue;
    link->alpha = 0.0;
    link->efficiency = 1.0;
    link->channel_bandwidth = 0.0;  // collectives beside compute take none of its SMs
  }
  // In-switch reduction: each GPU sends its S to the switch and receives the sum over its own NVLink.
  if (cluster.nvls) cluster.nvls->params = {0.0, cluster.intra_node.bandwidth};
  if (cluster.host) cluster.host->memory_efficiency = 1.0;
  return cluster;
}

TimeModel cluster_time_model(const Cluster& c) {
  TimeModel m;
  m.links = {{LinkClass::intra_node, c.intra_node.params()}, {LinkClass::inter_node, c.inter_node.params()}};
  m.gemm_flops.clear();
  for (const auto& [dtype, peak] : c.peak_flops) m.gemm_flops[dtype] = peak * c.gemm_efficiency * c.synchronous_pace;
  m.algorithms.library = c.library;
  m.algorithms.nccl = c.nccl_algorithms;
  if (c.nvls) m.nvls = c.nvls->params;
  m.nics_per_node = c.nics_per_node;
  for (const auto& [link_class, link] : {std::pair{LinkClass::intra_node, &c.intra_node}, std::pair{LinkClass::inter_node, &c.inter_node}})
    if (link->channel_bandwidth > 0) m.channel_bandwidth[link_class] = link->channel_bandwidth;
  return m;
}

Cluster cluster_from_calibration(const Calibration& calibration, const DeclaredDevice& d, DType gemm_dtype) {
  Cluster c;
  c.name = d.name;
  c.source = "mdtp calibrate (links, GEMM rate) and declared figures (peaks, memory)";
  c.gpus_per_node = d.gpus_per_node;
  c.gpu_name = d.name;
  c.peak_flops = d.peak_flops;
  c.hbm_bytes = d.hbm_bytes;
  c.hbm_bandwidth = d.hbm_bandwidth;
  c.memory_efficiency = d.memory_efficiency;
  c.reserved_bytes = d.reserved_bytes;
  c.library = d.library;
  const auto measured = calibration.gemm_flops.find(gemm_dtype);
  require(measured != calibration.gemm_flops.end(), "the calibration has no GEMM rate for dtype ",
          dtype_name(gemm_dtype));
  c.gemm_efficiency = measured->second / c.peak(gemm_dtype);
  require(c.gemm_efficiency > 0 && c.gemm_efficiency <= 1.0, "the measured GEMM rate ", measured->second,
          " flop/s is not within the declared peak ", c.peak(gemm_dtype), " for ", dtype_name(gemm_dtype));
  // Calibrated α-β are effective already: the link's efficiency is 1 and its bandwidth 1/β.
  auto link_of = [&](LinkClass lc, const char* kind) {
    auto it = calibration.links.find(lc);
    require(it != calibration.links.end() && it->second.beta > 0, "the calibration has no α-β for ",
            link_class_name(lc), " links");
    return ClusterLink{kind, it->second.alpha, 1.0 / it->second.beta, 1.0, 0.0, "mdtp calibrate"};
  };
  c.intra_node = link_of(LinkClass::intra_node, "calibrated");
  c.inter_node = calibration.links.count(LinkClass::inter_node) ? link_of(LinkClass::inter_node, "calibrated")
                                                                 : c.intra_node;
  return c;
}

std::string cluster_json(const Cluster& c) {
  json peaks = json::object();
  for (const auto& [dtype, peak] : c.peak_flops) peaks[dtype_name(dtype)] = peak;
  json links = {{"intra_node", link_json(c.intra_node)}, {"inter_node", link_json(c.inter_node)}};
  if (c.nvls)
    links["intra_node"]["nvls"] = {
        {"alpha", c.nvls->params.alpha}, {"bandwidth", c.nvls->params.bandwidth}, {"source", c.nvls->source}};
  if (c.pcie) links["pcie"] = link_json(*c.pcie);
  json doc = {{"name", c.name},
                    {"description", c.description},
                    {"source", c.source},
                    {"gpus_per_node", c.gpus_per_node},
                    {"nics_per_node", c.nics_per_node},
                    {"library", collective_library_name(c.library)},
                    {"gpu",
                     {{"name", c.gpu_name},
                      {"peak_flops", peaks},
                      {"gemm_efficiency", c.gemm_efficiency},
                      {"hbm_bytes", c.hbm_bytes},
                      {"hbm_bandwidth", c.hbm_bandwidth},
                      {"memory_efficiency", c.memory_efficiency},
                      {"reserved_bytes", c.reserved_bytes}}},
                    {"links", links}};
  // The tile model and the overhead only where known (a calibrated cluster has neither).
  if (c.host)
    doc["host"] = {{"memory_bandwidth", c.host->memory_bandwidth}, {"memory_efficiency", c.host->memory_efficiency},
                   {"memory_bytes", c.host->memory_bytes}, {"gpus_per_pcie_uplink", c.host->gpus_per_pcie_uplink},
                   {"source", c.host->source}};
  if (c.sm_count > 0) doc["gpu"]["sm_count"] = c.sm_count;
  if (c.gemm_reference_shape)
    doc["gpu"]["gemm_reference_shape"] = {c.gemm_reference_shape->m, c.gemm_reference_shape->n,
                                          c.gemm_reference_shape->k};
  if (c.synchronous_pace < 1) doc["gpu"]["synchronous_pace"] = c.synchronous_pace;
  if (c.rate_sigma > 0) doc["gpu"]["rate_sigma"] = c.rate_sigma;
  if (c.kernel_overhead > 0) doc["gpu"]["kernel_overhead"] = c.kernel_overhead;
  if (c.attention_efficiency > 0) doc["gpu"]["attention_efficiency"] = c.attention_efficiency;
  if (c.attention_backward_efficiency > 0)
    doc["gpu"]["attention_backward_efficiency"] = c.attention_backward_efficiency;
  if (c.attention_reference_seq > 0) doc["gpu"]["attention_reference_seq"] = c.attention_reference_seq;
  if (c.attention_tile_overhead > 0) doc["gpu"]["attention_tile_overhead"] = c.attention_tile_overhead;
  return doc.dump(2) + "\n";
}

}  // namespace mdtp::cost
