// The simulated cluster's pieces that run without SimGrid: the platform generated from a cluster
// preset (hosts, node property, one NVLink and one NIC link per GPU, rails, a route latency equal to
// the preset's alpha, bandwidth x efficiency), its host list read back, bad input refused in one
// line; the charging backend (the same values as the host backend, the per-kernel model's seconds
// charged; the model's own kernels, attention charged as the step model times it); the run context handed to the simulated ranks round-trips.
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <string>

#include "core/error.hpp"
#include "cost/cluster.hpp"
#include "cost/kernel_time.hpp"
#include "run/simulation_context.hpp"
#include "simulate/charging_backend.hpp"
#include "simulate/charging_gpt_kernels.hpp"
#include "simulate/platform.hpp"

using namespace mdtp;

namespace {

int count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The value of attribute `attr` of the element whose id is `id`.
std::string attribute(const std::string& xml, const std::string& id, const std::string& attr) {
  std::smatch m;
  const std::regex re("id=\"" + id + "\"[^>]*\\b" + attr + "=\"([^\"]*)\"");
  REQUIRE(std::regex_search(xml, m, re));
  return m[1];
}

}  // namespace

TEST_CASE("a DGX H100 platform: one host per GPU, its NVLink and NIC links, rails and a spine", "[simulate]") {
  const cost::Cluster h100 = cost::load_cluster(cost::find_cluster("dgx-h100"));
  for (int gpus : {1, 8, 12, 64}) {
    const simulate::Platform p = simulate::rail_optimised_platform(h100, gpus);
    const int nodes = (gpus + 7) / 8;
    CAPTURE(gpus);
    REQUIRE(static_cast<int>(p.hosts.size()) == gpus);
    CHECK(p.hosts.front() == "n0-gpu0");
    CHECK(p.hosts.back() == simulate::gpu_host_name((gpus - 1) / 8, (gpus - 1) % 8));
    CHECK(simulate::platform_hosts(p.xml) == p.hosts);
    CHECK(count(p.xml, "<host ") == gpus);
    CHECK(count(p.xml, "<prop id=\"node\"") == gpus);
    CHECK(count(p.xml, "-nvlink\" bandwidth") == gpus);
    // One NIC link per GPU (8 NICs per DGX H100 node): a rail each.
    CHECK(count(p.xml, "-nic[0-9]+\" bandwidth") == gpus);
    CHECK(count(p.xml, "<router id=\"n[0-9]+-nvswitch\"") == nodes);
    CHECK(count(p.xml, "<router id=\"rail") == 8);
    // Two directed routes per link: GPU-switch, GPU-rail, and each rail's uplink to the spine.
    CHECK(count(p.xml, "<route ") == 2 * (2 * gpus + 8));
    // Bandwidth x efficiency, and half the preset's alpha on each of a route's two links.
    CHECK(std::stod(attribute(p.xml, "n0-gpu0-nvlink", "bandwidth")) == Approx(450e9 * 0.8).epsilon(1e-15));
    CHECK(std::stod(attribute(p.xml, "n0-nic0", "bandwidth")) == Approx(50e9 * 0.9).epsilon(1e-15));
    CHECK(2 * std::stod(attribute(p.xml, "n0-gpu0-nvlink", "latency")) == Approx(h100.intra_node.alpha));
    CHECK(2 * std::stod(attribute(p.xml, "n0-nic0", "latency")) == Approx(h100.inter_node.alpha));
    CHECK(attribute(p.xml, "n0-gpu0-nvlink", "sharing_policy") == "SPLITDUPLEX");
    CHECK(simulate::host_file(p).substr(0, 10) == "n0-gpu0:1\n");
  }
}

TEST_CASE("fewer NICs than GPUs: GPUs share their rail's NIC link", "[simulate]") {
  cost::Cluster c = cost::load_cluster(cost::find_cluster("dgx-a100"));
  c.nics_per_node = 2;
  const simulate::Platform p = simulate::rail_optimised_platform(c, 16);
  CHECK(count(p.xml, "-nic[0-9]+\" bandwidth") == 2 * 2);
  CHECK(count(p.xml, "<router id=\"rail") == 2);
  // GPU 5 of node 1 reaches rail 1 over node 1's NIC 1.
  CHECK(count(p.xml, "src=\"n1-gpu5\" dst=\"rail1\" symmetrical=\"NO\"><link_ctn id=\"n1-nic1\"") == 1);
}

