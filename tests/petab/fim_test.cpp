// The Fisher information of petab::evaluate (Options::fim; problem.hpp and
// docs/petab.md derive it), on PEtab problems read from COSTATE_PETAB_DIR:
// - every test-suite case: F against F_fd = AᵀA + c BᵀB, A and B central
//   differences of μ_i/σ_i and log σ_i (μ = tr(h)) — where σ does not depend
//   on θ that is J_rᵀJ_r of the residual vector r = (tr(m) − μ)/σ; F is
//   symmetric and positive semidefinite;
// - case 0015 (an estimated noise parameter), with normal and with laplace
//   noise: F against its definition E[s sᵀ], the score s = ∂(−log p)/∂θ
//   taken from the adjoint gradient of each measurement alone, its data
//   m = tr⁻¹(μ + d) at the nodes of the quadrature that is exact for
//   E over d (Gauss–Hermite, 3 nodes, for normal d; a sign and
//   Gauss–Laguerre, 2 nodes, for laplace d: the outer product is a
//   polynomial of degree 4, resp. 2, in the node);
// - three benchmark models (piecewise inputs, log10 observables, many
//   conditions): F against F_fd;
// - petab::write_result_hdf5 holds what the Result holds.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "costate/petab/output.hpp"
#include "costate/petab/problem.hpp"
#include "../support/run_costate.hpp"  // scratch_dir
#include "petab_data.hpp"

namespace {

namespace fs = std::filesystem;
namespace petab = costate::petab;

using costate::test::petab_dir;
const auto problem_yaml = costate::test::petab_problem_yaml;

using Matrix = Eigen::MatrixXd;

Matrix fim_of(const petab::Problem& pb, const std::vector<double>& theta) {
  petab::Options o;
  o.fim = true;
  const petab::Result r = petab::evaluate(pb, theta, o);
  const auto n = static_cast<Eigen::Index>(pb.estimated.size());
  EXPECT_EQ(r.fim.size(), pb.estimated.size() * pb.estimated.size());
  return Eigen::Map<const Matrix>(r.fim.data(), n, n);
}

double mu_of(const petab::Problem& pb, std::size_t i, double h) {
  switch (pb.observables[pb.measurements[i].observable].transformation) {
    case petab::Transformation::Log: return std::log(h);
    case petab::Transformation::Log10: return std::log10(h);
    default: return h;
  }
}

/// AᵀA + c BᵀB by central differences of μ_i/σ_i(θ) (σ_i at θ) and
/// log σ_i(θ), step `step` on the scales.
Matrix fim_by_differences(const petab::Problem& pb, const std::vector<double>& theta, double step) {
  const petab::Result at = petab::evaluate(pb, theta, {});
  const std::size_t m = pb.measurements.size(), n = theta.size();
  Matrix A(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(n)), B = A;
  for (std::size_t e = 0; e < n; ++e) {
    std::vector<double> plus = theta, minus = theta;
    plus[e] += step;
    minus[e] -= step;
    const petab::Result rp = petab::evaluate(pb, plus, {}), rm = petab::evaluate(pb, minus, {});
    for (std::size_t i = 0; i < m; ++i) {
      const double sigma = at.sigmas[i];
      const bool normal = pb.observables[pb.measurements[i].observable].distribution == petab::Distribution::Normal;
      const double c = normal ? 2.0 : 1.0;
      A(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(e)) =
          (mu_of(pb, i, rp.simulations[i]) - mu_of(pb, i, rm.simulations[i])) / (2.0 * step * sigma);
      B(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(e)) =
          std::sqrt(c) * (std::log(rp.sigmas[i]) - std::log(rm.sigmas[i])) / (2.0 * step);
    }
  }
  return A.transpose() * A + B.transpose() * B;
}

/// max |F − G| / max(1, max |G|).
double relative_difference(const Matrix& F, const Matrix& G) {
  return (F - G).cwiseAbs().maxCoeff() / std::max(1.0, G.cwiseAbs().maxCoeff());
}

void expect_symmetric_psd(const Matrix& F, const std::string& what) {
  // Symmetric by construction (sums of outer products, scaled by d_a d_b):
  // to round-off.
  constexpr double kSymmetry = 1e-14;
  EXPECT_LE((F - F.transpose()).cwiseAbs().maxCoeff(), kSymmetry * std::max(1.0, F.cwiseAbs().maxCoeff())) << what;
  // PSD: a sum of outer products; the smallest eigenvalue may be a rounding
  // error below zero, relative to the largest.
  constexpr double kPsd = 1e-12;
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(F);
  EXPECT_GE(eig.eigenvalues().minCoeff(), -kPsd * std::max(1.0, eig.eigenvalues().maxCoeff())) << what;
}

// Central differences of the simulated values at step 1e-4 on the scales:
// truncation ~h²·h''' ≈ 1e-8, CVODES' rtol 1e-10 divided by h ≈ 1e-6 of
// each derivative; the FIM's forward sensitivities are at the same
// tolerances. Measured on the suite: ≤ 3e-7 (see docs/petab.md).
constexpr double kFdStep = 1e-4;
constexpr double kSuiteFdTol = 1e-5;

TEST(PetabFim, EverySuiteCaseMatchesDifferencesAndIsSymmetricPsd) {
  COSTATE_REQUIRE_PETAB("test-suite-v1");
  double worst = 0.0;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(petab_dir() / "test-suite-v1")) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE("test-suite case " + name);
    const petab::Problem pb = petab::read(problem_yaml(entry.path()).string());
    const std::vector<double> theta = pb.nominal_on_scale();
    const Matrix F = fim_of(pb, theta), G = fim_by_differences(pb, theta, kFdStep);
    const double d = relative_difference(F, G);
    EXPECT_LE(d, kSuiteFdTol) << "F =\n" << F << "\nF_fd =\n" << G;
    expect_symmetric_psd(F, name);
    worst = std::max(worst, d);
    ++checked;
  }
  EXPECT_EQ(checked, 20);
  std::cout << "FIM vs central differences over " << checked << " suite cases: max relative difference "
            << worst << "\n";
}

