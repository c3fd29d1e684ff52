#pragma once
// Outputs a user names are replaced atomically: written to a temporary file beside the target
// and renamed into place, so a failed or interrupted write never truncates an existing file.
#include <functional>
#include <string>

namespace mdtp {

// Runs `write(temporary_path)`, then renames the temporary file to `path` (creating its directory);
// on any error the temporary file is removed, `path` is left as it was, and the error propagates.
void replace_file_atomically(const std::string& path, const std::function<void(const std::string&)>& write);

// `text` as the whole content of `path`, replaced atomically.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace mdtp
