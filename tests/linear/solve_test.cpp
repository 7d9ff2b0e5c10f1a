// linear::solve on Eigen matrices: values, implicit tangents (Dual and the
// tape's forward sweep) and adjoints (one tape node) against finite
// differences and against taping an unrolled LU; failure outcomes.
#include "costate/linear/solve.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "costate/ad/verification.hpp"

namespace {

using costate::ad::Dual;
using costate::ad::Real;
using costate::ad::Tape;
namespace linear = costate::linear;

using MatrixR = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>;
using VectorR = Eigen::Matrix<Real, Eigen::Dynamic, 1>;

// Tape of an unrolled LU vs the implicit rule: the two are the same
// derivative computed in different orders; both are backward stable on
// well-conditioned matrices (cond ~ 10 here), so they agree to a few ulps
// of the gradient's size.
constexpr double kTapedLuTolerance = 1e-12;
// Central differences with h = 1e-6 on cond ~ 10 systems: truncation
// ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10.
constexpr double kFiniteDifferenceTolerance = 1e-7;
// ⟨J v, w⟩ = ⟨v, Jᵀ w⟩: both sides are computed with the same LU, so they
// agree to round-off of sums of O(n²) products.
constexpr double kDualityTolerance = 1e-13;
// Solutions of cond ~ 10 systems by two direct methods.
constexpr double kSolutionTolerance = 1e-13;

/// A well-conditioned non-symmetric matrix (diagonally dominant).
Eigen::MatrixXd test_matrix(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Eigen::MatrixXd a(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) a(i, j) = u(gen);
  for (int i = 0; i < n; ++i) a(i, i) += 2.0 * n;
  return a;
}

Eigen::VectorXd test_vector(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Eigen::VectorXd b(n);
  for (int i = 0; i < n; ++i) b[i] = u(gen);
  return b;
}

/// A tridiagonal-plus-corner sparse matrix with the same values as a dense one.
Eigen::SparseMatrix<double> test_sparse(int n) {
  std::vector<Eigen::Triplet<double>> t;
  for (int i = 0; i < n; ++i) {
    t.emplace_back(i, i, 4.0 + 0.1 * i);
    if (i > 0) t.emplace_back(i, i - 1, -1.0 - 0.05 * i);
    if (i + 1 < n) t.emplace_back(i, i + 1, -0.7 + 0.03 * i);
  }
  t.emplace_back(0, n - 1, 0.3);
  Eigen::SparseMatrix<double> a(n, n);
  a.setFromTriplets(t.begin(), t.end());
  return a;
}

/// The functional whose gradient the tests compare: J(x) = Σ cᵢ xᵢ² + xᵢ.
template <class V>
auto functional(const V& x) {
  using T = typename V::Scalar;
  T j = T(0.0);
  for (Eigen::Index i = 0; i < x.size(); ++i) j += (0.5 + 0.1 * double(i)) * x[i] * x[i] + x[i];
  return j;
}

/// Gaussian elimination with partial pivoting, written out on Real: every
/// operation lands on the tape (the reference for the implicit rule).
VectorR unrolled_lu_solve(MatrixR a, VectorR b) {
  const Eigen::Index n = a.rows();
  for (Eigen::Index k = 0; k < n; ++k) {
    Eigen::Index p = k;
    for (Eigen::Index i = k + 1; i < n; ++i)
      if (std::abs(a(i, k).value()) > std::abs(a(p, k).value())) p = i;
    if (p != k) {
      a.row(k).swap(a.row(p));
      std::swap(b[k], b[p]);
    }
    for (Eigen::Index i = k + 1; i < n; ++i) {
      const Real l = a(i, k) / a(k, k);
      for (Eigen::Index j = k + 1; j < n; ++j) a(i, j) = a(i, j) - l * a(k, j);
      b[i] = b[i] - l * b[k];
    }
  }
  VectorR x(n);
  for (Eigen::Index i = n - 1; i >= 0; --i) {
    Real s = b[i];
    for (Eigen::Index j = i + 1; j < n; ++j) s = s - a(i, j) * x[j];
    x[i] = s / a(i, i);
  }
  return x;
}

struct Gradient {
  Eigen::MatrixXd a;  // dJ/dA
  Eigen::VectorXd b;  // dJ/db
  double value = 0.0;
};

/// dJ/dA, dJ/db on the tape, the solve done by `solver`.
template <class Solver>
Gradient taped_gradient(const Eigen::MatrixXd& a0, const Eigen::VectorXd& b0, Solver&& solver) {
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  const Eigen::Index n = a0.rows();
  MatrixR a(n, n);
  VectorR b(n);
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < n; ++i) {
      a(i, j) = a0(i, j);
      tape.register_input(a(i, j));
    }
  for (Eigen::Index i = 0; i < n; ++i) {
    b[i] = b0[i];
    tape.register_input(b[i]);
  }
  VectorR x = solver(a, b);
  Real j = functional(x);
  tape.register_output(j);
  tape.stop_recording();
  j.set_gradient(1.0);
  tape.evaluate();
  Gradient g;
  g.value = j.value();
  g.a.resize(n, n);
  g.b.resize(n);
  for (Eigen::Index jj = 0; jj < n; ++jj)
    for (Eigen::Index i = 0; i < n; ++i) g.a(i, jj) = a(i, jj).gradient();
  for (Eigen::Index i = 0; i < n; ++i) g.b[i] = b[i].gradient();
  tape.reset();
  return g;
}

