#include "io/atomic_file.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace mdtp {

void replace_file_atomically(const std::string& path, const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (!target.parent_path().empty()) {
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
  }
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  try {
    write(temp);
    std::error_code ec;
    fs::rename(temp, target, ec);
    require(!ec, "cannot move '", temp, "' to '", path, "': ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw;
  }
}

void write_text_atomically(const std::string& path, const std::string& text) {
  replace_file_atomically(path, [&](const std::string& temp) {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    require(out.good(), "cannot create '", temp, "' (for '", path, "')");
    out << text;
    out.close();
    require(out.good(), "cannot write '", temp, "' (for '", path, "')");
  });
}

}  // namespace mdtp
