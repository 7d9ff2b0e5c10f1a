// optimize::TaoMethod's names, TaoOptions::validate and TaoResult's report:
// the PETSc-free half of optimize/tao.hpp, compiled into libcostate so that
// input files and reports use them without loading PETSc (the minimiser,
// tao_minimize.cpp, is in the PETSc module: petsc/module.hpp).
#include <cmath>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/optimize/tao.hpp"

namespace costate::optimize {

std::string to_string(TaoMethod m) {
  switch (m) {
    case TaoMethod::Bqnls: return "bqnls";
    case TaoMethod::Blmvm: return "blmvm";
    case TaoMethod::Bnls: return "bnls";
    case TaoMethod::Bntr: return "bntr";
  }
  return "unknown";
}

std::vector<TaoMethod> all_tao_methods() {
  return {TaoMethod::Bqnls, TaoMethod::Blmvm, TaoMethod::Bnls, TaoMethod::Bntr};
}

TaoMethod tao_method_from_string(const std::string& name) {
  std::string valid;
  for (TaoMethod m : all_tao_methods()) {
    if (to_string(m) == name) return m;
    valid += (valid.empty() ? "" : ", ") + to_string(m);
  }
  throw Error("unknown optimizer '" + name + "'; valid: " + valid);
}

bool uses_hessian(TaoMethod m) { return m == TaoMethod::Bnls || m == TaoMethod::Bntr; }

void TaoOptions::validate() const {
  COSTATE_CHECK(gatol >= 0.0 && std::isfinite(gatol), "TaoOptions::gatol = " << gatol << " must be >= 0");
  COSTATE_CHECK(grtol >= 0.0 && std::isfinite(grtol), "TaoOptions::grtol = " << grtol << " must be >= 0");
  COSTATE_CHECK(gttol >= 0.0 && std::isfinite(gttol), "TaoOptions::gttol = " << gttol << " must be >= 0");
  COSTATE_CHECK(max_iterations >= 0, "TaoOptions::max_iterations = " << max_iterations << " must be >= 0");
  COSTATE_CHECK(max_function_evaluations > 0,
                "TaoOptions::max_function_evaluations = " << max_function_evaluations << " must be > 0");
}

std::string TaoResult::brief_report() const {
  std::ostringstream os;
  os.precision(6);
  os << "TAO " << method << ": " << termination << " after " << iterations << " iterations ("
     << function_evaluations << " objective+gradient, " << hessian_evaluations
     << " Hessian evaluations), f = " << objective << ", |g| = " << gradient_norm;
  if (non_finite_evaluations > 0)
    os << "; " << non_finite_evaluations << " trial points had no finite objective";
  return os.str();
}
}  // namespace costate::optimize