TEST_CASE("a platform is refused in one line for bad input", "[simulate][errors]") {
  cost::Cluster c = cost::load_cluster(cost::find_cluster("dgx-h100"));
  CHECK_THROWS_WITH(simulate::rail_optimised_platform(c, 0), "a simulated cluster needs --gpus >= 1; got 0");
  c.inter_node.bandwidth = 0;
  CHECK_THROWS_WITH(simulate::rail_optimised_platform(c, 16),
                    Catch::Contains("the inter-node link needs bandwidth > 0") && Catch::Contains("got bandwidth 0"));
}

TEST_CASE("the charging backend computes what the host backend does and charges the kernel model", "[simulate]") {
  const cost::Cluster h100 = cost::load_cluster(cost::find_cluster("dgx-h100"));
  double charged = 0;
  int kernels = 0;
  simulate::ChargingBackend be(make_host_backend(), h100, [&](double s) {
    charged += s;
    ++kernels;
  });
  const auto host = make_host_backend();
  const std::int64_t m = 7, k = 5, n = 3;  // awkward sizes
  std::vector<double> av(m * k), bv(k * n);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = 0.1 * static_cast<double>(i) - 1.3;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = 0.7 - 0.05 * static_cast<double>(i * i);
  const Tensor a = be.from_f64(av, {m, k}, DType::f64, MemCategory::activations);
  const Tensor b = be.from_f64(bv, {k, n}, DType::f64, MemCategory::activations);
  Tensor c = be.zeros({m, n}, DType::f64, MemCategory::activations);
  const double before_gemm = charged;
  be.gemm(false, false, 1.0, a, b, 0.0, c);
  // (The running sum less its value before: equal to rounding, each kernel now adding its overhead.)
  CHECK(charged - before_gemm == Approx(cost::gemm_kernel_seconds(m, n, k, DType::f64, h100)).epsilon(1e-12));
  const Tensor ha = host->from_f64(av, {m, k}, DType::f64, MemCategory::activations);
  const Tensor hb = host->from_f64(bv, {k, n}, DType::f64, MemCategory::activations);
  Tensor hc = host->zeros({m, n}, DType::f64, MemCategory::activations);
  host->gemm(false, false, 1.0, ha, hb, 0.0, hc);
  CHECK(be.to_f64(c) == host->to_f64(hc));
  // A streaming kernel: bytes read and written at the sustained HBM rate.
  Tensor y = be.zeros({m, n}, DType::f64, MemCategory::activations);
  const double before_gelu = charged;
  be.gelu_forward(c, y);
  CHECK(charged - before_gelu == Approx(cost::stream_seconds(2.0 * m * n * 8, h100)).epsilon(1e-12));
  CHECK(be.charged_seconds() == charged);
  CHECK(kernels >= 2);
  CHECK(std::string(be.name()).find("H100") != std::string::npos);
}

