// The input fuzz target's memory (issue 35 item 8): a long libFuzzer run of
// `input` grew to 1.27 GB. Is any of that the loader's? This replays the
// target's entry point (input_fuzz.cpp, built here without sanitizers or
// libFuzzer) over the example inputs and inputs nested to the depth bounds,
// round after round, each round with its own --set values (so a cache keyed
// by input text would grow too), and requires the heap in use after the
// last round to equal the heap after the first: nothing the loader keeps
// grows with the number of inputs it has read.
//
//   replay_memory DIR [ROUNDS]
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// structured.hpp's custom mutator calls libFuzzer's; never called here.
extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t*, std::size_t size, std::size_t) { return size; }

namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Slack for the C library's own bookkeeping between rounds (malloc's arena
// and stdio buffers), not for anything that grows with the rounds: 64 kB
// against ~30 inputs of up to 60 kB each per round.
constexpr std::size_t kSlackBytes = 64 * 1024;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: replay_memory DIR [ROUNDS]\n");
    return 2;
  }
  std::vector<std::string> inputs;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    if (e.path().extension() != ".yaml") continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    inputs.push_back(ss.str());
  }
  // The depth bounds (as scripts/fuzz.sh seeds them): 30 000 parentheses in
  // an equation, YAML nested 10 000 deep.
  inputs.push_back("model:\n  states: [x]\n  equations: {x: \"" + repeat("(", 30000) + "-x" +
                   repeat(")", 30000) + "\"}\ninitial_state: {x: 1}\ntime: {end: 1}\n");
  inputs.push_back("model: lotka_volterra\ndescription: " + repeat("[", 10000) + repeat("]", 10000) + "\n");
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 4;
  std::size_t first = 0, last = 0;
  for (int r = 0; r < rounds; ++r) {
    for (const std::string& in : inputs) {
      const std::string text = in + "\n--set time.end=" + std::to_string(1.0 + 1e-3 * r) + "\n";
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    }
    const std::size_t used = mallinfo2().uordblks;
    std::printf("round %d: %zu inputs, heap in use %zu bytes\n", r, inputs.size(), used);
    if (r == 0) first = used;
    last = used;
  }
  if (inputs.size() < 3) {
    std::fprintf(stderr, "replay_memory: no .yaml inputs in %s\n", argv[1]);
    return 1;
  }
  if (last > first + kSlackBytes) {
    std::fprintf(stderr, "replay_memory: the heap grew from %zu to %zu bytes over %d rounds\n", first,
                 last, rounds);
    return 1;
  }
  std::printf("replay_memory: heap after round 1 %zu, after round %d %zu bytes: no growth\n", first,
              rounds, last);
  return 0;
}
