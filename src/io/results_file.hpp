#pragma once
// Results in HDF5 (docs/architecture.md, "File formats"):
//   /runs/<NNNN>-<kind>/           one group per run, never overwritten; attributes = provenance
//                                  (mdtp version and commit, command line, UTC time, hosts,
//                                  world size, mesh, mode, dtype, MPI library, compiler, wait
//                                  policy, oversubscription, …)
//   /runs/<NNNN>-<kind>/<table>    compound datasets, one per Table
// An existing file is appended to; a file that is not HDF5 is refused, never replaced.  Each
// append writes a copy and renames it into place, so an interrupted append (a kill, a full disk)
// leaves the earlier runs as they were.  Only one process writes (rank 0 in the drivers).
#include <map>
#include <string>
#include <variant>

#include "io/table.hpp"

namespace mdtp {

using AttributeValue = std::variant<std::string, std::int64_t, double>;
using Attributes = std::map<std::string, AttributeValue>;

class ResultsFile {
 public:
  // Checks `path` (an existing file must be HDF5; a new one's directory is made); writes nothing.
  explicit ResultsFile(const std::string& path);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  // Creates /runs/<next number>-<kind> with the attributes and tables; returns its path.
  std::string append_run(const std::string& kind, const Attributes& attributes,
                         const std::map<std::string, Table>& tables);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Reads back a table (tests; analysis happens in Python).
Table read_table(const std::string& path, const std::string& dataset);
// Reads a run's attributes.
Attributes read_attributes(const std::string& path, const std::string& group);
std::vector<std::string> list_runs(const std::string& path);

}  // namespace mdtp
