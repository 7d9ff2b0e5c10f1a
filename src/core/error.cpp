#include "costate/core/error.hpp"

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

}  // namespace costate::detail
