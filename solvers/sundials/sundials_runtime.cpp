#include "sundials/sundials_runtime.hpp"

#include <sundials/sundials_config.h>
#include <sundials/sundials_version.h>

namespace costate::detail {

std::string sundials_version() {
  char buffer[64] = {};
  SUNDIALSGetVersion(buffer, sizeof(buffer));
  return buffer;
}

}  // namespace costate::detail