double solve_functional(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  return functional(linear::solve(a, b).x);
}

TEST(LinearSolve, DenseDoubleSolvesAndReports) {
  const Eigen::MatrixXd a = test_matrix(6, 1);
  const Eigen::VectorXd b = test_vector(6, 2);
  const auto sol = linear::solve(a, b);
  EXPECT_TRUE(sol.summary.success()) << sol.summary.brief_report();
  EXPECT_LT((a * sol.x - b).norm(), kSolutionTolerance);
  EXPECT_EQ(sol.summary.rows, 6);
  EXPECT_EQ(sol.summary.iterations, 0);
  EXPECT_GT(sol.summary.rcond, 0.1);
  EXPECT_LT(sol.summary.backward_error, 1e-15);
  EXPECT_NE(sol.summary.brief_report().find("eigen dense LU: success"), std::string::npos)
      << sol.summary.brief_report();
  EXPECT_EQ(sol.adjoint_summary, nullptr);
}

TEST(LinearSolve, DenseAdjointMatchesTapedUnrolledLu) {
  const Eigen::MatrixXd a = test_matrix(7, 3);
  const Eigen::VectorXd b = test_vector(7, 4);
  const Gradient implicit =
      taped_gradient(a, b, [](const MatrixR& A, const VectorR& B) { return linear::solve(A, B).x; });
  const Gradient unrolled = taped_gradient(a, b, unrolled_lu_solve);
  EXPECT_NEAR(implicit.value, unrolled.value, kTapedLuTolerance * std::abs(unrolled.value));
  const double scale = unrolled.a.cwiseAbs().maxCoeff() + unrolled.b.cwiseAbs().maxCoeff();
  EXPECT_LT((implicit.a - unrolled.a).cwiseAbs().maxCoeff(), kTapedLuTolerance * scale);
  EXPECT_LT((implicit.b - unrolled.b).cwiseAbs().maxCoeff(), kTapedLuTolerance * scale);
}

TEST(LinearSolve, DenseAdjointMatchesFiniteDifferences) {
  const Eigen::MatrixXd a = test_matrix(5, 5);
  const Eigen::VectorXd b = test_vector(5, 6);
  const Gradient g =
      taped_gradient(a, b, [](const MatrixR& A, const VectorR& B) { return linear::solve(A, B).x; });
  const double h = 1e-6;
  for (int j = 0; j < 5; ++j)
    for (int i = 0; i < 5; ++i) {
      Eigen::MatrixXd ap = a, am = a;
      ap(i, j) += h;
      am(i, j) -= h;
      const double fd = (solve_functional(ap, b) - solve_functional(am, b)) / (2 * h);
      EXPECT_NEAR(g.a(i, j), fd, kFiniteDifferenceTolerance * (1.0 + std::abs(fd)))
          << "entry (" << i << ", " << j << ")";
    }
  for (int i = 0; i < 5; ++i) {
    Eigen::VectorXd bp = b, bm = b;
    bp[i] += h;
    bm[i] -= h;
    const double fd = (solve_functional(a, bp) - solve_functional(a, bm)) / (2 * h);
    EXPECT_NEAR(g.b[i], fd, kFiniteDifferenceTolerance * (1.0 + std::abs(fd))) << "b[" << i << "]";
  }
}

