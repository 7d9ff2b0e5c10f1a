// The test executables' precompiled header (tests/CMakeLists.txt,
// COSTATE_TEST_PCH): what most test translation units include and what costs
// the most to parse — GoogleTest, the standard library, Kokkos through the
// ODE layer's public headers, nlohmann-json. Compiled once and force-included
// into every test TU; a test still includes what it uses (the header is
// optional, and the build without it is the check).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "costate/core/error.hpp"
#include "costate/ode/gradient.hpp"
#include "costate/ode/integrate.hpp"
#include "costate/ode/models.hpp"
