// Mesh on MPI: every communicator it creates matches the Topology (size, rank, members), carries
// a real all-reduce over exactly its group, and a bad configuration fails on every rank before
// any collective.  Runs under mpiexec with 1, 4, 8 and 27 ranks; each case picks the
// configurations that fit the world it finds.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"
#include "mesh/mesh.hpp"

using mdtp::MeshConfig;
using Catch::Matchers::Contains;

namespace {

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

MeshConfig make(int world, int tp, int pp, int cp, std::string order, std::string mode, int depth = 1) {
  MeshConfig c;
  c.world = world;
  c.tp = tp;
  c.pp = pp;
  c.cp = cp;
  c.order = order;
  c.tp_mode = mdtp::parse_tp_mode(mode);
  c.tp_depth = depth;
  return c;
}

// Configurations per world size: every mode, every axis >1 somewhere, unusual orders, and a
// pipeline of more than two stages (ranks outside the embedding group).
std::vector<MeshConfig> configs_for(int world) {
  switch (world) {
    case 1: return {make(1, 1, 1, 1, "tp-cp-dp-pp", "1d"), make(1, 1, 1, 1, "tp-cp-dp-pp", "3d")};
    case 4:
      return {make(4, 4, 1, 1, "tp-cp-dp-pp", "1d"), make(4, 4, 1, 1, "tp-cp-dp-pp", "2d"),
              make(4, 2, 2, 1, "pp-tp", "1d-sp"), make(4, 1, 1, 2, "dp-cp-tp-pp", "1d"),
              make(4, 1, 4, 1, "tp-cp-dp-pp", "1d"), make(4, 4, 1, 1, "tp-cp-dp-pp", "2.5d")};
    case 8:
      return {make(8, 8, 1, 1, "tp-cp-dp-pp", "3d"), make(8, 8, 1, 1, "tp-cp-dp-pp", "2.5d", 2),
              make(8, 4, 2, 1, "pp-tp", "2d"), make(8, 2, 2, 2, "cp-pp-tp-dp", "1d"),
              make(8, 2, 4, 1, "tp-dp-pp", "1d")};
    case 27: return {make(27, 27, 1, 1, "tp-cp-dp-pp", "3d")};
    default: return {};
  }
}

std::string describe(const MeshConfig& c) {
  return "world=" + std::to_string(c.world) + " tp=" + std::to_string(c.tp) + " pp=" + std::to_string(c.pp) +
         " cp=" + std::to_string(c.cp) + " order=" + c.order + " mode=" + tp_mode_name(c.tp_mode) +
         " depth=" + std::to_string(c.tp_depth);
}

}  // namespace

TEST_CASE("Mesh communicators agree with the topology", "[mesh][mpi]") {
  auto allocator = std::make_shared<mdtp::HostAllocator>();
  for (const auto& config : configs_for(world_size())) {
    INFO(describe(config));
    mdtp::CommLedger ledger;
    mdtp::Mesh mesh(config, MPI_COMM_WORLD, ledger);
    const auto& topo = mesh.topology();
    CHECK(mesh.world_size() == world_size());

    std::vector<std::string> expected;
    for (const auto& name : topo.group_names())
      if (topo.group_index(name, mesh.rank()) >= 0) expected.push_back(name);
    CHECK(mesh.comm_names() == expected);
    CHECK(mesh.has_comm("world"));
    CHECK_FALSE(mesh.has_comm("bogus"));
    CHECK(mesh.has_comm("embedding") == (topo.group_index("embedding", mesh.rank()) >= 0));
    if (!mesh.has_comm("embedding"))  // middle pipeline stages
      CHECK_THROWS_WITH(mesh.comm("embedding"), Contains("belongs to no 'embedding' group"));
    CHECK_THROWS_WITH(mesh.comm("bogus"), Contains("unknown mesh communicator 'bogus'") && Contains("world"));

    // Same order on every rank (comm_names() only skips groups this rank is not in).
    for (const auto& name : mesh.comm_names()) {
      INFO("group " << name);
      const auto& group = topo.group_of(name, mesh.rank());
      auto& comm = mesh.comm(name);
      CHECK(comm.name() == name);
      CHECK(comm.size() == static_cast<int>(group.size()));
      CHECK(comm.world_ranks() == group);
      CHECK(group[comm.rank()] == mesh.rank());

      auto buffer = mdtp::Tensor::empty({1}, mdtp::DType::f64, allocator, mdtp::MemCategory::communication);
      buffer.data<double>()[0] = mesh.rank();
      comm.all_reduce(buffer);
      CHECK(buffer.data<double>()[0] == std::accumulate(group.begin(), group.end(), 0.0));
    }
    CHECK(ledger.entries().size() == mesh.comm_names().size());
    if (!ledger.entries().empty()) CHECK(ledger.entries().back().group == mesh.comm_names().back());
  }
}

TEST_CASE("Mesh builds its communicators through a given factory, in the fixed order", "[mesh][mpi]") {
  const int world = world_size();
  MeshConfig config;
  config.world = world;
  std::vector<std::string> made;
  mdtp::CommLedger ledger;
  mdtp::Mesh mesh(config, MPI_COMM_WORLD, ledger,
                  [&made](const std::string& name, MPI_Comm comm, mdtp::CommLedger* l) {
                    made.push_back(name);
                    return mdtp::make_mpi_communicator(name, comm, l, mdtp::WaitPolicy::polite);
                  });
  CHECK(made == std::vector<std::string>{"world", "tp", "pp", "dp", "cp", "tp-pp", "tp-dp", "dp-cp", "tp-dp-cp",
                                         "embedding"});
  CHECK(mesh.comm("dp").size() == world);
  CHECK(&mesh.ledger() == &ledger);
  CHECK(mesh.occupancy().local_ranks >= 1);
  CHECK(mesh.occupancy().local_ranks <= world);
}

TEST_CASE("A bad mesh fails on every rank before any collective", "[mesh][mpi]") {
  const int world = world_size();
  mdtp::CommLedger ledger;
  MeshConfig wrong_world;
  wrong_world.world = world + 1;
  CHECK_THROWS_WITH(mdtp::Mesh(wrong_world, MPI_COMM_WORLD, ledger),
                    Contains("world=" + std::to_string(world + 1)) && Contains("has " + std::to_string(world)));
  // One rank: a 2.5D depth of 2 cannot fit tp = 1.
  MeshConfig non_square = world == 1 ? make(1, 1, 1, 1, "tp-cp-dp-pp", "2.5d", 2)
                                     : make(world, world, 1, 1, "tp-cp-dp-pp", "2d");
  if (world == 8 || world == 27) non_square.tp_mode = mdtp::TpMode::d2;  // not squares
  if (world == 4) non_square.tp_mode = mdtp::TpMode::d3;                 // not a cube
  CHECK_THROWS_AS(mdtp::Mesh(non_square, MPI_COMM_WORLD, ledger), mdtp::Error);
  // Every rank is still in step: a collective after the failures completes.
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(ledger.entries().empty());
}
