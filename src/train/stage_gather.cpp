#include "train/stage_gather.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

// A tensor's header as doubles: [name length, name bytes..., ndim, dims..., numel] (names are
// short); its values follow in messages of at most kChunk doubles (MPI counts are ints).
constexpr std::size_t kChunk = std::size_t{1} << 28;

std::vector<double> header(const NamedTensor& t) {
  std::vector<double> out{static_cast<double>(t.name.size())};
  for (unsigned char c : t.name) out.push_back(c);
  out.push_back(static_cast<double>(t.shape.size()));
  for (std::int64_t d : t.shape) out.push_back(static_cast<double>(d));
  out.push_back(static_cast<double>(t.values.size()));
  return out;
}

// The tensor a header describes, its values still to be received.
NamedTensor from_header(const std::vector<double>& in) {
  std::size_t i = 0;
  auto next = [&] { return in.at(i++); };
  NamedTensor t;
  const auto length = static_cast<std::size_t>(next());
  for (std::size_t k = 0; k < length; ++k) t.name.push_back(static_cast<char>(next()));
  t.shape.resize(static_cast<std::size_t>(next()));
  for (auto& d : t.shape) d = static_cast<std::int64_t>(next());
  t.values.resize(static_cast<std::size_t>(next()));
  return t;
}

void send(const NamedTensor& t, MPI_Comm roots) {
  const std::vector<double> h = header(t);
  MPI_Send(h.data(), static_cast<int>(h.size()), MPI_DOUBLE, 0, 1, roots);
  for (std::size_t off = 0; off < t.values.size(); off += kChunk)
    MPI_Send(t.values.data() + off, static_cast<int>(std::min(kChunk, t.values.size() - off)), MPI_DOUBLE, 0, 2,
             roots);
}

NamedTensor receive(int from, MPI_Comm roots) {
  MPI_Status status;
  MPI_Probe(from, 1, roots, &status);
  int size = 0;
  MPI_Get_count(&status, MPI_DOUBLE, &size);
  std::vector<double> h(static_cast<std::size_t>(size));
  MPI_Recv(h.data(), size, MPI_DOUBLE, from, 1, roots, MPI_STATUS_IGNORE);
  NamedTensor t = from_header(h);
  for (std::size_t off = 0; off < t.values.size(); off += kChunk)
    MPI_Recv(t.values.data() + off, static_cast<int>(std::min(kChunk, t.values.size() - off)), MPI_DOUBLE, from, 2,
             roots, MPI_STATUS_IGNORE);
  return t;
}

}  // namespace

void stream_stage_tensors(std::size_t count, const std::function<NamedTensor(std::size_t)>& produce,
                          const std::function<void(NamedTensor&&)>& consume, const Mesh& mesh, MPI_Comm world) {
  const bool representative = mesh.comm(group::tp).rank() == 0 && mesh.comm(group::dp).rank() == 0;
  const int stage = mesh.comm(group::pp).rank(), stages = mesh.comm(group::pp).size();
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  require(rank != 0 || (representative && stage == 0), "checkpoint gather: world rank 0 must be stage 0's ",
          "representative (tensor-parallel rank 0 of replica 0)");
  MPI_Comm roots = MPI_COMM_NULL;
  MPI_Comm_split(world, representative ? 0 : MPI_UNDEFINED, stage, &roots);
  const bool sender = roots != MPI_COMM_NULL && stage != 0;
  if (sender) {
    const auto n = static_cast<long long>(count);
    MPI_Send(&n, 1, MPI_LONG_LONG, 0, 0, roots);
  }
  // Every rank of every stage walks its tensors; a later stage's representative waits in MPI_Send
  // until world rank 0 has written the stages before it, which holds its stage's collectives there.
  for (std::size_t i = 0; i < count; ++i) {
    NamedTensor t = produce(i);
    if (rank == 0) {
      consume(std::move(t));
    } else if (sender) {
      send(t, roots);
    }
  }
  if (rank == 0)
    for (int s = 1; s < stages; ++s) {
      long long n = 0;
      MPI_Recv(&n, 1, MPI_LONG_LONG, s, 0, roots, MPI_STATUS_IGNORE);
      for (long long k = 0; k < n; ++k) consume(receive(s, roots));
    }
  if (roots != MPI_COMM_NULL) MPI_Comm_free(&roots);
}

}  // namespace mdtp