/// The problem with measurement i alone (its own experiment).
petab::Problem only_measurement(const petab::Problem& pb, std::size_t i) {
  petab::Problem one = petab::read(pb.file);
  for (std::size_t o = 0; o < pb.observables.size(); ++o) one.observables[o].distribution = pb.observables[o].distribution;
  const petab::Measurement me = pb.measurements[i];
  one.measurements = {me};
  one.experiments = {petab::Experiment{me.preequilibration, me.condition, {me.time}, {{0}}}};
  return one;
}

/// E[s sᵀ] over the data of every measurement (see the file comment).
Matrix fim_by_definition(const petab::Problem& pb, const std::vector<double>& theta) {
  const petab::Result at = petab::evaluate(pb, theta, {});
  const auto n = static_cast<Eigen::Index>(theta.size());
  Matrix F = Matrix::Zero(n, n);
  petab::Options o;
  o.gradient = true;  // CVODES adjoint
  for (std::size_t i = 0; i < pb.measurements.size(); ++i) {
    petab::Problem one = only_measurement(pb, i);
    const petab::Observable& ob = pb.observables[pb.measurements[i].observable];
    const double mu = mu_of(pb, i, at.simulations[i]), sigma = at.sigmas[i];
    // Nodes d of the data's deviation tr(m) − μ and their weights.
    std::vector<std::pair<double, double>> nodes;
    if (ob.distribution == petab::Distribution::Normal) {
      nodes = {{0.0, 2.0 / 3.0}, {std::sqrt(3.0) * sigma, 1.0 / 6.0}, {-std::sqrt(3.0) * sigma, 1.0 / 6.0}};
    } else {
      const double r2 = std::sqrt(2.0);
      for (double sign : {1.0, -1.0}) {
        nodes.push_back({sign * (2.0 - r2) * sigma, 0.5 * (2.0 + r2) / 4.0});
        nodes.push_back({sign * (2.0 + r2) * sigma, 0.5 * (2.0 - r2) / 4.0});
      }
    }
    for (const auto& [d, w] : nodes) {
      const double t = mu + d;
      one.measurements[0].value = ob.transformation == petab::Transformation::Log     ? std::exp(t)
                                  : ob.transformation == petab::Transformation::Log10 ? std::pow(10.0, t)
                                                                                      : t;
      const petab::Result r = petab::evaluate(one, theta, o);
      const Eigen::Map<const Eigen::VectorXd> s(r.gradient.data(), n);  // −score: the sign cancels
      F += w * s * s.transpose();
    }
  }
  return F;
}

// The definition's scores come from the adjoint gradient (accurate to ~1e-8
// of its size at CVODES' 1e-10), the FIM from forward sensitivities: they
// agree to the integration error, far below 1e-6 of the matrix's size.
constexpr double kDefinitionTol = 1e-6;

TEST(PetabFim, EstimatedNoiseMatchesTheDefinitionNormalAndLaplace) {
  COSTATE_REQUIRE_PETAB("test-suite-v1");
  const fs::path dir = petab_dir() / "test-suite-v1" / "0015";  // σ = noise, estimated
  petab::Problem pb = petab::read(problem_yaml(dir).string());
  ASSERT_EQ(pb.estimated_ids().back(), "noise");
  const std::vector<double> theta = pb.nominal_on_scale();
  for (petab::Distribution dist : {petab::Distribution::Normal, petab::Distribution::Laplace}) {
    SCOPED_TRACE(petab::to_string(dist));
    for (auto& o : pb.observables) o.distribution = dist;
    const Matrix F = fim_of(pb, theta), G = fim_by_definition(pb, theta);
    EXPECT_LE(relative_difference(F, G), kDefinitionTol) << "F =\n" << F << "\nE[s s^T] =\n" << G;
    std::cout << petab::to_string(dist) << " noise: FIM vs E[s s^T], max relative difference "
              << relative_difference(F, G) << "\n";
    // The noise parameter's own entry is not zero: the σ term is there.
    const auto last = F.rows() - 1;
    EXPECT_GT(F(last, last), 0.0);
    EXPECT_LE(relative_difference(F, fim_by_differences(pb, theta, kFdStep)), kSuiteFdTol);
    expect_symmetric_psd(F, petab::to_string(dist));
  }
}

