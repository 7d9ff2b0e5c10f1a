#pragma once
// Moved to include/costate/io/input_text.hpp (public); this forwarder keeps other
// branches of the 2026-12-01 session compiling and is removed after their merge.
#include "costate/io/input_text.hpp"
