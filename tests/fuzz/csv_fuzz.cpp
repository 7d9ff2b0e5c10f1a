// libFuzzer target: the CSV data reader (costate::io::read_csv_data), as
// used by objective.data and calibration.data. Input: the file's bytes.
// Accepted data must be consistent: ascending finite times, a times × states
// matrix.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/io/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/costate_csv_fuzz_" + std::to_string(::getpid()) + ".csv";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  const std::vector<std::string> states{"x", "y", "z"};
  std::vector<double> times, values;
  try {
    costate::io::read_csv_data(path, states, times, values);
  } catch (const costate::Error&) {
    return 0;
  }
  if (values.size() != times.size() * states.size()) __builtin_trap();
  for (std::size_t k = 0; k < times.size(); ++k) {
    if (!std::isfinite(times[k])) __builtin_trap();
    if (k > 0 && !(times[k] > times[k - 1])) __builtin_trap();
  }
  return 0;
}