TEST_CASE("the charging model kernels compute what the host ones do and charge attention as the step model does",
          "[simulate]") {
  const cost::Cluster h100 = cost::load_cluster(cost::find_cluster("dgx-h100"));
  double charged = 0;
  const auto backend = make_host_backend();
  simulate::ChargingGptKernels kernels(make_host_gpt_kernels(*backend), h100, [&](double s) { charged += s; });
  const auto host = make_host_gpt_kernels(*backend);
  // Two sequences of 12 tokens, 3 query heads sharing 1 key/value head (grouped-query), head dim 4.
  const std::int64_t seq = 12, sequences = 2, heads = 3, kv = 1, d = 4, rows = seq * sequences;
  std::vector<double> qv(static_cast<std::size_t>(rows * (heads + 2 * kv) * d));
  for (std::size_t i = 0; i < qv.size(); ++i) qv[i] = std::sin(0.37 * static_cast<double>(i)) * 0.8;
  const Tensor qkv = backend->from_f64(qv, {rows, (heads + 2 * kv) * d}, DType::f32, MemCategory::activations);
  Tensor y = backend->zeros({rows, heads * d}, DType::f32, MemCategory::activations);
  Tensor probs = backend->zeros({sequences, heads, seq, seq}, DType::f32, MemCategory::activations);
  Tensor y_ref = backend->zeros({rows, heads * d}, DType::f32, MemCategory::activations);
  Tensor probs_ref = backend->zeros({sequences, heads, seq, seq}, DType::f32, MemCategory::activations);
  kernels.attention_forward(qkv, seq, heads, y, probs);
  host->attention_forward(qkv, seq, heads, y_ref, probs_ref);
  CHECK(backend->to_f64(y) == backend->to_f64(y_ref));
  // Materialised, as the engine runs it: Q·Kᵀ and P·V as batched products over 6 heads x sequences,
  // the 12x12 scores read and written once by the softmax (no dropout: the engine has none).
  const double scores = static_cast<double>(sequences * heads * seq * seq);
  const double forward = cost::gemm_kernel_seconds(seq, seq, d, DType::f32, h100, sequences * heads) +
                         cost::gemm_kernel_seconds(seq, d, seq, DType::f32, h100, sequences * heads) +
                         cost::stream_seconds(2 * scores * 4, h100);
  CHECK(charged == Approx(forward).epsilon(1e-12));
  const double before_backward = charged;
  Tensor dqkv = backend->zeros(qkv.shape(), DType::f32, MemCategory::activations);
  Tensor dqkv_ref = backend->zeros(qkv.shape(), DType::f32, MemCategory::activations);
  kernels.attention_backward(y, qkv, probs, seq, heads, dqkv);
  host->attention_backward(y_ref, qkv, probs_ref, seq, heads, dqkv_ref);
  CHECK(backend->to_f64(dqkv) == backend->to_f64(dqkv_ref));
  const double backward = cost::gemm_kernel_seconds(seq, seq, d, DType::f32, h100, sequences * heads) +
                          3 * cost::gemm_kernel_seconds(seq, d, seq, DType::f32, h100, sequences * heads) +
                          cost::stream_seconds(3 * scores * 4, h100);
  CHECK(charged - before_backward == Approx(backward).epsilon(1e-12));
  // A streaming kernel of the cross-entropy: the logits read, the row maxima written.
  const Tensor logits = backend->from_f64(std::vector<double>(rows * 10, 0.25), {rows, 10}, DType::f32,
                                          MemCategory::activations);
  Tensor row_max = backend->zeros({rows}, DType::f64, MemCategory::activations);
  const double before_xent = charged;
  kernels.xent_row_max(logits, 10, row_max);
  CHECK(charged - before_xent == Approx(cost::stream_seconds(rows * 10 * 4 + rows * 8, h100)).epsilon(1e-12));
  CHECK(backend->to_f64(row_max) == std::vector<double>(rows, 0.25));
  CHECK(kernels.charged_seconds() == charged);
}

TEST_CASE("outside the SMPI build nothing can be charged to a simulated clock", "[simulate][errors]") {
  CHECK_THROWS_WITH(simulate::charge_simulated_seconds(1e-3), Catch::Contains("not the SMPI build"));
}

TEST_CASE("the simulation context round-trips through its JSON", "[simulate]") {
  const run::SimulationContext c{"dgx-h100", "/x/dgx-h100.json", "/y/p.xml", 64, "SimGrid version 3.32",
                                 {"network/model:CM02", "smpi/simulate-computation:no"}};
  const run::SimulationContext back = run::parse_simulation_json(run::simulation_json(c));
  CHECK(back.cluster == c.cluster);
  CHECK(back.cluster_path == c.cluster_path);
  CHECK(back.platform_path == c.platform_path);
  CHECK(back.gpus == 64);
  CHECK(back.simgrid_version == c.simgrid_version);
  CHECK(back.settings == c.settings);
  CHECK_THROWS_WITH(run::parse_simulation_json("{}"), Catch::StartsWith("MDTP_SIMULATION is not what"));
}