TEST(LinearSolve, SparseAdjointMatchesTapedUnrolledLuOnThePattern) {
  const int n = 9;
  const Eigen::SparseMatrix<double> sp = test_sparse(n);
  const Eigen::MatrixXd dense(sp);
  const Eigen::VectorXd b = test_vector(n, 7);
  const Gradient unrolled = taped_gradient(dense, b, unrolled_lu_solve);

  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  Eigen::SparseMatrix<Real> a = sp.cast<Real>();
  for (int k = 0; k < a.outerSize(); ++k)
    for (Eigen::SparseMatrix<Real>::InnerIterator it(a, k); it; ++it) tape.register_input(it.valueRef());
  VectorR bv = b.cast<Real>();
  for (int i = 0; i < n; ++i) tape.register_input(bv[i]);
  const auto sol = linear::solve(a, bv);
  Real j = functional(sol.x);
  tape.register_output(j);
  tape.stop_recording();
  EXPECT_EQ(sol.summary.backend, "eigen SparseLU");
  EXPECT_TRUE(sol.summary.success()) << sol.summary.brief_report();
  EXPECT_EQ(tape.stats().externals, 1u);
  j.set_gradient(1.0);
  tape.evaluate();
  const double scale = unrolled.a.cwiseAbs().maxCoeff() + unrolled.b.cwiseAbs().maxCoeff();
  EXPECT_NEAR(j.value(), unrolled.value, kTapedLuTolerance * std::abs(unrolled.value));
  int checked = 0;
  for (int k = 0; k < a.outerSize(); ++k)
    for (Eigen::SparseMatrix<Real>::InnerIterator it(a, k); it; ++it) {
      EXPECT_NEAR(it.value().gradient(), unrolled.a(it.row(), it.col()), kTapedLuTolerance * scale)
          << "entry (" << it.row() << ", " << it.col() << ")";
      ++checked;
    }
  EXPECT_EQ(checked, sp.nonZeros());
  for (int i = 0; i < n; ++i) EXPECT_NEAR(bv[i].gradient(), unrolled.b[i], kTapedLuTolerance * scale);
  ASSERT_NE(sol.adjoint_summary, nullptr);
  EXPECT_TRUE(sol.adjoint_summary->factorization_reused);
  EXPECT_TRUE(sol.adjoint_summary->success());
  tape.reset();
}

TEST(LinearSolve, RowMajorSparseMatchesColumnMajor) {
  const int n = 8;
  const Eigen::SparseMatrix<double> cm = test_sparse(n);
  const Eigen::SparseMatrix<double, Eigen::RowMajor> rm = cm;
  const Eigen::VectorXd b = test_vector(n, 8);
  const auto x1 = linear::solve(cm, b).x;
  const auto x2 = linear::solve(rm, b).x;
  EXPECT_LT((x1 - x2).cwiseAbs().maxCoeff(), kSolutionTolerance);
  EXPECT_LT((Eigen::MatrixXd(cm) * x1 - b).norm(), kSolutionTolerance);
}

