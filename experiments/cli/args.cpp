#include "cli/args.hpp"

#include <algorithm>
#include <sstream>

#include "core/error.hpp"

namespace mdtp::cli {

Args::Args(const std::vector<std::string>& argv, const std::vector<std::string>& options,
           const std::vector<std::string>& flags)
    : argv_(argv) {
  auto declared = [](const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    if (declared(flags, arg)) {
      require(!has_inline, "option ", arg, " takes no value");
      flags_[arg] = true;
    } else if (declared(options, arg)) {
      if (!has_inline) {
        require(i + 1 < argv.size(), "option ", arg, " needs a value");
        value = argv[++i];
      }
      values_[arg] = value;
    } else {
      std::ostringstream known;
      for (const auto& o : options) known << ' ' << o;
      for (const auto& f : flags) known << ' ' << f;
      throw_error("unknown option '", arg, "'; expected one of:", known.str());
    }
  }
}

bool Args::has(const std::string& option) const { return values_.count(option) != 0; }

std::string Args::get(const std::string& option, const std::string& fallback) const {
  auto it = values_.find(option);
  return it == values_.end() ? fallback : it->second;
}

long long Args::get_int(const std::string& option, long long fallback) const {
  auto it = values_.find(option);
  if (it == values_.end()) return fallback;
  try {
    std::size_t used = 0;
    long long v = std::stoll(it->second, &used);
    require(used == it->second.size(), "");
    return v;
  } catch (...) {
    throw_error("option ", option, " needs a whole number; got '", it->second, "'");
  }
}

double Args::get_double(const std::string& option, double fallback) const {
  auto it = values_.find(option);
  if (it == values_.end()) return fallback;
  try {
    std::size_t used = 0;
    double v = std::stod(it->second, &used);
    require(used == it->second.size(), "");
    return v;
  } catch (...) {
    throw_error("option ", option, " needs a number; got '", it->second, "'");
  }
}

std::vector<std::string> Args::get_list(const std::string& option,
                                        const std::vector<std::string>& fallback) const {
  auto it = values_.find(option);
  if (it == values_.end()) return fallback;
  std::vector<std::string> out;
  std::stringstream ss(it->second);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<long long> Args::get_int_list(const std::string& option,
                                          const std::vector<long long>& fallback) const {
  if (!has(option)) return fallback;
  std::vector<long long> out;
  for (const auto& item : get_list(option, {})) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoll(item, &used));
      require(used == item.size(), "");
    } catch (...) {
      throw_error("option ", option, " needs comma-separated whole numbers; got '", item, "'");
    }
  }
  return out;
}

std::string Args::command_line() const {
  std::ostringstream os;
  for (std::size_t i = 0; i < argv_.size(); ++i) os << (i ? " " : "") << argv_[i];
  return os.str();
}

}  // namespace mdtp::cli
