#pragma once
// io::load_run_config and io::load_pde_config from YAML text instead of a
// file (the Python module's costate.load(dict)); the same validation and the
// same error messages.

#include <string>
#include <vector>

#include "costate/io/input.hpp"

namespace costate::io {

/// load_run_config on `text`; `path` names it in errors ("<dict>:3:12: …")
/// and relative data files are found from its directory (the working
/// directory when `path` has none).
RunConfig load_run_config_text(const std::string& text, const std::string& path,
                               const std::vector<std::string>& overrides = {});

struct PdeConfig;  // pde_input.hpp

/// load_pde_config on `text` (a map with a `pde:` section); `path` names it
/// in errors.
PdeConfig load_pde_config_text(const std::string& text, const std::string& path,
                               const std::vector<std::string>& overrides = {});

}  // namespace costate::io
