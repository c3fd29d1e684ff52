#pragma once
// Where a driver's runs go: one HDF5 results file (io/results_file.hpp), written by rank 0 only,
// with every failure made collective — rank 0 broadcasts the outcome and every rank raises the
// same mdtp::Error — so that a bad --out never leaves the other ranks waiting.
//
// The file is checked when the sink is made (an existing file must be HDF5 and is only ever
// appended to; a new one's directory must be writable) but created only by the first run
// appended, so a refused or failed job leaves no file behind.
#include <mpi.h>

#include <map>
#include <string>

#include "io/results_file.hpp"

namespace mdtp::run {

class ResultsSink {
 public:
  // Collective over `world`.
  ResultsSink(std::string path, MPI_Comm world);
  // Collective: rank 0 appends /runs/<NNNN>-<kind>; every rank gets its path.
  std::string append_run(const std::string& kind, const Attributes& attributes,
                         const std::map<std::string, Table>& tables);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  MPI_Comm world_;
  int rank_ = 0;
};

}  // namespace mdtp::run
