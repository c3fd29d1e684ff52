#pragma once
// A small, strict command-line parser shared by the subcommands: every option must be declared,
// an unknown option or a malformed number is an mdtp::Error naming it.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mdtp::cli {

class Args {
 public:
  // `flags` take no value (e.g. "--json"); every other declared option takes one value.
  Args(const std::vector<std::string>& argv, const std::vector<std::string>& options,
       const std::vector<std::string>& flags);
  bool has(const std::string& option) const;
  std::string get(const std::string& option, const std::string& fallback) const;
  long long get_int(const std::string& option, long long fallback) const;
  double get_double(const std::string& option, double fallback) const;
  std::vector<long long> get_int_list(const std::string& option, const std::vector<long long>& fallback) const;  // "1,2,4"
  std::vector<std::string> get_list(const std::string& option, const std::vector<std::string>& fallback) const;
  bool flag(const std::string& flag) const { return flags_.count(flag) != 0; }
  std::string command_line() const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> flags_;
  std::vector<std::string> argv_;
};

}  // namespace mdtp::cli
