#include "train/stage_gather.hpp"

#include <algorithm>
#include <set>

#include "model/gpt.hpp"

namespace mdtp {
namespace {

// [count] then per tensor: [name length, name bytes..., ndim, dims..., numel, values...], as doubles
// (names are short; one message per stage keeps this simple).
std::vector<double> pack(const std::vector<NamedTensor>& tensors) {
  std::vector<double> out{static_cast<double>(tensors.size())};
  for (const NamedTensor& t : tensors) {
    out.push_back(static_cast<double>(t.name.size()));
    for (unsigned char c : t.name) out.push_back(c);
    out.push_back(static_cast<double>(t.shape.size()));
    for (std::int64_t d : t.shape) out.push_back(static_cast<double>(d));
    out.push_back(static_cast<double>(t.values.size()));
    out.insert(out.end(), t.values.begin(), t.values.end());
  }
  return out;
}

std::vector<NamedTensor> unpack(const std::vector<double>& in) {
  std::size_t i = 0;
  auto next = [&] { return in.at(i++); };
  std::vector<NamedTensor> out(static_cast<std::size_t>(next()));
  for (NamedTensor& t : out) {
    const auto length = static_cast<std::size_t>(next());
    for (std::size_t k = 0; k < length; ++k) t.name.push_back(static_cast<char>(next()));
    t.shape.resize(static_cast<std::size_t>(next()));
    for (auto& d : t.shape) d = static_cast<std::int64_t>(next());
    const auto n = static_cast<std::size_t>(next());
    t.values.assign(in.begin() + static_cast<std::ptrdiff_t>(i), in.begin() + static_cast<std::ptrdiff_t>(i + n));
    i += n;
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> gather_stage_tensors(const std::vector<NamedTensor>& mine, const Mesh& mesh, MPI_Comm world,
                                              const GptConfig& config) {
  const bool representative = mesh.comm("tp").rank() == 0 && mesh.comm("dp").rank() == 0;
  const int stage = mesh.comm("pp").rank(), stages = mesh.comm("pp").size();
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  require(rank != 0 || (representative && stage == 0), "checkpoint gather: world rank 0 must be stage 0's ",
          "representative (tensor-parallel rank 0 of replica 0)");
  MPI_Comm roots = MPI_COMM_NULL;
  MPI_Comm_split(world, representative ? 0 : MPI_UNDEFINED, stage, &roots);
  if (roots == MPI_COMM_NULL) return {};
  std::vector<NamedTensor> all;
  if (stage != 0) {
    const std::vector<double> message = pack(mine);
    const auto n = static_cast<long long>(message.size());
    MPI_Send(&n, 1, MPI_LONG_LONG, 0, 0, roots);
    MPI_Send(message.data(), static_cast<int>(message.size()), MPI_DOUBLE, 0, 1, roots);
  } else {
    all = mine;
    for (int s = 1; s < stages; ++s) {
      long long n = 0;
      MPI_Recv(&n, 1, MPI_LONG_LONG, s, 0, roots, MPI_STATUS_IGNORE);
      std::vector<double> message(static_cast<std::size_t>(n));
      MPI_Recv(message.data(), static_cast<int>(n), MPI_DOUBLE, s, 1, roots, MPI_STATUS_IGNORE);
      for (NamedTensor& t : unpack(message)) all.push_back(std::move(t));
    }
  }
  MPI_Comm_free(&roots);
  if (stage != 0) return {};
  std::stable_sort(all.begin(), all.end(), [&](const NamedTensor& a, const NamedTensor& b) {
    return unit_of_parameter(a.name, config) < unit_of_parameter(b.name, config);
  });
  std::set<std::string> seen;
  std::vector<NamedTensor> unique;
  for (NamedTensor& t : all)
    if (seen.insert(t.name).second) unique.push_back(std::move(t));
  return unique;
}

}  // namespace mdtp
