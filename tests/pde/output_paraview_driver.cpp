// Writes the files scripts/check-paraview.py opens in ParaView: for each of
// 1-D, 2-D and 3-D a non-square grid with a non-zero origin and a different
// spacing per axis, three frames of a two-component state with known values
// at the cell centres, and two static fields. Not a test (ParaView is not a
// CI dependency); built with `--target pde_output_paraview_driver`.
//
//   mpiexec -n R pde_output_paraview_driver DIR
// writes DIR/pv_<dim>d_np<R>.h5 and .xmf, and DIR/pv_static_3d_np<R>.h5/.xmf
// (the 3-D static fields only: one uniform grid, no time). The script holds the same cases
// (keep them in sync):
//   1-D: 12 cells on [-1, 1]                      (y, z: the default [0, 1])
//   2-D: 12 x 7 cells on [-1, 1] x [0.5, 1.5]      (z: [0, 1])
//   3-D: 6 x 5 x 4 cells on [-1, 1] x [0.5, 1.5] x [2, 3.2]
//   frames at t = 0, 0.25, 0.6:  u = x + 10 y + 100 z + 1000 t,
//                                v = x y - z + t
//   static fields: kappa = 1 + x - 2 y + 3 z (one component),
//                  grad (components a, b) = (x - y, y + z)
#include <cstdio>
#include <string>
#include <vector>

#include "costate/core/environment.hpp"
#include "costate/core/error.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/output.hpp"

using namespace costate;

namespace {

pde::GridSpec spec_of(int dim, int dof) {
  pde::GridSpec s;
  s.dim = dim;
  if (dim == 1) s.cells = {12, 1, 1};
  if (dim == 2) s.cells = {12, 7, 1};
  if (dim == 3) s.cells = {6, 5, 4};
  s.extent[0] = {-1.0, 1.0};
  if (dim >= 2) s.extent[1] = {0.5, 1.5};
  if (dim == 3) s.extent[2] = {2.0, 3.2};
  s.boundary = {pde::Boundary::Neumann, pde::Boundary::Neumann, pde::Boundary::Neumann};
  s.dof = dof;
  return s;
}

/// The natural-order field (component fastest, then x, y, z) of f(c, x, y, z).
template <class F>
std::vector<double> sample(const pde::Grid& g, F f) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(g.global_size()));
  for (std::int64_t k = 0; k < g.cells(2); ++k)
    for (std::int64_t j = 0; j < g.cells(1); ++j)
      for (std::int64_t i = 0; i < g.cells(0); ++i)
        for (int c = 0; c < g.dof(); ++c)
          v.push_back(f(c, g.coordinate(0, i), g.coordinate(1, j), g.coordinate(2, k)));
  return v;
}

void write_case(int dim, const std::string& dir, int ranks, bool with_frames) {
  pde::Grid g(MPI_COMM_WORLD, spec_of(dim, 2));
  pde::Grid g1(MPI_COMM_WORLD, spec_of(dim, 1));
  const std::string path = dir + (with_frames ? "/pv_" : "/pv_static_") + std::to_string(dim) + "d_np" +
                           std::to_string(ranks) + ".h5";
  pde::FieldWriter w(g, path, {"u", "v"});
  auto u = g.create_global();
  for (double t : with_frames ? std::vector<double>{0.0, 0.25, 0.6} : std::vector<double>{}) {
    g.scatter(sample(g,
                     [t](int c, double x, double y, double z) {
                       return c == 0 ? x + 10.0 * y + 100.0 * z + 1000.0 * t : x * y - z + t;
                     }),
              u);
    w.write_frame(t, u);
  }
  auto k = g1.create_global();
  g1.scatter(sample(g1, [](int, double x, double y, double z) { return 1.0 + x - 2.0 * y + 3.0 * z; }),
             k);
  w.write_field("kappa", g1, k, {"kappa"});
  w.write_field("grad", g, [&] {
    auto q = g.create_global();
    g.scatter(sample(g, [](int c, double x, double y, double z) { return c == 0 ? x - y : y + z; }), q);
    return q;
  }(), {"a", "b"});
  w.finish();
  if (g.rank() == 0) std::printf("wrote %s and %s\n", w.path().c_str(), w.xdmf_path().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Environment env(argc, argv);
  if (argc < 2) {
    if (env.rank() == 0) std::fprintf(stderr, "usage: pde_output_paraview_driver DIR\n");
    return 2;
  }
  int ranks = 1;
  MPI_Comm_size(env.comm(), &ranks);
  try {
    for (int dim = 1; dim <= 3; ++dim) write_case(dim, argv[1], ranks, true);
    write_case(3, argv[1], ranks, false);
  } catch (const Error& e) {
    std::fprintf(stderr, "pde_output_paraview_driver: %s\n", e.what());
    return 1;
  }
  return 0;
}
