#include "io/output_path.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.hpp"

namespace mdtp {
namespace {

namespace fs = std::filesystem;

void check_place(const std::string& path, const std::string& option) {
  require(!path.empty(), option, " needs a file name");
  std::error_code ec;
  require(!fs::is_directory(path, ec), option, " '", path, "' is a directory; expected a file name");
  fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
  require(fs::is_directory(dir, ec), option, " '", path, "': '", dir.string(), "' is not a directory");
  require(::access(dir.c_str(), W_OK) == 0, option, " '", path, "': the directory '", dir.string(),
          "' is not writable");
}

}  // namespace

void check_hdf5_output(const std::string& path, const std::string& option) {
  check_place(path, option);
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  htri_t is_hdf5 = -1;
  H5E_BEGIN_TRY { is_hdf5 = H5Fis_hdf5(path.c_str()); }
  H5E_END_TRY;
  require(is_hdf5 > 0, option, " '", path, "' exists but is not an HDF5 file; refusing to touch it (choose another ",
          option, ")");
}

void check_text_output(const std::string& path, const std::string& option) { check_place(path, option); }

}  // namespace mdtp
