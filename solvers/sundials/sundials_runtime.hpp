#pragma once
// Private: facts about the SUNDIALS build (only solvers/ includes its headers).
#include <string>

namespace costate::detail {
std::string sundials_version();
}  // namespace costate::detail