// The benchmark models at their published fits, CVODES at 1e-10, step and
// bound per model. Bruno and Weber: step 1e-4 on the log10 scales, as the
// suite (measured 3.2e-7 and 6.8e-8). Borghans is a calcium oscillator,
// whose simulated values are far from linear in θ over 1e-4: its
// differences converge to F at order 2 as the step shrinks (measured:
// 4.3e-2, 3.5e-3, 3.8e-4, 5.7e-5 at steps 1e-4, 3e-5, 1e-5, 3e-6), so it
// takes step 1e-5 and 1e-3 of the matrix's size.
TEST(PetabFim, BenchmarkModelsMatchDifferences) {
  COSTATE_REQUIRE_PETAB("benchmark");
  const struct {
    const char* name;
    double step, tol;
  } models[] = {{"Bruno_JExpBot2016", 1e-4, 1e-5}, {"Weber_BMC2015", 1e-4, 1e-5},
                {"Borghans_BiophysChem1997", 1e-5, 1e-3}};
  for (const auto& [name, step, tol] : models) {
    SCOPED_TRACE(name);
    const petab::Problem pb = petab::read(problem_yaml(petab_dir() / "benchmark" / name).string());
    const std::vector<double> theta = pb.nominal_on_scale();
    const Matrix F = fim_of(pb, theta), G = fim_by_differences(pb, theta, step);
    const double d = relative_difference(F, G);
    EXPECT_LE(d, tol);
    expect_symmetric_psd(F, name);
    std::cout << name << ": FIM vs central differences (step " << step << "), max relative difference " << d
              << "\n";
  }
}

/// A dataset of doubles, and its dimensions.
std::vector<double> read_dataset(hid_t file, const char* name, std::vector<hsize_t>& dims) {
  const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  EXPECT_GE(set, 0) << name;
  if (set < 0) return {};
  const hid_t space = H5Dget_space(set);
  dims.assign(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space)), 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::vector<double> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  EXPECT_GE(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << name;
  H5Sclose(space);
  H5Dclose(set);
  return v;
}

std::string read_text_attribute(hid_t object, const char* name) {
  const hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
  EXPECT_GE(attr, 0) << name;
  if (attr < 0) return {};
  const hid_t type = H5Aget_type(attr);
  std::string text(H5Tget_size(type), '\0');
  EXPECT_GE(H5Aread(attr, type, text.data()), 0);
  H5Tclose(type);
  H5Aclose(attr);
  return text.substr(0, text.find('\0'));
}

TEST(PetabOutput, Hdf5HoldsTheResult) {
  COSTATE_REQUIRE_PETAB("test-suite-v1");
  const petab::Problem pb = petab::read(problem_yaml(petab_dir() / "test-suite-v1" / "0015").string());
  petab::Options o;
  o.gradient = true;
  o.fim = true;
  const petab::Result r = petab::evaluate(pb, pb.nominal_on_scale(), o);
  const fs::path path = costate::test::scratch_dir("costate_petab_output_test") / "fim.h5";
  fs::remove(path);
  petab::write_result_hdf5(pb, r, path.string());
  EXPECT_FALSE(fs::exists(path.string() + ".partial"));
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  std::vector<hsize_t> dims;
  const std::size_t n = pb.estimated.size();
  EXPECT_EQ(read_dataset(file, "fim", dims), r.fim);  // bit for bit
  EXPECT_EQ(dims, (std::vector<hsize_t>{n, n}));
  EXPECT_EQ(read_dataset(file, "gradient", dims), r.gradient);
  EXPECT_EQ(read_dataset(file, "simulation/simulation", dims), r.simulations);
  EXPECT_EQ(read_dataset(file, "simulation/sigma", dims), r.sigmas);
  EXPECT_EQ(read_dataset(file, "llh", dims), std::vector<double>{r.llh});
  EXPECT_EQ(read_text_attribute(file, "status"), "complete");
  const hid_t fim = H5Dopen2(file, "fim", H5P_DEFAULT);
  std::string ids;
  for (const auto& id : pb.estimated_ids()) ids += id + "\n";
  EXPECT_EQ(read_text_attribute(fim, "ids"), ids);
  H5Dclose(fim);
  H5Fclose(file);
  fs::remove(path);
}

}  // namespace
