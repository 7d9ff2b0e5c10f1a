#pragma once
/// \file
/// costate::Error and the always-on check macros.
///
/// A failed check throws costate::Error carrying the condition text, the
/// values involved (doubles printed with 16 significant digits) and the
/// source location. Checks are for caller mistakes and bad input; they are
/// never compiled out. Numerical outcomes (a step size underflow, a
/// non-converged solve) are returned as data in a summary, not thrown.
/// Kernels never throw.

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace costate {

/// The one exception type costate throws.
class Error : public std::runtime_error {
 public:
  /// `message` is the full, human-readable text (what() returns it).
  explicit Error(const std::string& message, std::string condition = {},
                 std::string file = {}, int line = 0)
      : std::runtime_error(message),
        condition_(std::move(condition)),
        file_(std::move(file)),
        line_(line) {}

  /// The condition that failed ("rtol > 0"), empty for a plain error.
  const std::string& condition() const noexcept { return condition_; }
  /// Source file and line that raised the error (empty/0 when not a check).
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string condition_;
  std::string file_;
  int line_;
};

namespace detail {

/// Prints a value for an error message: floating point with 16 significant
/// digits, everything else with operator<<.
template <class T>
std::string format_value(const T& value) {
  std::ostringstream os;
  if constexpr (std::is_floating_point_v<T>) {
    os.precision(16);
    os << value;
  } else if constexpr (std::is_same_v<T, bool>) {
    os << (value ? "true" : "false");
  } else {
    os << value;
  }
  return os.str();
}

/// `message` as a user reads it: every "[check failed: CONDITION at
/// FILE:LINE]" report a check appended (also inside messages that wrap
/// another) is removed; a message that was only such a report becomes "an
/// internal check failed". The command line prints this; the full text is
/// its --debug trace.
std::string user_message(const std::string& message);

[[noreturn]] void throw_check_failure(const char* condition, const char* file, int line,
                                      const std::string& values, const std::string& message);

}  // namespace detail
}  // namespace costate

/// COSTATE_CHECK(cond, message-stream): throws costate::Error when `cond` is
/// false. The message may use <<: COSTATE_CHECK(n > 0, "n = " << n).
#define COSTATE_CHECK(cond, msg)                                                       \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::ostringstream costate_check_os_;                                            \
      costate_check_os_ << msg;                                                        \
      ::costate::detail::throw_check_failure(#cond, __FILE__, __LINE__, std::string{}, \
                                             costate_check_os_.str());                 \
    }                                                                                  \
  } while (false)

#define COSTATE_CHECK_OP_(a, op, b, msg)                                                  \
  do {                                                                                    \
    const auto& costate_check_a_ = (a);                                                   \
    const auto& costate_check_b_ = (b);                                                   \
    if (!(costate_check_a_ op costate_check_b_)) {                                        \
      std::ostringstream costate_check_os_;                                               \
      costate_check_os_ << msg;                                                           \
      ::costate::detail::throw_check_failure(                                             \
          #a " " #op " " #b, __FILE__, __LINE__,                                          \
          std::string(#a " = ") + ::costate::detail::format_value(costate_check_a_) +     \
              ", " #b " = " + ::costate::detail::format_value(costate_check_b_),          \
          costate_check_os_.str());                                                       \
    }                                                                                     \
  } while (false)

/// Comparison checks that also print both operands' values.
#define COSTATE_CHECK_EQ(a, b, msg) COSTATE_CHECK_OP_(a, ==, b, msg)
#define COSTATE_CHECK_NE(a, b, msg) COSTATE_CHECK_OP_(a, !=, b, msg)
#define COSTATE_CHECK_LT(a, b, msg) COSTATE_CHECK_OP_(a, <, b, msg)
#define COSTATE_CHECK_LE(a, b, msg) COSTATE_CHECK_OP_(a, <=, b, msg)
#define COSTATE_CHECK_GT(a, b, msg) COSTATE_CHECK_OP_(a, >, b, msg)
#define COSTATE_CHECK_GE(a, b, msg) COSTATE_CHECK_OP_(a, >=, b, msg)
