// `costate gradcheck FILE.yaml [--json] [--set key=value]... [-q]`: the
// Taylor test (observed order >= 1.9) and central differences of the
// gradient of the file's objective; exit status 1 when either fails.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "costate/io/file_gradient.hpp"
#include "pde_commands.hpp"
#include "petab_command.hpp"

namespace costate::cli {
namespace {

using Json = nlohmann::ordered_json;

void print_json(const io::FileGradientCheck& check, const std::vector<std::string>& warnings) {
  const ad::TaylorTestResult& taylor = check.taylor;
  const ad::GradientCheckResult& fd = check.fd;
  Json j;
  j["status"] = check.passed ? "ok" : "failed";
  j["objective"] = check.objective;
  j["taylor"] = {{"steps", taylor.steps},         {"residuals", taylor.residuals},
                 {"orders", taylor.orders},       {"min_order", taylor.min_order},
                 {"passed", taylor.passed}};
  Json comps = Json::object();
  std::vector<std::string> floor;
  for (std::size_t i = 0; i < check.x.size(); ++i) {
    const bool at_floor = i < fd.at_noise_floor.size() && fd.at_noise_floor[i];
    comps[check.names[i]] = {{"adjoint", check.gradient[i]}, {"fd", fd.fd[i]},
                             {"tolerance", fd.tolerance[i]}, {"at_noise_floor", at_floor}};
    if (at_floor) floor.push_back(check.names[i]);
  }
  j["finite_differences"] = {{"components", comps},
                             {"max_rel_error", fd.max_rel_error},
                             {"at_noise_floor", floor},
                             {"passed", fd.passed}};
  j["warnings"] = warnings;
  std::cout << j.dump() << std::endl;
}

void print_text(const io::FileGradientCheck& check, const std::vector<std::string>& warnings) {
  const ad::GradientCheckResult& fd = check.fd;
  std::ostringstream os;
  os << "Taylor test along a fixed direction (|J(x+hd) - J(x) - h<grad J, d>| should fall like h^2):\n"
     << check.taylor.report() << "\n\nCentral differences, Richardson-extrapolated, the step chosen "
     << "where they agree (initial values given as expressions of the parameters are checked "
     << "through them):\n";
  os.precision(12);
  os << "  " << std::left << std::setw(14) << "" << std::setw(22) << "adjoint" << "central difference\n";
  for (std::size_t i = 0; i < check.x.size(); ++i)
    os << "  " << std::left << std::setw(14) << check.names[i] << std::setw(22) << check.gradient[i]
       << fd.fd[i] << "\n";
  os << fd.report();
  const std::string floor = fd.noise_floor_names(check.names);
  if (!floor.empty()) os << "at the noise floor: " << floor << "\n";
  os << "\n" << (check.passed ? "gradcheck: passed\n" : "gradcheck: FAILED\n");
  os << warnings_text(warnings);
  std::cout << os.str();
}

}  // namespace

int gradcheck_command(const Environment& env, const CommandArgs& args) {
  if (is_pde_input(args.input)) return pde(env, args, "gradcheck");
  // The Taylor test and central differences at x = (p, free y0), steps
  // frozen; for a PEtab problem of llh at the nominal values (docs/petab.md).
  std::vector<std::string> warnings;
  io::FileGradientCheck check;
  if (is_petab_input(args.input)) {
    check = petab_gradient_check(env, args);
  } else {
    const io::RunConfig cfg = load_with_objective(env, args, "gradcheck");
    warnings = cfg.warnings;
    check = io::file_gradient_check(cfg);
  }
  add_integration_warnings(check.summary, warnings);
  if (!env.is_root()) return check.passed ? 0 : 1;
  if (args.json)
    print_json(check, warnings);
  else
    print_text(check, warnings);
  return check.passed ? 0 : 1;
}

}  // namespace costate::cli