TEST(LinearSolve, DualTangentsMatchTapeForwardSweepAndFiniteDifferences) {
  // A(t) = A0 + t·A1, b(t) = b0 + t·b1, second direction: b only.
  const int n = 6;
  const Eigen::MatrixXd a0 = test_matrix(n, 9), a1 = test_matrix(n, 10);
  const Eigen::VectorXd b0 = test_vector(n, 11), b1 = test_vector(n, 12), b2 = test_vector(n, 13);
  using D = Dual<double, 2>;
  Eigen::Matrix<D, Eigen::Dynamic, Eigen::Dynamic> ad(n, n);
  Eigen::Matrix<D, Eigen::Dynamic, 1> bd(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) ad(i, j) = D(a0(i, j), {a1(i, j), 0.0});
    bd[i] = D(b0[i], {b1[i], b2[i]});
  }
  const auto sol = linear::solve(ad, bd);
  EXPECT_EQ(sol.summary.tangent_directions, 2);
  const double h = 1e-6;
  const Eigen::VectorXd fd0 = (linear::solve(Eigen::MatrixXd(a0 + h * a1), Eigen::VectorXd(b0 + h * b1)).x -
                               linear::solve(Eigen::MatrixXd(a0 - h * a1), Eigen::VectorXd(b0 - h * b1)).x) /
                              (2 * h);
  const Eigen::VectorXd exact1 = linear::solve(a0, b2).x;  // ∂x/∂t₂ = A⁻¹ b2
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(sol.x[i].value(), linear::solve(a0, b0).x[i], kSolutionTolerance);
    EXPECT_NEAR(sol.x[i].tangent(0), fd0[i], kFiniteDifferenceTolerance);
    EXPECT_NEAR(sol.x[i].tangent(1), exact1[i], kSolutionTolerance);
  }

  // The same first direction by the tape's forward sweep through the node.
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  MatrixR ar = a0.cast<Real>();
  VectorR br = b0.cast<Real>();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) tape.register_input(ar(i, j));
  for (int i = 0; i < n; ++i) tape.register_input(br[i]);
  const auto solr = linear::solve(ar, br);
  tape.stop_recording();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) tape.set_tangent(ar(i, j).index(), a1(i, j));
  for (int i = 0; i < n; ++i) tape.set_tangent(br[i].index(), b1[i]);
  tape.evaluate_forward();
  for (int i = 0; i < n; ++i)
    EXPECT_NEAR(tape.tangent(solr.x[i].index()), sol.x[i].tangent(0), kDualityTolerance);
  tape.reset();
}

TEST(LinearSolve, TangentAndAdjointAreDual) {
  // ⟨J v, w⟩ = ⟨v, Jᵀ w⟩ for J = ∂x/∂(A, b), dense and sparse.
  const int n = 8;
  const Eigen::SparseMatrix<double> sp = test_sparse(n);
  for (int dense = 0; dense < 2; ++dense) {
    Tape& tape = Tape::active();
    tape.reset();
    tape.start_recording();
    std::vector<Real*> inputs;
    MatrixR ad;
    Eigen::SparseMatrix<Real> as;
    VectorR b = test_vector(n, 14).cast<Real>();
    if (dense) {
      ad = test_matrix(n, 15).cast<Real>();
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) inputs.push_back(&ad(i, j));
    } else {
      as = sp.cast<Real>();
      for (int k = 0; k < as.outerSize(); ++k)
        for (Eigen::SparseMatrix<Real>::InnerIterator it(as, k); it; ++it) inputs.push_back(&it.valueRef());
    }
    for (int i = 0; i < n; ++i) inputs.push_back(&b[i]);
    for (Real* p : inputs) tape.register_input(*p);
    auto sol = dense ? linear::solve(ad, b) : linear::solve(as, b);
    tape.stop_recording();
    const Eigen::VectorXd v = test_vector(static_cast<int>(inputs.size()), 16);
    const Eigen::VectorXd w = test_vector(n, 17);
    for (std::size_t k = 0; k < inputs.size(); ++k) tape.set_tangent(inputs[k]->index(), v[k]);
    tape.evaluate_forward();
    double jv_w = 0.0;
    for (int i = 0; i < n; ++i) jv_w += tape.tangent(sol.x[i].index()) * w[i];
    for (int i = 0; i < n; ++i) sol.x[i].set_gradient(w[i]);
    tape.evaluate();
    double v_jtw = 0.0;
    for (std::size_t k = 0; k < inputs.size(); ++k) v_jtw += v[k] * inputs[k]->gradient();
    EXPECT_NEAR(jv_w, v_jtw, kDualityTolerance * std::abs(jv_w)) << (dense ? "dense" : "sparse");
    tape.reset();
  }
}

