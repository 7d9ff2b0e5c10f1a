#pragma once
// Where the PEtab tests find their data: COSTATE_PETAB_DIR (the CMake
// variable, or the environment variable of that name, which overrides it)
// holds test-suite-v1/ and benchmark/ (../shared/petab; read from there,
// never copied into the repository). Tests skip with a message naming the
// folder when it is absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace costate::test {

inline std::filesystem::path petab_dir() {
  if (const char* env = std::getenv("COSTATE_PETAB_DIR")) return std::filesystem::path(env);
  return std::filesystem::path(COSTATE_PETAB_DIR);
}

/// The problem file of a case or model folder: its one .yaml that is not a
/// solution.
inline std::filesystem::path petab_problem_yaml(const std::filesystem::path& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.path().extension() == ".yaml" && n.find("solution") == std::string::npos) return e.path();
  }
  ADD_FAILURE() << "no problem .yaml in " << dir;
  return {};
}

}  // namespace costate::test

/// Skips the test when COSTATE_PETAB_DIR/sub is not a folder.
#define COSTATE_REQUIRE_PETAB(sub)                                                                      \
  if (!std::filesystem::is_directory(costate::test::petab_dir() / (sub)))                               \
  GTEST_SKIP() << "PEtab data not found at " << (costate::test::petab_dir() / (sub)).string()          \
               << " (configure with -DCOSTATE_PETAB_DIR=<folder with test-suite-v1/ and benchmark/>)"
