// The PETSc module's table (module.hpp) and libcostate's PETSc-backed entry
// points that go through it: optimize::minimize, nonlinear::detail::
// newton_snes. Compiled into libcostate; includes no PETSc header.
#include "petsc/module.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "costate/core/error.hpp"

namespace costate::detail {

namespace {

PetscModule g_module;
bool g_installed = false;
std::mutex g_mutex;

/// libcostate's own directory ("" when unknown).
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&install_petsc_module), &info) == 0 || info.dli_fname == nullptr)
    return "";
  const std::string path(info.dli_fname);
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// dlopen libcostate_petsc (its static initialiser installs the table);
/// dlerror's text when it cannot be loaded.
std::string load_module() {
  const std::string name = COSTATE_PETSC_MODULE_NAME;
  // A static build has no module file: the program links it or not at all.
  if (name.empty()) return "this is a static build (BUILD_SHARED_LIBS=OFF), whose program did not link it";
  std::string errors;
  const std::string dir = own_directory();
  for (const std::string& candidate : {dir.empty() ? name : dir + name, name}) {
    // RTLD_NODELETE: the table's function pointers stay valid until exit.
    if (dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE) != nullptr) return "";
    const char* e = dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (e != nullptr ? e : candidate);
  }
  return errors;
}

}  // namespace

void install_petsc_module(const PetscModule& module) {
  std::lock_guard lock(g_mutex);
  g_module = module;
  g_installed = true;
}

bool petsc_module_loaded() {
  std::lock_guard lock(g_mutex);
  return g_installed;
}

const PetscModule& petsc_module(const char* what) {
  if (petsc_module_loaded()) return g_module;
  const std::string errors = load_module();
  if (petsc_module_loaded()) return g_module;
  throw Error(std::string(what) + " needs costate's PETSc part (libcostate_petsc), which could not be loaded: " +
              (errors.empty() ? "it installed nothing" : errors) +
              "; link costate::costate_petsc (CMake), or run costate-petsc instead of costate");
}

}  // namespace costate::detail

namespace costate::optimize {

TaoResult minimize(const Objective& f, std::span<const double> x0, std::span<const double> lower,
                   std::span<const double> upper, const TaoOptions& options,
                   const std::function<void(const Iteration&)>& monitor) {
  return detail::petsc_module("optimize::minimize (PETSc TAO)")
      .minimize(f, x0, lower, upper, options, monitor);
}

}  // namespace costate::optimize

namespace costate::nonlinear::detail {

Summary newton_snes(const Problem& problem, std::vector<double>& x, const Options& options) {
  return costate::detail::petsc_module("nonlinear::solve with the petsc_snes backend")
      .newton_snes(problem, x, options);
}

}  // namespace costate::nonlinear::detail
