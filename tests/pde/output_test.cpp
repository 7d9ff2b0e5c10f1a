// pde::FieldWriter: parallel HDF5 + XDMF output. Frames, static fields and
// arrays written on 1, 2 and 4 ranks are read back with the HDF5 C API and
// compared bit for bit with Grid::gather; the XDMF sidecar's dataset
// references, dimensions and times are checked against the .h5; the
// partial/complete status; bad arguments fail on every rank.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "costate/pde/models.hpp"
#include "costate/pde/output.hpp"
#include "costate/pde/theta.hpp"

using namespace costate;
using costate::pde::Boundary;

namespace {

/// Removes the scratch directory at exit (rank 0; every rank has passed the
/// final collective of main() by then).
struct Scratch {
  std::string dir;
  bool owner = false;
  ~Scratch() {
    std::error_code ec;
    if (owner) std::filesystem::remove_all(dir, ec);
  }
};

/// A directory shared by all ranks (rank 0's pid), removed at exit.
std::string shared_dir() {
  static Scratch scratch;
  static std::string dir = [] {
    int pid = static_cast<int>(getpid());
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    auto d = std::filesystem::temp_directory_path() / ("costate_output_test_" + std::to_string(pid));
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::filesystem::create_directories(d);
    scratch.dir = d.string();
    scratch.owner = rank == 0;
    MPI_Barrier(MPI_COMM_WORLD);
    return d.string();
  }();
  return dir;
}

pde::GridSpec spec_of(int dim, int dof) {
  pde::GridSpec s;
  s.dim = dim;
  s.cells = {dim == 1 ? 29 : 13, dim >= 2 ? 11 : 1, dim == 3 ? 7 : 1};
  s.extent = {{{-1.0, 2.0}, {0.5, 1.5}, {0.0, 0.7}}};
  s.boundary = {Boundary::Dirichlet, Boundary::Periodic, Boundary::Neumann};
  s.dof = dof;
  return s;
}

std::vector<double> field(const pde::Grid& g, double salt) {
  std::vector<double> v(static_cast<std::size_t>(g.global_size()));
  for (std::size_t e = 0; e < v.size(); ++e) v[e] = std::sin(1.37 * static_cast<double>(e) + salt) * (1.0 + salt);
  return v;
}

/// A dataset read back whole, with its dimensions.
struct Data {
  std::vector<hsize_t> dims;
  std::vector<double> values;
};

Data read_dataset(hid_t file, const std::string& path) {
  Data d;
  hid_t ds = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  EXPECT_GE(ds, 0) << path;
  if (ds < 0) return d;
  hid_t sp = H5Dget_space(ds);
  const int rank = H5Sget_simple_extent_ndims(sp);
  d.dims.resize(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(sp, d.dims.data(), nullptr);
  hsize_t n = 1;
  for (hsize_t e : d.dims) n *= e;
  d.values.resize(n);
  if (n) {
    EXPECT_GE(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.values.data()), 0);
  }
  H5Sclose(sp);
  H5Dclose(ds);
  return d;
}

std::string read_string_attribute(hid_t loc, const char* name) {
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return "<missing>";
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char* s = nullptr;
  H5Aread(a, t, &s);
  std::string out = s ? s : "";
  H5free_memory(s);
  H5Tclose(t);
  H5Aclose(a);
  return out;
}

/// Component c of a natural-order field (dof interleaved) — the layout a
/// (z, y, x) dataset of that component must hold.
std::vector<double> component(const std::vector<double>& natural, int dof, int c) {
  std::vector<double> out;
  for (std::size_t e = static_cast<std::size_t>(c); e < natural.size(); e += static_cast<std::size_t>(dof))
    out.push_back(natural[e]);
  return out;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  // memcmp's pointers must not be null even for 0 bytes (an empty vector's
  // data() may be: UBSan reports it).
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

/// Every HDF dataset reference of the sidecar: must exist in `file` with
/// the dimensions the XML states. Returns the number of references.
std::size_t check_xdmf(const std::string& xmf, hid_t file, const std::string& h5name,
                       const pde::Grid& g, const std::vector<double>& times,
                       std::size_t attributes_per_grid) {
  std::ifstream in(xmf);
  EXPECT_TRUE(in.good()) << xmf;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_NE(text.find("<Xdmf Version=\"3.0\""), std::string::npos);
  const std::string cells = std::to_string(g.cells(2)) + " " + std::to_string(g.cells(1)) + " " +
                            std::to_string(g.cells(0));
  const std::string nodes = std::to_string(g.cells(2) + 1) + " " + std::to_string(g.cells(1) + 1) + " " +
                            std::to_string(g.cells(0) + 1);
  // Heavy data references.
  const std::regex item(R"re(<DataItem Dimensions="([0-9 ]+)" NumberType="Float" Precision="8" Format="HDF">([^:<]+):([^<]+)</DataItem>)re");
  std::size_t refs = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), item); it != std::sregex_iterator(); ++it) {
    ++refs;
    const auto& m = *it;
    EXPECT_EQ(m[1].str(), cells);
    EXPECT_EQ(m[2].str(), h5name);
    const std::string path = m[3].str();
    EXPECT_GT(H5Lexists(file, path.c_str(), H5P_DEFAULT), 0) << path;
    const Data d = read_dataset(file, path);
    EXPECT_EQ(d.dims, (std::vector<hsize_t>{static_cast<hsize_t>(g.cells(2)), static_cast<hsize_t>(g.cells(1)),
                                            static_cast<hsize_t>(g.cells(0))}))
        << path;
  }
  // Topology, geometry, times.
  const std::regex topo(R"re(<Topology TopologyType="3DCoRectMesh" Dimensions="([0-9 ]+)"/>)re");
  std::size_t grids = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), topo); it != std::sregex_iterator(); ++it) {
    ++grids;
    EXPECT_EQ((*it)[1].str(), nodes);
  }
  EXPECT_EQ(grids, std::max<std::size_t>(times.size(), 1));
  EXPECT_EQ(refs, grids * attributes_per_grid);
  const std::regex time(R"re(<Time Value="([^"]+)"/>)re");
  std::vector<double> xml_times;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), time); it != std::sregex_iterator(); ++it)
    xml_times.push_back(std::stod((*it)[1].str()));
  EXPECT_TRUE(bitwise_equal(xml_times, times));  // printed with 17 digits: round trip exact
  if (!times.empty()) {
    EXPECT_NE(text.find(R"(CollectionType="Temporal")"), std::string::npos);
    EXPECT_TRUE(bitwise_equal(read_dataset(file, "/time").values, times));
  }
  const std::regex origin(R"re(<DataItem Name="Origin"[^>]*>([^<]+)</DataItem>)re");
  std::smatch om;
  EXPECT_TRUE(std::regex_search(text, om, origin));
  if (!om.empty()) {
    std::istringstream os(om[1].str());
    double z, y, x;
    os >> z >> y >> x;
    EXPECT_EQ(x, g.spec().extent[0][0]);
    EXPECT_EQ(y, g.spec().extent[1][0]);
    EXPECT_EQ(z, g.spec().extent[2][0]);
  }
  // Spacing in the same (z, y, x) order as the origin and the dimensions:
  // the order ParaView 5.11's XDMFReader, Xdmf3ReaderS and Xdmf3ReaderT
  // read (scripts/check-paraview.py). Exact: printed with 17 digits.
  const std::regex spacing(R"re(<DataItem Name="Spacing"[^>]*>([^<]+)</DataItem>)re");
  std::smatch sm;
  EXPECT_TRUE(std::regex_search(text, sm, spacing));
  if (!sm.empty()) {
    std::istringstream ss_spacing(sm[1].str());
    double dz = 0.0, dy = 0.0, dx = 0.0;
    ss_spacing >> dz >> dy >> dx;
    EXPECT_EQ(dx, g.spacing(0));
    EXPECT_EQ(dy, g.spacing(1));
    EXPECT_EQ(dz, g.spacing(2));
  }
  return refs;
}

