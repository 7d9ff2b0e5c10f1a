#include "costate/ad/tape.hpp"

#include <atomic>
#include <sstream>

namespace costate::ad {

namespace detail {
std::uint32_t next_tape_tag() {
  // 32 bits keep a Reverse<double> at 16 bytes. Tag 0 is never handed out;
  // a tag repeats only after 2^32 − 1 recordings.
  static std::atomic<std::uint32_t> counter{0};
  std::uint32_t t = ++counter;
  if (t == 0) t = ++counter;
  return t;
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
