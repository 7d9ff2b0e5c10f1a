// libFuzzer target: the YAML input loader — ODE inputs (load_run_config)
// and PDE inputs (load_pde_config) — with `--set` overrides. Input: lines
// starting with "--set " are overrides, the rest is the file. A loaded
// configuration is also written back as YAML (RunConfig::to_yaml) and
// re-read. Only costate::Error may come out.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "structured.hpp"
#include "costate/io/input.hpp"
#include "costate/io/pde_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = "/tmp/costate_input_fuzz_" + std::to_string(::getpid());
  static const bool made = [] {
    std::string cmd = "mkdir -p " + dir;
    return std::system(cmd.c_str()) == 0;
  }();
  (void)made;
  const std::string path = dir + "/in.yaml";
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string text, line;
  std::vector<std::string> sets;
  while (std::getline(in, line)) {
    if (line.rfind("--set ", 0) == 0)
      sets.push_back(line.substr(6));
    else
      text += line + "\n";
  }
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  try {
    if (costate::io::is_pde_input(path)) {
      const costate::io::PdeConfig cfg = costate::io::load_pde_config(path, sets);
      (void)cfg.to_yaml();
    } else {
      const costate::io::RunConfig cfg = costate::io::load_run_config(path, sets);
      (void)cfg.to_yaml();
    }
  } catch (const costate::Error&) {
  }
  return 0;
}

// Structure-aware mutations (structured.hpp): grammar-built inputs and
// nesting to 10⁵ levels, beside libFuzzer's byte mutations.
extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                              unsigned int seed) {
  return costate::fuzz::mutate(costate::fuzz::Grammar::Input, data, size, max_size, seed);
}
