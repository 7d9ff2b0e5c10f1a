#include "costate/ad/tape.hpp"

#include <atomic>
#include <sstream>

namespace costate::ad {

namespace detail {
std::uint64_t next_tape_tag() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}
}  // namespace detail

std::string TapeStats::report() const {
  std::ostringstream os;
  os << statements << " statements, " << arguments << " arguments, " << externals
     << " external functions, " << identifiers << " identifiers; " << bytes / 1.0e6
     << " MB recorded (" << reserved_bytes / 1.0e6 << " MB held)";
  return os.str();
}

}  // namespace costate::ad
