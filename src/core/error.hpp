#pragma once
// mdtp::Error is the one exception type of the framework.  Messages name the offending value and
// what was expected ("2D tensor parallelism needs a square TP size; got tp=6"), because they are
// what a researcher sees on every rank when a configuration is refused.
#include <sstream>
#include <stdexcept>
#include <string>

namespace mdtp {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from streamable parts: throw_error("tp=", tp, " is not a square").
template <class... Parts>
[[noreturn]] void throw_error(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

template <class... Parts>
void require(bool condition, const Parts&... parts) {
  if (!condition) throw_error(parts...);
}

}  // namespace mdtp