void write_and_check(int dim) {
  pde::Grid g(MPI_COMM_WORLD, spec_of(dim, 2));
  pde::GridSpec fs = spec_of(dim, 1);
  pde::Grid fg(MPI_COMM_WORLD, fs);
  const std::string path = shared_dir() + "/fields_" + std::to_string(dim) + "d.h5";
  const std::vector<double> times{0.0, 0.1, 1.0 / 3.0};
  std::vector<std::vector<double>> frames;
  const std::vector<double> kappa = field(fg, 7.0), grad = field(fg, 8.0);
  const std::vector<double> scalars{1.5, -2.25, 1e-300};
  {
    pde::FieldWriter w(g, path, {"u", "v"});
    EXPECT_EQ(w.xdmf_path(), shared_dir() + "/fields_" + std::to_string(dim) + "d.xmf");
    auto u = g.create_global();
    for (std::size_t n = 0; n < times.size(); ++n) {
      g.scatter(field(g, static_cast<double>(n)), u);
      frames.push_back(g.gather(u));
      w.write_frame(times[n], u);
    }
    auto k = fg.create_global();
    fg.scatter(kappa, k);
    w.write_field("kappa", fg, k, {"kappa"});
    fg.scatter(grad, k);
    w.write_field("dJ_dkappa", fg, k, {"kappa"});
    w.write_array("gradient_scalars", scalars);
    EXPECT_EQ(w.frames(), times.size());
    w.finish();
    EXPECT_TRUE(w.finished());
    // After finish(): every rank throws, none hangs.
    EXPECT_THROW(w.write_frame(1.0, u), Error);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Every rank reads the finished file independently (serial driver).
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "status"), "complete");
  for (std::size_t n = 0; n < frames.size(); ++n)
    for (int c = 0; c < 2; ++c) {
      char name[64];
      std::snprintf(name, sizeof name, "/frames/%06zu/%s", n, c == 0 ? "u" : "v");
      const Data d = read_dataset(file, name);
      EXPECT_TRUE(bitwise_equal(d.values, component(frames[n], 2, c))) << name;
    }
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/fields/kappa/kappa").values, kappa));
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/fields/dJ_dkappa/kappa").values, grad));
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/arrays/gradient_scalars").values, scalars));
  // Frame groups carry their time too.
  {
    hid_t grp = H5Gopen2(file, "/frames/000002", H5P_DEFAULT);
    hid_t a = H5Aopen(grp, "time", H5P_DEFAULT);
    double t = 0.0;
    H5Aread(a, H5T_NATIVE_DOUBLE, &t);
    EXPECT_EQ(t, times[2]);
    H5Aclose(a);
    H5Gclose(grp);
  }
  // Sidecar: 2 frame components + 2 static fields per time step.
  const std::size_t refs = check_xdmf(shared_dir() + "/fields_" + std::to_string(dim) + "d.xmf", file,
                                      "fields_" + std::to_string(dim) + "d.h5", g, times, 4);
  EXPECT_EQ(refs, 4 * times.size());
  H5Fclose(file);
}

}  // namespace

