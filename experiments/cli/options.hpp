#pragma once
// What the `mdtp` subcommands share: how a subcommand registers itself (Command) and typed
// options on CLI11 whose bad values are refused while parsing, before MPI starts, with one line
// naming the option and the value (`--tp: needs a whole number; got 'abc'`).
//
// Numbers are checked and rewritten to plain decimal by a transform before CLI11 converts them,
// so "010" is ten (not octal) and "1e3" is refused where a whole number is needed.  Names that
// mdtp parses itself (--tp-mode, --dtype, ...) are parsed once, by mdtp's own parser, into their
// enum; its message is the option's error.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "mesh/tp_mode.hpp"

namespace mdtp::cli {

// One subcommand: its CLI11 app (owned by the root app) and what runs once it has parsed.
// `command_line` is the invocation as typed ("mdtp bench --modes all ..."), for provenance.
struct Command {
  CLI::App* app = nullptr;
  bool needs_mpi = false;  // main initialises MPI before `run` and finalises it after
  std::function<int(const std::string& command_line)> run;
};

// A subcommand with mdtp's conventions: a repeated option takes its last value.
CLI::App* add_command(CLI::App& root, const std::string& name, const std::string& summary);

namespace detail {

// "" when `text` holds a T; else what is wrong with it.  `text` is rewritten to canonical form.
template <class T>
std::string parse_number(std::string& text) {
  if constexpr (std::is_integral_v<T>) {
    std::string_view digits = text;
    if (digits.size() > 1 && digits.front() == '+') digits.remove_prefix(1);
    T value{};
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    const bool whole = ec != std::errc::invalid_argument && end == digits.data() + digits.size();
    const char* kind = std::is_signed_v<T> ? "a whole number" : "a whole number >= 0";
    if (!whole) return "needs " + std::string(kind) + "; got '" + text + "'";
    if (ec == std::errc::result_out_of_range)
      return "needs " + std::string(kind) + " up to " + std::to_string(std::numeric_limits<T>::max()) + "; got '" +
             text + "'";
    text = std::to_string(value);
    return "";
  } else {
    static_assert(std::is_floating_point_v<T>);
    char* end = nullptr;
    const double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
      return "needs a finite number; got '" + text + "'";
    return "";
  }
}

template <class T>
struct element {
  using type = T;
};
template <class T>
struct element<std::vector<T>> {
  using type = T;
};

}  // namespace detail

// The transform that checks (and canonicalises) one number of type T.
template <class T>
CLI::Validator number() {
  return CLI::Validator([](std::string& text) { return detail::parse_number<T>(text); }, "");
}

// Checks on a number already known to be one: its range.
CLI::Validator at_least(double min);
CLI::Validator between(double min, double max);
// A byte count with an optional K, M or G suffix (powers of 1024), > 0; rewritten to bytes.
CLI::Validator byte_count();
// One of a fixed set of words.
CLI::Validator one_of(std::vector<std::string> words);

// An option bound to `target` (a number, a string, or a vector of them given as "a,b,c"), shown
// in --help with its default.
template <class T>
CLI::Option* add(CLI::App& app, const std::string& name, T& target, const std::string& help) {
  CLI::Option* option = app.add_option(name, target, help);
  using E = typename detail::element<T>::type;
  if constexpr (!std::is_same_v<T, E>) option->delimiter(',');
  if constexpr (std::is_arithmetic_v<E>) option->transform(number<E>());
  if constexpr (std::is_arithmetic_v<T>) option->capture_default_str();
  if constexpr (std::is_same_v<T, std::string>)
    if (!target.empty()) option->capture_default_str();
  return option;
}

// An option with no fixed default (one derived from other options): `target` stays empty unless
// it is given.
template <class T>
CLI::Option* add(CLI::App& app, const std::string& name, std::optional<T>& target, const std::string& help) {
  CLI::Option* option = app.add_option_function<T>(name, [&target](const T& value) { target = value; }, help);
  if constexpr (std::is_arithmetic_v<T>) option->transform(number<T>());
  return option;
}

// An option whose value mdtp parses itself into `target` (an enum) with `parse`, which throws an
// mdtp::Error naming the value and what is accepted.  `shown` is the default for --help.
template <class T, class Parse>
CLI::Option* add_parsed(CLI::App& app, const std::string& name, T& target, Parse parse, const std::string& shown,
                        const std::string& help) {
  CLI::Option* option = app.add_option_function<std::string>(
      name,
      [&target, parse, name](const std::string& text) {
        try {
          target = parse(text);
        } catch (const Error& e) {
          throw CLI::ValidationError(name, e.what());
        }
      },
      help);
  if (!shown.empty()) option->default_str(shown);
  return option;
}

// A comma-separated list parsed item by item into `target` with `parse`; the single word "all"
// leaves `target` as it is (a default that means all).
template <class T, class Parse>
CLI::Option* add_parsed_list(CLI::App& app, const std::string& name, std::vector<T>& target, Parse parse,
                             const std::string& help) {
  CLI::Option* option = app.add_option_function<std::vector<std::string>>(
      name,
      [&target, parse, name](const std::vector<std::string>& items) {
        if (items.size() == 1 && items[0] == "all") return;
        if (items.empty()) throw CLI::ValidationError(name, "needs at least one name, or all");
        std::vector<T> parsed;
        for (const auto& item : items) {
          try {
            parsed.push_back(parse(item));
          } catch (const Error& e) {
            throw CLI::ValidationError(name, e.what());
          }
        }
        target = std::move(parsed);
      },
      help);
  option->delimiter(',')->default_str("all")->type_name("LIST");
  return option;
}

// --tp-mode and --dtype style options, parsed by mdtp::parse_tp_mode and mdtp::parse_dtype.
CLI::Option* add_tp_mode(CLI::App& app, const std::string& name, TpMode& target, const std::string& help);
CLI::Option* add_dtype(CLI::App& app, const std::string& name, DType& target, const std::string& help);

// --collective-timeout SECONDS on a command that runs collectives: the deadline of every blocking
// wait (comm/collective_watchdog.hpp).  The value is checked while parsing and handed to the
// communication layer as MDTP_COLLECTIVE_TIMEOUT (set before MPI starts; ranks started by
// `mdtp experiment` inherit it), so the option and the variable are one setting.
CLI::Option* add_collective_timeout(CLI::App& app);

// `mdtp --version`: the version, the git commit and the build it comes from.
std::string version_line();

}  // namespace mdtp::cli