TEST(LinearSolve, MixedOperandsDifferentiateOnlyTheActiveOne) {
  const int n = 5;
  const Eigen::MatrixXd a = test_matrix(n, 18);
  const Eigen::VectorXd b = test_vector(n, 19);
  const Gradient full =
      taped_gradient(a, b, [](const MatrixR& A, const VectorR& B) { return linear::solve(A, B).x; });
  Tape& tape = Tape::active();
  // Constant A, active b: b̄ = A⁻ᵀ x̄ only.
  tape.reset();
  tape.start_recording();
  VectorR bv = b.cast<Real>();
  for (int i = 0; i < n; ++i) tape.register_input(bv[i]);
  auto sol = linear::solve(a, bv);
  Real j = functional(sol.x);
  tape.stop_recording();
  j.set_gradient(1.0);
  tape.evaluate();
  for (int i = 0; i < n; ++i) EXPECT_NEAR(bv[i].gradient(), full.b[i], kDualityTolerance);
  // Active A, constant b.
  tape.reset();
  tape.start_recording();
  MatrixR av = a.cast<Real>();
  for (int jj = 0; jj < n; ++jj)
    for (int i = 0; i < n; ++i) tape.register_input(av(i, jj));
  auto sol2 = linear::solve(av, b);
  Real j2 = functional(sol2.x);
  tape.stop_recording();
  j2.set_gradient(1.0);
  tape.evaluate();
  for (int jj = 0; jj < n; ++jj)
    for (int i = 0; i < n; ++i) EXPECT_NEAR(av(i, jj).gradient(), full.a(i, jj), kDualityTolerance);
  tape.reset();
  // Nothing active (or not recording): no node, passive results.
  MatrixR ac = a.cast<Real>();
  const auto sol3 = linear::solve(ac, bv);
  EXPECT_FALSE(sol3.x[0].is_active());
  EXPECT_EQ(sol3.adjoint_summary, nullptr);
}

TEST(LinearSolve, OneNodeAndAdjointsAccumulateOverSweeps) {
  const int n = 40;
  const Eigen::MatrixXd a = test_matrix(n, 20);
  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  VectorR b = test_vector(n, 21).cast<Real>();
  for (int i = 0; i < n; ++i) tape.register_input(b[i]);
  const auto stats_before = tape.stats();
  auto sol = linear::solve(a, b);
  const auto stats_after = tape.stats();
  tape.stop_recording();
  EXPECT_EQ(stats_after.externals - stats_before.externals, 1u);
  EXPECT_EQ(stats_after.statements - stats_before.statements, 1u);  // the node itself
  EXPECT_EQ(stats_after.arguments, stats_before.arguments);
  sol.x[0].set_gradient(1.0);
  tape.evaluate();
  const double g1 = b[3].gradient();
  sol.x[0].set_gradient(1.0);
  tape.evaluate();
  EXPECT_NEAR(b[3].gradient(), 2.0 * g1, 1e-15 * std::abs(g1) + 1e-300);
  tape.reset();
}

TEST(LinearSolve, TaylorTestOfAParametrisedSystem) {
  // A(p) = A0 + p0·A1 + diag(exp(p1)),  b(p) = b0 · (1 + p2²);  J = functional(x).
  const int n = 6;
  const Eigen::MatrixXd a0 = test_matrix(n, 22), a1 = test_matrix(n, 23);
  const Eigen::VectorXd b0 = test_vector(n, 24);
  auto J = [&](const auto& p) {
    using T = std::decay_t<decltype(p[0])>;
    using std::exp;
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> a(n, n);
    Eigen::Matrix<T, Eigen::Dynamic, 1> b(n);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) a(i, j) = a0(i, j) + p[0] * a1(i, j);
      a(i, i) = a(i, i) + exp(p[1]);
      b[i] = b0[i] * (1.0 + p[2] * p[2]);
    }
    T j = functional(linear::solve(a, b).x);
    return j;
  };
  const std::vector<double> p{0.1, 0.3, -0.4}, dir{0.7, -0.2, 0.5};
  const auto r = costate::ad::taylor_test(J, p, dir);
  EXPECT_TRUE(r.passed) << r.report();
  ASSERT_FALSE(r.orders.empty()) << r.report();  // J is not affine along dir
  EXPECT_GE(r.min_order, 1.9) << r.report();
}

// ------------------------------------------------------------------ failures

