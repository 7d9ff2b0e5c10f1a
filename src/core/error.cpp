#include "costate/core/error.hpp"

#include <cctype>

namespace costate::detail {

void throw_check_failure(const char* condition, const char* file, int line,
                         const std::string& values, const std::string& message) {
  std::ostringstream text;
  text << (message.empty() ? std::string("check failed") : message) << " [check failed: "
       << condition;
  if (!values.empty()) text << " with " << values;
  text << " at " << file << ':' << line << ']';
  throw Error(text.str(), condition, file, line);
}

std::string user_message(const std::string& message) {
  static const std::string kOpen = " [check failed: ";
  std::string out = message;
  for (std::size_t start = out.find(kOpen); start != std::string::npos; start = out.find(kOpen, start)) {
    // The report ends at the first "]" right after ":<line digits>".
    std::size_t end = std::string::npos;
    for (std::size_t p = out.find(']', start); p != std::string::npos; p = out.find(']', p + 1)) {
      std::size_t d = p;
      while (d > start && std::isdigit(static_cast<unsigned char>(out[d - 1]))) --d;
      if (d < p && d > start && out[d - 1] == ':') {
        end = p;
        break;
      }
    }
    if (end == std::string::npos) break;
    out.erase(start, end + 1 - start);
  }
  // A check with no message of its own: say so without the internals.
  static const std::string kBare = "check failed";
  for (std::size_t at = out.find(kBare); at != std::string::npos; at = out.find(kBare, at + 1)) {
    const bool starts = at == 0 || out[at - 1] == ' ' || out[at - 1] == '(';
    const std::size_t after = at + kBare.size();
    const bool ends = after == out.size() || out[after] == ')' || out[after] == ';';
    if (starts && ends) {
      out.replace(at, kBare.size(), "an internal check failed (run with --debug for details)");
      break;
    }
  }
  return out;
}

}  // namespace costate::detail
