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

void print_json(const io::FileGradientCheck& check) {
  const auto& [names, x, grad, J0, taylor, fd, passed] = check;
  Json j;
  j["status"] = passed ? "ok" : "failed";
  j["objective"] = J0;
  j["taylor"] = {{"steps", taylor.steps},         {"residuals", taylor.residuals},
                 {"orders", taylor.orders},       {"min_order", taylor.min_order},
                 {"passed", taylor.passed}};
  Json comps = Json::object();
  for (std::size_t i = 0; i < x.size(); ++i) comps[names[i]] = {{"adjoint", grad[i]}, {"fd", fd.fd[i]}};
  j["finite_differences"] = {{"components", comps}, {"max_rel_error", fd.max_rel_error}, {"passed", fd.passed}};
  std::cout << j.dump() << std::endl;
}

void print_text(const io::FileGradientCheck& check) {
  const auto& [names, x, grad, J0, taylor, fd, passed] = check;
  std::ostringstream os;
  os << "Taylor test along a fixed direction (|J(x+hd) - J(x) - h<grad J, d>| should fall like h^2):\n"
     << taylor.report() << "\n\nCentral differences (initial values given as expressions of the "
     << "parameters are checked through them):\n";
  os.precision(12);
  os << "  " << std::left << std::setw(14) << "" << std::setw(22) << "adjoint" << "central difference\n";
  for (std::size_t i = 0; i < x.size(); ++i)
    os << "  " << std::left << std::setw(14) << names[i] << std::setw(22) << grad[i] << fd.fd[i] << "\n";
  os << fd.report() << "\n" << (passed ? "gradcheck: passed\n" : "gradcheck: FAILED\n");
  std::cout << os.str();
}

}  // namespace

int gradcheck_command(const Environment& env, const CommandArgs& args) {
  if (is_pde_input(args.input)) return pde(env, args, "gradcheck");
  // The Taylor test and central differences at x = (p, free y0), steps
  // frozen; for a PEtab problem of llh at the nominal values (docs/petab.md).
  const io::FileGradientCheck check =
      is_petab_input(args.input) ? petab_gradient_check(env, args)
                                 : io::file_gradient_check(load_with_objective(env, args, "gradcheck"));
  if (!env.is_root()) return check.passed ? 0 : 1;
  if (args.json)
    print_json(check);
  else
    print_text(check);
  return check.passed ? 0 : 1;
}

}  // namespace costate::cli
