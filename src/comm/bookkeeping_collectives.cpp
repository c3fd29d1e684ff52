#include "comm/bookkeeping_collectives.hpp"

#include <vector>

#include "comm/run_clock.hpp"

namespace mdtp {
namespace {

void wait(MPI_Request& request, WaitPolicy policy, const WaitLabel& label) {
  wait_mpi_request(request, MPI_STATUS_IGNORE, policy, label);
}

int type_bytes(MPI_Datatype type) {
  int bytes = 0;
  check_mpi(MPI_Type_size(type, &bytes), "MPI_Type_size");
  return bytes;
}

}  // namespace

void bookkeeping_barrier(MPI_Comm comm, WaitPolicy policy, const WaitLabel& label) {
  if (simulated_build()) {
    check_mpi(MPI_Barrier(comm), "MPI_Barrier");
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(comm, &request), "MPI_Ibarrier");
  wait(request, policy, label);
}

void bookkeeping_all_reduce(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, WaitPolicy policy,
                            const WaitLabel& label) {
  if (simulated_build()) {
    // Not in place: SMPI 3.32's in-place all-reduce has given wrong sums (docs/simulate.md).
    const std::size_t bytes = static_cast<std::size_t>(count) * static_cast<std::size_t>(type_bytes(type));
    std::vector<unsigned char> in(static_cast<const unsigned char*>(data), static_cast<const unsigned char*>(data) + bytes);
    check_mpi(MPI_Allreduce(in.data(), data, count, type, op, comm), "MPI_Allreduce");
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, comm, &request), "MPI_Iallreduce");
  wait(request, policy, label);
}

void bookkeeping_all_gather(const void* mine, int count, MPI_Datatype type, void* all, MPI_Comm comm,
                            WaitPolicy policy, const WaitLabel& label) {
  if (simulated_build()) {
    check_mpi(MPI_Allgather(mine, count, type, all, count, type, comm), "MPI_Allgather");
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(mine, count, type, all, count, type, comm, &request), "MPI_Iallgather");
  wait(request, policy, label);
}

void bookkeeping_all_gatherv(const void* mine, int count, MPI_Datatype type, void* all, const int* counts,
                             const int* offsets, MPI_Comm comm, WaitPolicy policy, const WaitLabel& label) {
  if (simulated_build()) {
    check_mpi(MPI_Allgatherv(mine, count, type, all, counts, offsets, type, comm), "MPI_Allgatherv");
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgatherv(mine, count, type, all, counts, offsets, type, comm, &request), "MPI_Iallgatherv");
  wait(request, policy, label);
}

void bookkeeping_broadcast(void* data, int count, MPI_Datatype type, int root, MPI_Comm comm, WaitPolicy policy,
                           const WaitLabel& label) {
  if (simulated_build()) {
    check_mpi(MPI_Bcast(data, count, type, root, comm), "MPI_Bcast");
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(data, count, type, root, comm, &request), "MPI_Ibcast");
  wait(request, policy, label);
}

}  // namespace mdtp
