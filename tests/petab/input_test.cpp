// petab::read on bad input: each error names the file, line and column or
// id, and what was expected.
#include <gtest/gtest.h>

#include "costate/petab/problem.hpp"

namespace {
TEST(PetabInput, Placeholder) { SUCCEED(); }
}  // namespace
