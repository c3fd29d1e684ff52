#include "cli/options.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "comm/collective_watchdog.hpp"
#include "mdtp/build_info.hpp"

namespace mdtp::cli {

CLI::App* add_command(CLI::App& root, const std::string& name, const std::string& summary) {
  CLI::App* app = root.add_subcommand(name, summary);
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return app;
}

namespace {

std::string number_text(double v) { return fmt::format("{:g}", v); }

}  // namespace

CLI::Validator at_least(double min) {
  return CLI::Validator(
      [min](std::string& text) {
        if (std::strtod(text.c_str(), nullptr) >= min) return std::string();
        return fmt::format("must be >= {}; got {}", number_text(min), text);
      },
      "");
}

CLI::Validator between(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        const double v = std::strtod(text.c_str(), nullptr);
        return v >= min && v <= max
                   ? std::string()
                   : fmt::format("must be between {} and {}; got {}", number_text(min), number_text(max), text);
      },
      "");
}

CLI::Validator byte_count() {
  return CLI::Validator(
      [](std::string& text) {
        std::string digits = text;
        long long scale = 1;
        if (!digits.empty()) {
          switch (digits.back()) {
            case 'K': case 'k': scale = 1ll << 10; break;
            case 'M': case 'm': scale = 1ll << 20; break;
            case 'G': case 'g': scale = 1ll << 30; break;
            default: break;
          }
          if (scale != 1) digits.pop_back();
        }
        long long value = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value <= 0 ||
            value > std::numeric_limits<long long>::max() / scale)
          return fmt::format("needs a positive byte count like 4096, 64K or 16M; got '{}'", text);
        text = std::to_string(value * scale);
        return std::string();
      },
      "");
}

CLI::Validator one_of(std::vector<std::string> words) {
  return CLI::Validator(
      [words](std::string& text) {
        for (const auto& w : words)
          if (text == w) return std::string();
        return fmt::format("expected one of {}; got '{}'", fmt::join(words, ", "), text);
      },
      "");
}

CLI::Option* add_tp_mode(CLI::App& app, const std::string& name, TpMode& target, const std::string& help) {
  return add_parsed(app, name, target, parse_tp_mode, tp_mode_name(target), help + " (" + tp_mode_list() + ")")
      ->type_name("MODE");
}

CLI::Option* add_dtype(CLI::App& app, const std::string& name, DType& target, const std::string& help) {
  return add_parsed(app, name, target, parse_dtype, dtype_name(target), help)->type_name("DTYPE");
}

CLI::Option* add_collective_timeout(CLI::App& app) {
  CLI::Option* option = app.add_option_function<std::string>(
      "--collective-timeout",
      [](const std::string& text) {
        try {
          parse_collective_timeout(text);
        } catch (const Error& e) {
          throw CLI::ValidationError("--collective-timeout", e.what());
        }
        setenv("MDTP_COLLECTIVE_TIMEOUT", text.c_str(), 1);
      },
      fmt::format("Seconds any rank waits for a collective before it names the wait and aborts the job; 0: no "
                  "limit (default $MDTP_COLLECTIVE_TIMEOUT, else {:g})",
                  kDefaultCollectiveTimeout));
  option->type_name("SECONDS");
  return option;
}

std::string version_line() {
  return fmt::format("mdtp {} (git {}, {} build, {})", build_info::version, build_info::git_commit,
                     build_info::build_type, build_info::compiler);
}

}  // namespace mdtp::cli
