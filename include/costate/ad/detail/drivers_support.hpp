#pragma once
// Internals of the reverse-mode drivers (drivers.hpp, verification.hpp): the
// nested tape section every reverse-mode driver records in. Not a public
// header of its own.

#include <cstddef>
#include <vector>

#include "costate/ad/detail/drivers_outputs.hpp"
#include "costate/ad/reverse.hpp"

namespace costate::ad::detail {

/// One reverse-mode driver's recording on this thread's tape, nested after
/// whatever the tape already holds.
///
/// On entry: remembers the tape's position and whether it was recording, and
/// starts recording. evaluate() sweeps only the statements recorded since.
/// On exit (also by exception): reset(position) forgets those statements
/// and zeroes their adjoints, and the recording flag is restored — so the
/// tape is left exactly as it was found (an empty tape stays empty; a
/// user's recording, in progress or stopped, is untouched).
template <class T>
class TapeSection {
 public:
  explicit TapeSection(BasicTape<T>& tape)
      : tape_(tape), start_(tape.position()), was_recording_(tape.is_recording()) {
    tape_.start_recording();
  }
  TapeSection(const TapeSection&) = delete;
  TapeSection& operator=(const TapeSection&) = delete;
  ~TapeSection() {
    // A callable that reset the tape itself has already discarded what was
    // there before; then only a full reset leaves a clean tape.
    if (tape_.tag() == start_.tag)
      tape_.reset(start_);
    else
      tape_.reset();
    if (was_recording_)
      tape_.start_recording();
    else
      tape_.stop_recording();
  }

  BasicTape<T>& tape() { return tape_; }
  const Position& start() const { return start_; }

  /// Registers a copy of every value of x as an input of the recording.
  template <class Value>
  std::vector<Reverse<T>> register_inputs(const std::vector<Value>& x) {
    std::vector<Reverse<T>> xr;
    xr.reserve(x.size());
    for (const Value& v : x) {
      xr.emplace_back(T(v));
      tape_.register_input(xr.back());
    }
    return xr;
  }

  /// Reverse sweep over this section's statements (not the ones before it).
  void evaluate() { tape_.evaluate(tape_.position(), start_); }
  void evaluate(const Position& end) { tape_.evaluate(end, start_); }

 private:
  BasicTape<T>& tape_;
  Position start_;
  bool was_recording_;
};

}  // namespace costate::ad::detail
