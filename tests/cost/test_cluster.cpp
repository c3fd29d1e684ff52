// Cluster files: the shipped presets load with their published figures; a missing field, a wrong
// type, a value out of range or a broken file is refused in one line naming the file and the field;
// names are found in data/clusters/; a cluster built from a calibration keeps the measured rates.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "cost/cluster.hpp"
#include "cost/time_model.hpp"
#include "mesh/topology.hpp"

using namespace mdtp;
using namespace mdtp::cost;

namespace {

std::string preset_text(const std::string& name) {
  std::ifstream in(find_cluster(name));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The preset with one substring replaced, parsed as if read from "edited.json".
Cluster parse_edited(const std::string& from, const std::string& to) {
  std::string text = preset_text("dgx-a100");
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  return parse_cluster(text, "edited.json");
}

}  // namespace

TEST_CASE("the DGX presets load with their published figures", "[cost][cluster]") {
  const Cluster a100 = load_cluster(find_cluster("dgx-a100"));
  CHECK(a100.name == "dgx-a100");
  CHECK(a100.gpus_per_node == 8);
  CHECK(a100.peak(DType::bf16) == 312e12);
  CHECK(a100.intra_node.bandwidth == 300e9);  // 600 GB/s bidirectional NVSwitch, one way
  CHECK(a100.inter_node.bandwidth == 25e9);   // HDR 200 Gb/s per GPU
  CHECK(a100.library == CollectiveLibrary::nccl);
  CHECK_FALSE(a100.source.empty());
  const Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  CHECK(h100.peak(DType::bf16) == 989e12);
  CHECK(h100.intra_node.bandwidth == 450e9);
  CHECK(h100.inter_node.bandwidth == 50e9);  // NDR 400 Gb/s per GPU
  // The PCIe preset: the same A100 peak, PCIe Gen4 between GPUs, four NICs for eight GPUs.
  const Cluster pcie = load_cluster(find_cluster("pcie-a100"));
  CHECK(pcie.peak(DType::bf16) == 312e12);
  CHECK(pcie.intra_node.bandwidth == 32e9);
  CHECK(pcie.gpus_per_node == 8);
  CHECK(pcie.nics_per_node == 4);

  const TimeModel model = cluster_time_model(a100);
  CHECK(model.link(LinkClass::intra_node).beta == Approx(1.0 / (300e9 * 0.8)));
  CHECK(model.gemm_rate(DType::bf16) == Approx(312e12 * a100.gemm_efficiency * a100.synchronous_pace));
  // A step waits for the slowest GPU of a loaded node: 0.9715 of the alone rate (the scan's
  // all-8-concurrent H200 run: 698.6 on average, 4.5 % spread, against 702.9 alone).
  CHECK(a100.synchronous_pace == 0.9715);
  CHECK(h100.synchronous_pace == 0.9715);
  // The GEMM model's figures: the SM count, the per-kernel overhead, the attention kernel's rate.
  CHECK(a100.sm_count == 108);
  CHECK(h100.sm_count == 132);
  CHECK(a100.kernel_overhead == 2e-6);
  CHECK(a100.attention_efficiency == 0.421);  // FlashAttention-2's 0.50 at the settled clock
  // The matmul microbenchmarks' rates and the shapes they were measured at, both at the clock a
  // power-saturated GPU settles at: H100's the sustained figure measured on its sibling H200, A100's
  // its burst figure scaled by the sustained-to-burst ratio measured on H200 (none is published for A100).
  CHECK(a100.gemm_efficiency == 0.7315);  // 271.2 of 312 TFLOP/s (MAMF) x 708.5 / 841.9
  REQUIRE(a100.gemm_reference_shape);
  CHECK(a100.gemm_reference_shape->k == 5120);
  CHECK(h100.gemm_efficiency == 0.716);  // 708.5 of 989 TFLOP/s once the clock has settled (MSMF)
  REQUIRE(h100.gemm_reference_shape);
  CHECK(h100.gemm_reference_shape->m == 8192);
  CHECK(h100.gemm_reference_shape->n == 8448);
  CHECK(h100.gemm_reference_shape->k == 20480);
  const Cluster round_trip = parse_cluster(cluster_json(a100), "round trip");
  CHECK(round_trip.hbm_bytes == a100.hbm_bytes);
  CHECK(round_trip.sm_count == 108);
  CHECK(round_trip.kernel_overhead == a100.kernel_overhead);
  CHECK(round_trip.attention_efficiency == a100.attention_efficiency);
  CHECK(round_trip.synchronous_pace == 0.9715);
  REQUIRE(round_trip.gemm_reference_shape);
  CHECK(round_trip.gemm_reference_shape->n == 10240);
  CHECK(a100.attention_backward_efficiency == 0.0);  // not given: the forward's rate
  // cuDNN's fused attention (Transformer Engine's choice on Hopper), 518 and 499 of 989 TFLOP/s
  // forward and backward in a burst, at the matmul's settled clock
  CHECK(h100.attention_efficiency == 0.441);
  CHECK(h100.attention_backward_efficiency == 0.425);
  CHECK(parse_cluster(cluster_json(h100), "round trip").attention_backward_efficiency == 0.425);
  // Both rates measured at sequence 4k; each kernel's fixed cost per row of queries from its published
  // rate-against-length curve (FlashAttention-2 on A100, cuDNN in FlashAttention-3's paper on H100).
  CHECK(a100.attention_reference_seq == 4096);
  CHECK(h100.attention_reference_seq == 4096);
  CHECK(a100.attention_tile_overhead == 1.39);
  CHECK(h100.attention_tile_overhead == 1.06);
  CHECK(round_trip.attention_reference_seq == 4096);
  CHECK(round_trip.attention_tile_overhead == 1.39);
  const Cluster ideal = at_data_sheet(h100);  // the kernel at peak on the work it does
  CHECK(ideal.attention_reference_seq == 0);
  CHECK(ideal.attention_tile_overhead == 0.0);
}

TEST_CASE("a broken cluster file is refused in one line naming the file and the field", "[cost][cluster]") {
  CHECK_THROWS_WITH(parse_edited("\"gpus_per_node\": 8", "\"gpus_per_nodes\": 8"),
                    Catch::Contains("edited.json") && Catch::Contains("'gpus_per_node' is missing"));
  CHECK_THROWS_WITH(parse_edited("\"gpus_per_node\": 8", "\"gpus_per_node\": \"eight\""),
                    Catch::Contains("'gpus_per_node' must be a whole number"));
  CHECK_THROWS_WITH(parse_edited("\"bandwidth\": 25e9", "\"bandwidth\": \"fast\""),
                    Catch::Contains("'links.inter_node.bandwidth' must be a number"));
  CHECK_THROWS_WITH(parse_edited("\"gemm_efficiency\": 0.7315", "\"gemm_efficiency\": 1.5"),
                    Catch::Contains("'gpu.gemm_efficiency' must be in (0, 1]"));
  CHECK_THROWS_WITH(parse_edited("\"synchronous_pace\": 0.9715", "\"synchronous_pace\": 0"),
                    Catch::Contains("'gpu.synchronous_pace' must be in (0, 1]"));
  CHECK(parse_edited("\"synchronous_pace\": 0.9715,", "").synchronous_pace == 1.0);  // absent: the alone rate
  CHECK_THROWS_WITH(parse_edited("[1024, 10240, 5120]", "[1024, 10240]"),
                    Catch::Contains("'gpu.gemm_reference_shape' must be [m, n, k]"));
  CHECK_THROWS_WITH(parse_edited("[1024, 10240, 5120]", "[1024, 10240, 0]"),
                    Catch::Contains("'gpu.gemm_reference_shape[2]' must be a whole number"));
  // A shape whose one tile's output alone takes longer to write than the whole GEMM's measured time.
  CHECK_THROWS_WITH(parse_edited("[1024, 10240, 5120]", "[1, 1, 1]"),
                    Catch::Contains("edited.json") && Catch::Contains("'gpu.gemm_reference_shape' does not fit"));
  CHECK_THROWS_WITH(parse_edited("\"sm_count\": 108", "\"sm_count\": 0"),
                    Catch::Contains("'gpu.sm_count' must be a whole number in [1, 100000]"));
  CHECK_THROWS_WITH(parse_edited("\"kernel_overhead\": 2e-6", "\"kernel_overhead\": -2e-6"),
                    Catch::Contains("'gpu.kernel_overhead' must be in [0, 1e-3] s"));
  CHECK_THROWS_WITH(parse_edited("\"attention_efficiency\": 0.421", "\"attention_efficiency\": 2"),
                    Catch::Contains("'gpu.attention_efficiency' must be in (0, 1]"));
  CHECK_THROWS_WITH(parse_edited("\"attention_reference_seq\": 4096", "\"attention_reference_seq\": 0"),
                    Catch::Contains("'gpu.attention_reference_seq' must be a whole number in [1, "));
  CHECK_THROWS_WITH(parse_edited("\"attention_tile_overhead\": 1.39", "\"attention_tile_overhead\": -0.5"),
                    Catch::Contains("'gpu.attention_tile_overhead' must be in [0, 1000] tiles; got -0.5"));
  CHECK_THROWS_WITH(parse_edited("\"attention_efficiency\": 0.421,", ""),
                    Catch::Contains("'gpu.attention_reference_seq' needs 'gpu.attention_efficiency'"));
  CHECK_THROWS_WITH(parse_edited("\"bf16\": 312e12", "\"bf17\": 312e12"),
                    Catch::Contains("'gpu.peak_flops.bf17' is not a dtype"));
  CHECK_THROWS_WITH(parse_edited("\"library\": \"nccl\"", "\"library\": \"gloo\""), Catch::Contains("gloo"));
  CHECK_THROWS_WITH(parse_cluster("{\"name\": ", "cut.json"), Catch::Contains("cut.json") && Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(load_cluster("/nonexistent/cluster.json"), Catch::Contains("cannot be opened"));
  CHECK_THROWS_WITH(find_cluster("no-such-cluster"), Catch::Contains("no cluster named 'no-such-cluster'"));
  CHECK_THROWS_WITH(Cluster{}.peak(DType::bf16), Catch::Contains("no peak FLOP/s for dtype bf16"));
  // Every message is one line.
  try {
    parse_edited("\"hbm_bandwidth\": 2.039e12", "\"hbm_bandwidth\": -1");
    FAIL("accepted a negative bandwidth");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

TEST_CASE("a cluster from a calibration keeps the measured rates beside the declared peaks", "[cost][cluster]") {
  Calibration calibration;
  calibration.links[LinkClass::intra_node] = {2e-6, 1.0 / 100e9};
  calibration.gemm_flops[DType::f32] = 50e9;
  DeclaredDevice declared;
  declared.gpus_per_node = 4;
  declared.peak_flops[DType::f32] = 100e9;
  declared.hbm_bytes = 64e9;
  declared.hbm_bandwidth = 100e9;
  const Cluster c = cluster_from_calibration(calibration, declared, DType::f32);
  CHECK(c.gemm_efficiency == Approx(0.5));
  CHECK(c.intra_node.params().beta == Approx(1.0 / 100e9));
  CHECK(c.inter_node.params().alpha == Approx(2e-6));  // no inter-node measurement: the intra-node one
  declared.peak_flops[DType::f32] = 10e9;
  CHECK_THROWS_WITH(cluster_from_calibration(calibration, declared, DType::f32), Catch::Contains("declared peak"));
}

// Rail-optimised nodes (one NIC per GPU): a group crossing nodes with k GPUs on each node runs k
// NCCL channels, each through its own GPU's NIC, so it sees k NICs' bandwidth, capped by the
// NVLink that feeds them; with one GPU per node, one NIC.  First principles, no fitted figure.
TEST_CASE("a group crossing nodes spreads over one NIC per GPU it has on each node, capped by NVLink",
          "[cost][cluster]") {
  const Cluster a100 = load_cluster(find_cluster("dgx-a100"));
  CHECK(a100.nics_per_node == 8);
  const TimeModel model = cluster_time_model(a100);
  auto topology = [](int world, int tp) {
    MeshConfig mesh;
    mesh.world = world;
    mesh.tp = tp;
    mesh.tp_mode = TpMode::d1;
    mesh.ranks_per_node = 8;
    return Topology(mesh);
  };
  // tp 16 over two nodes of eight: eight GPUs of the group on each node.
  const Topology two_nodes = topology(16, 16);
  CHECK(two_nodes.ranks_per_node_in("tp") == 8);
  CHECK(group_span(two_nodes, "tp", a100.nics_per_node).nics == 8);
  // tp 8 dp 2 on two nodes: each dp group has one GPU per node; the tp groups stay inside.
  const Topology one_each = topology(16, 8);
  CHECK(one_each.ranks_per_node_in("dp") == 1);
  CHECK(group_span(one_each, "dp", a100.nics_per_node).nics == 1);
  CHECK(group_span(one_each, "tp", a100.nics_per_node).nics == 1);  // inside a node: NVLink
  CHECK(group_span(one_each, "tp", a100.nics_per_node).link == LinkClass::intra_node);

  const double nic = 25e9 * 0.9, nvlink = 300e9 * 0.8;
  CHECK(model.link(LinkClass::inter_node, 1).beta == Approx(1.0 / nic));
  CHECK(model.link(LinkClass::inter_node, 8).beta == Approx(1.0 / (8 * nic)));  // 180 GB/s < NVLink's 240
  CHECK(model.link(LinkClass::inter_node, 8).alpha == model.link(LinkClass::inter_node).alpha);
  CHECK(model.link(LinkClass::intra_node, 8).beta == model.link(LinkClass::intra_node).beta);

  // A 1 GiB ring all-reduce over 16 ranks: eight times quicker (in its bandwidth term) spread over
  // eight NICs than through one.
  const std::int64_t elements = (std::int64_t{1} << 30) / 4;
  const GroupSpan eight_per_node{.link = LinkClass::inter_node, .ranks_per_node = 8, .nics = 8};
  const GroupSpan one_nic{.link = LinkClass::inter_node, .ranks_per_node = 8, .nics = 1};
  const double eight = predict_on_link(CollectiveOp::all_reduce, 16, elements, DType::f32, eight_per_node, model).seconds;
  const double one = predict_on_link(CollectiveOp::all_reduce, 16, elements, DType::f32, one_nic, model).seconds;
  const double bandwidth_term = 2.0 * 15.0 / 16.0 * (std::int64_t{1} << 30);
  CHECK(eight == Approx(bandwidth_term / (8 * nic)).epsilon(0.02));
  CHECK(one == Approx(bandwidth_term / nic).epsilon(0.02));
  // A planned call on the tp group finds its NICs from the topology.
  const PlannedCall call{"forward", "tp", CollectiveOp::all_reduce, 16, elements, DType::f32};
  CHECK(predict_call(call, two_nodes, model).seconds == eight);

  // Faster NICs than NVLink can feed: capped at the intra-node bandwidth.
  Cluster fast = a100;
  fast.inter_node.bandwidth = 100e9;
  CHECK(cluster_time_model(fast).link(LinkClass::inter_node, 8).beta == Approx(1.0 / nvlink));
  // A cluster file without nics_per_node: one NIC per node.
  const Cluster plain = parse_edited("\"nics_per_node\": 8,", "");
  CHECK(plain.nics_per_node == 1);
  CHECK(group_span(two_nodes, "tp", plain.nics_per_node).nics == 1);
  // A send joins two GPUs: one NIC, whatever the group's spread.
  const std::int64_t mib = (std::int64_t{1} << 20) / 4;
  CHECK(predict_on_link(CollectiveOp::send, 2, mib, DType::f32, eight_per_node, model).seconds ==
        Approx(model.link(LinkClass::inter_node).alpha + (1 << 20) / nic));
}

// NCCL's tuner runs a latency-bound all-reduce as a tree (2·log2 n steps of α) and a large one as
// the ring (2(n − 1) steps); NCCL_ALGO=Ring — what mdtp's own collectives and a simulated cluster
// run — keeps the ring at every size (`--nccl-algo ring`).  First principles on the preset's NVLink.
TEST_CASE("NCCL's all-reduce: the tree where its latency wins, the ring alone with NCCL_ALGO=Ring", "[cost][cluster]") {
  Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  h100.nccl_algorithms = parse_nccl_algorithms("ring,tree");  // NCCL before 2.17: no NVLS
  const LinkParams nvlink = h100.intra_node.params();
  const std::int64_t mib = (std::int64_t{1} << 20) / 4;  // 1 MiB of f32
  const double ring = 2 * 7 * nvlink.alpha + 2.0 * 7.0 / 8.0 * (1 << 20) * nvlink.beta;
  const double tree = 2 * 3 * nvlink.alpha + 2.0 * (1 << 20) * nvlink.beta;
  REQUIRE(tree < ring);  // 1 MiB over 8 ranks: 14 α of the ring outweigh the tree's doubled bytes
  auto all_reduce = [&](const Cluster& c) {
    return predict_on_link(CollectiveOp::all_reduce, 8, mib, DType::f32, {}, cluster_time_model(c));
  };
  CHECK(all_reduce(h100).algorithm == CollectiveAlgorithm::nccl_tree);
  CHECK(all_reduce(h100).seconds == Approx(tree));
  h100.nccl_algorithms = parse_nccl_algorithms("ring");
  CHECK(all_reduce(h100).algorithm == CollectiveAlgorithm::ring);
  CHECK(all_reduce(h100).seconds == Approx(ring));
  // A large one is the ring either way.
  const std::int64_t gib = (std::int64_t{1} << 30) / 4;
  h100.nccl_algorithms = parse_nccl_algorithms("ring,tree");
  CHECK(predict_on_link(CollectiveOp::all_reduce, 8, gib, DType::f32, {}, cluster_time_model(h100)).algorithm ==
        CollectiveAlgorithm::ring);
}

TEST_CASE("--nccl-algo reads NCCL_ALGO's names and refuses others in one line", "[cost][cluster]") {
  CHECK(parse_nccl_algorithms("auto").all());
  const NcclAlgorithms a = parse_nccl_algorithms("Ring,NVLSTree");
  CHECK((a.ring && !a.tree && !a.nvls && a.nvls_tree));
  CHECK(nccl_algorithms_name(a) == "ring,nvlstree");
  CHECK(nccl_algorithms_name(parse_nccl_algorithms("tree,ring,nvls,nvlstree")) == "auto");
  try {
    parse_nccl_algorithms("ring,collnet");
    FAIL("collnet was accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("'collnet'") && Catch::Contains("ring, tree, nvls, nvlstree"));
  }
}

// NVLink SHARP on an NVSwitch 3 (DGX H100): the switch reduces and multicasts, so each GPU sends
// and receives S once instead of the ring's 2(n−1)/n·S — at the rate the switch sets, not the
// link's.  The preset's figures are the vendor's (nccl-tests on eight H100s: ring bus bandwidth
// about 370 GB/s, NVLS about 480 GB/s = an algorithm bandwidth of about 275 GB/s), so the model must
// reproduce them, and what follows from them: NVLS wins a large all-reduce on 8 GPUs by about 30 %,
// loses on 2 (the ring moves only S there), and A100's third-generation switch has none.
TEST_CASE("NVLS: the NVSwitch's all-reduce inside a node, at the rate its data sheet and nccl-tests give",
          "[cost][cluster]") {
  const Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  REQUIRE(h100.nvls.has_value());
  CHECK(!h100.nvls->source.empty());
  const TimeModel model = cluster_time_model(h100);
  const double S = static_cast<double>(std::int64_t{1} << 32);  // 4 GiB: the bandwidth term rules
  const std::int64_t elements = (std::int64_t{1} << 32) / 2;
  const CallEstimate eight = predict_on_link(CollectiveOp::all_reduce, 8, elements, DType::bf16, {}, model);
  CHECK(eight.algorithm == CollectiveAlgorithm::nvls);
  const double algbw = S / eight.seconds, busbw = algbw * 2.0 * 7.0 / 8.0;
  CHECK(algbw == Approx(275e9).epsilon(0.02));
  CHECK(busbw == Approx(480e9).epsilon(0.02));
  const double ring = nccl_seconds(CollectiveAlgorithm::ring, 8, std::int64_t{1} << 32, {}, model);
  CHECK(S * 2.0 * 7.0 / 8.0 / ring == Approx(360e9).epsilon(0.03));  // the ring's bus bandwidth
  CHECK(ring / eight.seconds == Approx(1.33).epsilon(0.03));        // "about 30 % from NVLink SHARP"
  // Two GPUs: the ring moves S each way at the link's rate; the switch's rate is lower.
  CHECK(predict_on_link(CollectiveOp::all_reduce, 2, elements, DType::bf16, {}, model).algorithm ==
        CollectiveAlgorithm::ring);
  // Other collectives stay rings (an NVLS all-gather receives as many bytes as the ring's).
  CHECK(predict_on_link(CollectiveOp::all_gather, 8, elements, DType::bf16, {}, model).algorithm ==
        CollectiveAlgorithm::ring_allgather);
  // Off with --nccl-algo ring,tree (NCCL before 2.17); none on an A100's switch.
  Cluster older = h100;
  older.nccl_algorithms = parse_nccl_algorithms("ring,tree");
  CHECK(predict_on_link(CollectiveOp::all_reduce, 8, elements, DType::bf16, {}, cluster_time_model(older)).algorithm ==
        CollectiveAlgorithm::ring);
  const Cluster a100 = load_cluster(find_cluster("dgx-a100"));
  CHECK(!a100.nvls.has_value());
  CHECK(predict_on_link(CollectiveOp::all_reduce, 8, elements, DType::bf16, {}, cluster_time_model(a100)).algorithm ==
        CollectiveAlgorithm::ring);
  // The file round-trips the switch's figures.
  const Cluster again = parse_cluster(cluster_json(h100), "round-trip");
  REQUIRE(again.nvls.has_value());
  CHECK(again.nvls->params.bandwidth == h100.nvls->params.bandwidth);
  CHECK(again.nvls->params.alpha == h100.nvls->params.alpha);
}

// NVLS-tree (NCCL >= 2.18) across nodes: NVLS inside each node, then each GPU all-reduces its 1/k of
// the node's sum over its own NIC by a tree.  Between two nodes the tree is one exchange, so its
// NICs carry S/k once each way where the ring carries about 2·S/k: twice the ring's rate where the
// NICs bound it.  Over more nodes reduce-up and broadcast-down carry it twice, as the ring does, and
// what is left is the tree's latency: 2⌈log₂ N⌉ α against the ring's 2(n − 1).
TEST_CASE("NVLS-tree: two nodes at twice the ring's NIC-bound rate, many at the ring's rate with a tree's latency",
          "[cost][cluster]") {
  const Cluster h100 = load_cluster(find_cluster("dgx-h100"));
  const TimeModel model = cluster_time_model(h100);
  const double nics8 = 8 * 50e9 * 0.9;  // eight NDR ports at 90 %: 360 GB/s, as much as NVLink feeds them
  const LinkParams inter8 = model.link(LinkClass::inter_node, 8);
  CHECK(1.0 / inter8.beta == Approx(std::min(nics8, 450e9 * 0.8)));
  const std::int64_t bytes = std::int64_t{1} << 32;
  const GroupSpan two_nodes{.link = LinkClass::inter_node, .ranks_per_node = 8, .nics = 8};
  const double ring = nccl_seconds(CollectiveAlgorithm::ring, 16, bytes, two_nodes, model);
  const double nvls_tree = nccl_seconds(CollectiveAlgorithm::nvls_tree, 16, bytes, two_nodes, model);
  const double S = static_cast<double>(bytes);
  // Bandwidth terms: the ring 2·15/16·S at the eight NICs' rate; NVLS-tree S at the slower of the
  // switch (275 GB/s) and the eight NICs (360 GB/s): the switch.
  CHECK(ring == Approx(2.0 * 15.0 / 16.0 * S * inter8.beta).epsilon(0.01));
  CHECK(nvls_tree == Approx(S / h100.nvls->params.bandwidth).epsilon(0.01));
  CHECK(predict_on_link(CollectiveOp::all_reduce, 16, bytes / 2, DType::bf16, two_nodes, model).algorithm ==
        CollectiveAlgorithm::nvls_tree);
  // Sixteen nodes: both move about 2·S/8 per NIC; the tree's latency is 2·4 α against 2·127 α.
  const GroupSpan sixteen{.link = LinkClass::inter_node, .ranks_per_node = 8, .nics = 8};
  const double small = 1 << 20;
  const double tree16 = nccl_seconds(CollectiveAlgorithm::nvls_tree, 128, 1 << 20, sixteen, model);
  CHECK(tree16 == Approx(h100.nvls->params.alpha + 2 * 4 * inter8.alpha + small * 2 * inter8.beta));
  CHECK(nccl_seconds(CollectiveAlgorithm::nvls_tree, 128, bytes, sixteen, model) ==
        Approx(h100.nvls->params.alpha + 8 * inter8.alpha + S * 2 * inter8.beta));
  // One GPU per node (a tp = 8 layout's dp group): nothing to reduce inside a node, no NVLS-tree.
  const GroupSpan one_each{.link = LinkClass::inter_node, .ranks_per_node = 1, .nics = 1};
  CHECK(predict_on_link(CollectiveOp::all_reduce, 16, bytes / 2, DType::bf16, one_each, model).algorithm !=
        CollectiveAlgorithm::nvls_tree);
}