TEST(LinearSolve, SingularDenseIsReportedAndNotDifferentiated) {
  Eigen::MatrixXd a(3, 3);
  a << 1, 2, 3, 2, 4, 6, 1, 0, 1;  // row 2 = 2 × row 1
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(3);
  const auto sol = linear::solve(a, b);
  EXPECT_EQ(sol.summary.termination, linear::Termination::Singular) << sol.summary.brief_report();
  EXPECT_FALSE(sol.summary.success());

  using D = Dual<double, 1>;
  Eigen::Matrix<D, 3, 1> bd;
  for (int i = 0; i < 3; ++i) bd[i] = D(1.0, {1.0});
  try {
    (void)linear::solve(a, bd);
    ADD_FAILURE() << "differentiating a singular solve must throw";
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("differentiate_failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("singular"), std::string::npos) << e.what();
  }
  // Explicitly allowed: tangents come back (meaningless, but no throw).
  EXPECT_NO_THROW((void)linear::solve(a, bd, {.differentiate_failed = true}));

  Tape& tape = Tape::active();
  tape.reset();
  tape.start_recording();
  VectorR br = b.cast<Real>();
  for (int i = 0; i < 3; ++i) tape.register_input(br[i]);
  EXPECT_THROW((void)linear::solve(a, br), costate::Error);
  tape.stop_recording();
  tape.reset();
  // Not recording: nothing is differentiated, the outcome is data.
  const auto solr = linear::solve(a, b.cast<Real>().eval());
  EXPECT_EQ(solr.summary.termination, linear::Termination::Singular);
}

TEST(LinearSolve, NearSingularDenseIsSingularByConditionEstimate) {
  Eigen::MatrixXd a(3, 3);
  a << 1, 1, 0, 1, 1 + 1e-15, 0, 0, 0, 1;
  const auto sol = linear::solve(a, Eigen::VectorXd::Ones(3).eval());
  EXPECT_EQ(sol.summary.termination, linear::Termination::Singular) << sol.summary.brief_report();
  EXPECT_LT(sol.summary.rcond, 1e-14);
  // The check can be turned off: then the (inaccurate but finite) x is a success.
  const auto loose = linear::solve(a, Eigen::VectorXd::Ones(3).eval(), {.min_rcond = 0.0});
  EXPECT_NE(loose.summary.termination, linear::Termination::Singular);
}

TEST(LinearSolve, SingularSparseIsReported) {
  Eigen::SparseMatrix<double> a = test_sparse(5);
  a.prune([](Eigen::Index, Eigen::Index c, double) { return c != 2; });  // empty column 2
  const auto sol = linear::solve(a, Eigen::VectorXd::Ones(5).eval());
  EXPECT_EQ(sol.summary.termination, linear::Termination::Singular) << sol.summary.brief_report();
}

TEST(LinearSolve, NonFiniteInputIsReported) {
  Eigen::MatrixXd a = test_matrix(4, 25);
  Eigen::VectorXd b = test_vector(4, 26);
  b[2] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(linear::solve(a, b).summary.termination, linear::Termination::NonFinite);
  b[2] = 1.0;
  a(1, 1) = std::numeric_limits<double>::infinity();
  EXPECT_EQ(linear::solve(a, b).summary.termination, linear::Termination::NonFinite);
}

TEST(LinearSolve, DimensionMismatchThrows) {
  const Eigen::MatrixXd a = test_matrix(4, 27);
  EXPECT_THROW((void)linear::solve(a, Eigen::VectorXd::Ones(3).eval()), costate::Error);
  EXPECT_THROW((void)linear::solve(Eigen::MatrixXd::Ones(3, 4).eval(), Eigen::VectorXd::Ones(3).eval()),
               costate::Error);
  EXPECT_THROW((void)linear::solve(test_sparse(5), Eigen::VectorXd::Ones(4).eval()), costate::Error);
  try {
    (void)linear::solve(a, Eigen::VectorXd::Ones(3).eval());
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("b has 3 entries but A is 4 x 4"), std::string::npos)
        << e.what();
  }
}

TEST(LinearSolve, OptionsValidateNamesTheField) {
  try {
    linear::Options{.max_backward_error = -1.0}.validate();
    ADD_FAILURE();
  } catch (const costate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_backward_error = -1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(linear::termination_from_string("singular"), linear::Termination::Singular);
  EXPECT_THROW((void)linear::termination_from_string("bogus"), costate::Error);
}

}  // namespace