TEST(PdeOutput, OneDimensionalFramesFieldsArraysReadBackBitwise) { write_and_check(1); }
TEST(PdeOutput, TwoDimensionalFramesFieldsArraysReadBackBitwise) { write_and_check(2); }
TEST(PdeOutput, ThreeDimensionalFramesFieldsArraysReadBackBitwise) { write_and_check(3); }

TEST(PdeOutput, StaticFieldsOnlyGiveOneUniformGrid) {
  pde::Grid g(MPI_COMM_WORLD, spec_of(2, 1));
  const std::string path = shared_dir() + "/static.h5";
  const auto kappa = field(g, 3.0);
  {
    pde::FieldWriter w(g, path, {"u"});
    auto k = g.create_global();
    g.scatter(kappa, k);
    w.write_field("kappa", g, k, {"k"});
    w.finish();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/fields/kappa/k").values, kappa));
  EXPECT_EQ(check_xdmf(shared_dir() + "/static.xmf", file, "static.h5", g, {}, 1), 1u);
  EXPECT_EQ(read_dataset(file, "/time").values.size(), 0u);
  H5Fclose(file);
}

TEST(PdeOutput, FileWithoutFinishIsPartialButReadable) {
  pde::Grid g(MPI_COMM_WORLD, spec_of(2, 1));
  const std::string path = shared_dir() + "/partial.h5";
  const auto u0 = field(g, 0.5);
  {
    pde::FieldWriter w(g, path, {"u"});
    auto u = g.create_global();
    g.scatter(u0, u);
    w.write_frame(0.25, u);
    // destroyed without finish(): an interrupted run
  }
  MPI_Barrier(MPI_COMM_WORLD);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "status"), "partial");
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/frames/000000/u").values, u0));
  H5Fclose(file);
  EXPECT_FALSE(std::filesystem::exists(shared_dir() + "/partial.xmf"));
}

