// Errors with context. Every failure a user can cause is reported as a
// deltafin::Error whose message names the file, field or request and what was
// wrong; code adds context as the error travels up (see with_context).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace deltafin {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// cat("a", 1, 'b') -> "a1b": the one string builder used for messages.
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

// Runs fn(); an Error thrown inside gets "context: " prepended.
template <typename Fn>
auto with_context(const std::string& context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(context + ": " + e.what());
  }
}

}  // namespace deltafin
