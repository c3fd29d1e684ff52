#pragma once
// Helpers shared by the comm tests: sub-groups of MPI_COMM_WORLD of several shapes, whose
// membership the tests compute serially (independently of the communicator under test), and
// element values that depend on (world rank, element index) so that every element is checked.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "core/backend.hpp"

namespace mdtp::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Integers in [-500, 500]: exact in f32 sums over up to 27 ranks, and the maximum and minimum
// move between ranks from element to element.
inline double value(int rank, std::int64_t i) {
  std::int64_t h = (rank + 1) * 7919 + i * 104729 + rank * i * 31 + (i * i % 97) * (rank % 5);
  return static_cast<double>(h % 1001 - 500);
}

inline std::vector<double> values(int rank, std::int64_t offset, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value(rank, offset + i);
  return v;
}

// A partition of the world: colour and key of every world rank; a group is the ranks of one
// colour ordered by key (MPI_Comm_split's rule).
struct GroupSpec {
  std::string name;
  std::function<int(int)> color;
  std::function<int(int)> key;
};

inline std::vector<GroupSpec> group_specs(int n) {
  std::vector<GroupSpec> specs;
  specs.push_back({"world", [](int) { return 0; }, [](int r) { return r; }});
  if (n >= 2) specs.push_back({"world.reversed", [](int) { return 0; }, [n](int r) { return n - 1 - r; }});
  if (n >= 2) specs.push_back({"pairs", [](int r) { return r / 2; }, [](int r) { return r; }});
  if (n >= 3) specs.push_back({"triples", [](int r) { return r / 3; }, [](int r) { return r; }});
  if (n >= 4) {
    int stride = (n % 3 == 0) ? 3 : 2;
    specs.push_back({"strided" + std::to_string(stride), [stride](int r) { return r % stride; },
                     [](int r) { return r; }});
  }
  return specs;
}

// The world ranks of this rank's group, in group-rank order.
inline std::vector<int> members(const GroupSpec& spec, int me, int n) {
  std::vector<int> m;
  for (int r = 0; r < n; ++r)
    if (spec.color(r) == spec.color(me)) m.push_back(r);
  std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return spec.key(a) < spec.key(b); });
  return m;
}

struct TestGroup {
  GroupSpec spec;
  std::vector<int> members;  // world ranks by group rank, computed serially
  std::unique_ptr<Communicator> comm;
};

inline WaitPolicy test_wait_policy() { return resolve_wait_policy(measure_node_occupancy(MPI_COMM_WORLD)); }

inline void polite_wait(MPI_Request& request) { wait_mpi_request(request, MPI_STATUS_IGNORE, WaitPolicy::polite, WaitLabel{"test", "wait", -1, nullptr}); }

// Collective over the world: one communicator per spec.  Blocking communicator constructors
// spin for ~0.6 s each at 27 ranks on 2 cores, so the whole world is MPI_Comm_idup'ed (waited
// on politely) and the other groups are made with MPI_Comm_create_group, which involves only
// the group's own members.
inline std::vector<TestGroup> make_groups(CommLedger* ledger, WaitPolicy policy) {
  const int me = world_rank(), n = world_size();
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<TestGroup> groups;
  int tag = 0;
  for (auto& spec : group_specs(n)) {
    auto m = members(spec, me, n);
    MPI_Comm comm = MPI_COMM_NULL;
    if (spec.name == "world") {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request);
      polite_wait(request);
    } else {
      MPI_Group group = MPI_GROUP_NULL;
      MPI_Group_incl(world_group, static_cast<int>(m.size()), m.data(), &group);
      MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm);
      MPI_Group_free(&group);
    }
    ++tag;
    auto c = make_mpi_communicator(spec.name, comm, ledger, policy);
    groups.push_back({spec, std::move(m), std::move(c)});
  }
  MPI_Group_free(&world_group);
  return groups;
}

// Exact comparison of every element; reports the first mismatches only.
inline void check_values(const std::vector<double>& got, const std::vector<double>& expected) {
  // CHECK, never REQUIRE, in SPMD tests: a rank leaving a test case early would leave the
  // others waiting in its next collective.
  CHECK(got.size() == expected.size());
  if (got.size() != expected.size()) return;
  std::int64_t wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == expected[i]) continue;
    if (wrong++ < 3)
      first += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " expected " +
               std::to_string(expected[i]) + ";";
  }
  INFO("mismatches:" << first);
  CHECK(wrong == 0);
}

}  // namespace mdtp::test