TEST(PdeOutput, BadArgumentsThrowOnEveryRank) {
  pde::Grid g(MPI_COMM_WORLD, spec_of(2, 2));
  // Unwritable path.
  EXPECT_THROW((pde::FieldWriter(g, "/nonexistent-costate-dir/x/fields.h5", {"u", "v"})), Error);
  // Wrong number of component names, duplicate names.
  EXPECT_THROW(pde::FieldWriter(g, shared_dir() + "/bad.h5", {"u"}), Error);
  EXPECT_THROW((pde::FieldWriter(g, shared_dir() + "/bad.h5", {"u", "u"})), Error);
  EXPECT_THROW((pde::FieldWriter(g, shared_dir() + "/bad.h5", {"u", "a/b"})), Error);
  pde::FieldWriter w(g, shared_dir() + "/bad.h5", {"u", "v"});
  // A state of the wrong size on the last rank only: all ranks throw.
  const bool last = g.rank() == g.size() - 1;
  pde::GlobalVector wrong(g.owned_size() + (last ? 2 : 0), g.comm());
  EXPECT_THROW(w.write_frame(0.0, wrong), Error);
  // A field on a grid of another geometry.
  pde::GridSpec other = spec_of(2, 1);
  other.cells[0] += 1;
  pde::Grid og(MPI_COMM_WORLD, other);
  EXPECT_THROW(w.write_field("k", og, og.create_global(), {"k"}), Error);
  // Replicated values that differ on one rank.
  std::vector<double> vals{1.0, 2.0};
  if (last && g.size() > 1) vals[1] = std::nextafter(2.0, 3.0);
  if (g.size() > 1) {
    EXPECT_THROW(w.write_array("g", vals), Error);
  }
  std::vector<double> sized(last && g.size() > 1 ? 3 : 2, 1.0);
  if (g.size() > 1) {
    EXPECT_THROW(w.write_array("g", sized), Error);
  }
  // A duplicate array name.
  const std::vector<double> same{1.0, 2.0};
  w.write_array("g", same);
  EXPECT_THROW(w.write_array("g", same), Error);
  // The writer still works after rejected calls.
  auto u = g.create_global();
  g.scatter(field(g, 1.0), u);
  w.write_frame(0.0, u);
  w.finish();
  EXPECT_THROW(w.finish(), Error);
}

// The README's use: a heat run's frames, κ and the adjoint gradient dJ/dκ
// (a field) written together and read back bit for bit.
TEST(PdeOutput, HeatRunWithGradientFieldRoundTrips) {
  pde::Domain d;
  d.cells = {12, 10, 1};
  d.boundary = {Boundary::Dirichlet, Boundary::Neumann, Boundary::Periodic};
  pde::Operator<pde::Heat2D> op(MPI_COMM_WORLD, d, {}, {1.5});
  const pde::Grid& g = op.grid();
  const pde::Grid& fg = *op.field_grid();
  fg.scatter(field(fg, 0.2), op.fields());
  auto u = g.create_global();
  g.scatter(field(g, 0.1), u);
  pde::ThetaOptions o;
  o.dt = 1e-3;
  o.steps = 4;
  o.ksp.use_options_database = false;
  pde::ThetaIntegrator<pde::Heat2D> cn(op, o);
  const auto grad = cn.gradient(u, pde::Objective::integral(), ode::StoreAll{});
  const std::string path = shared_dir() + "/heat.h5";
  std::vector<std::vector<double>> frames;
  {
    pde::FieldWriter out(g, path, {"u"});
    for (std::int64_t n = 0; n <= o.steps; ++n) {
      if (n > 0) cn.step(u, n - 1);
      frames.push_back(g.gather(u));
      out.write_frame(o.t0 + static_cast<double>(n) * o.dt, u);
    }
    out.write_field("kappa", fg, op.fields(), {"kappa"});
    out.write_field("dJ_dkappa", fg, grad.wrt_fields, {"kappa"});
    out.write_array("dJ_dq", grad.wrt_parameters);
    out.finish();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "status"), "complete");
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/frames/000004/u").values, frames.back()));
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/fields/dJ_dkappa/kappa").values, fg.gather(grad.wrt_fields)));
  EXPECT_TRUE(bitwise_equal(read_dataset(file, "/arrays/dJ_dq").values, grad.wrt_parameters));
  const std::vector<double> times{0.0, 1e-3, 2e-3, 3e-3, 4e-3};
  std::vector<double> written = read_dataset(file, "/time").values;
  ASSERT_EQ(written.size(), times.size());
  for (std::size_t n = 0; n < times.size(); ++n) EXPECT_EQ(written[n], o.t0 + static_cast<double>(n) * o.dt);
  EXPECT_EQ(check_xdmf(shared_dir() + "/heat.xmf", file, "heat.h5", g, written, 3), 3 * times.size());
  H5Fclose(file);
}
