#pragma once
// Files mdtp ships under data/ (cluster presets, tables of measured runs), found the same way from
// a build tree, an installed prefix or anywhere a user runs the program.  A relative path such as
// "clusters/dgx-a100.json" is looked for, in order, under: $MDTP_DATA_DIR; data/ and share/mdtp/
// beside the program and in each directory above it; the source tree's data/; the install
// prefix's share/mdtp/; the working directory's data/.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mdtp {

// Every place `relative` is looked for, in order.
std::vector<std::filesystem::path> data_file_candidates(const std::string& relative);
// The first of them that exists.
std::optional<std::filesystem::path> find_data_file(const std::string& relative);
// " /a/x /b/x …": the candidates, for an error message that says where it looked.
std::string data_file_places(const std::string& relative);

}  // namespace mdtp
