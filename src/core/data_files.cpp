#include "core/data_files.hpp"

#include <cstdlib>
#include <system_error>

#include "mdtp/build_info.hpp"

namespace mdtp {

namespace fs = std::filesystem;

std::vector<fs::path> data_file_candidates(const std::string& relative) {
  std::vector<fs::path> tried;
  if (const char* dir = std::getenv("MDTP_DATA_DIR"); dir != nullptr && *dir != '\0')
    tried.push_back(fs::path(dir) / relative);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      tried.push_back(dir / "data" / relative);
      tried.push_back(dir / "share" / "mdtp" / relative);
    }
  tried.push_back(fs::path(build_info::source_data_dir) / relative);
  tried.push_back(fs::path(build_info::installed_data_dir) / relative);
  tried.push_back(fs::current_path() / "data" / relative);
  return tried;
}

std::optional<fs::path> find_data_file(const std::string& relative) {
  for (const auto& p : data_file_candidates(relative))
    if (fs::exists(p)) return p;
  return std::nullopt;
}

std::string data_file_places(const std::string& relative) {
  std::string where;
  for (const auto& p : data_file_candidates(relative)) {
    where += ' ';
    where += p.string();
  }
  return where;
}

}  // namespace mdtp
