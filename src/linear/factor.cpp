// linear::detail::DenseFactor and SparseFactor (costate/linear/solve.hpp):
// the only place the linear and nonlinear solvers instantiate Eigen's LU
// and SparseLU.
#include <Eigen/LU>
#include <Eigen/SparseLU>

#include "costate/linear/solve.hpp"

namespace costate::linear::detail {

struct DenseFactor::Impl {
  explicit Impl(const Eigen::MatrixXd& a) : lu(a) {}
  Eigen::PartialPivLU<Eigen::MatrixXd> lu;
};

DenseFactor::DenseFactor(const Eigen::MatrixXd& a) : impl_(std::make_unique<Impl>(a)) {}
DenseFactor::~DenseFactor() = default;
Eigen::MatrixXd DenseFactor::solve(const Eigen::MatrixXd& rhs) const { return impl_->lu.solve(rhs); }
Eigen::VectorXd DenseFactor::solve_transpose(const Eigen::VectorXd& rhs) const {
  return impl_->lu.transpose().solve(rhs);
}
double DenseFactor::rcond() const { return impl_->lu.rcond(); }
bool DenseFactor::has_zero_pivot() const {
  const auto d = impl_->lu.matrixLU().diagonal();
  for (Eigen::Index i = 0; i < d.size(); ++i)
    if (d[i] == 0.0) return true;
  return false;
}

struct SparseFactor::Impl {
  // Eigen's transposed view needs a non-const LU.
  mutable Eigen::SparseLU<Eigen::SparseMatrix<double>, Eigen::COLAMDOrdering<int>> lu;
  bool ok = false;
  std::string message;
};

SparseFactor::SparseFactor(const Eigen::SparseMatrix<double>& a) : impl_(std::make_unique<Impl>()) {
  impl_->lu.analyzePattern(a);
  impl_->lu.factorize(a);
  impl_->ok = impl_->lu.info() == Eigen::Success;
  if (!impl_->ok) impl_->message = impl_->lu.lastErrorMessage();
}
SparseFactor::~SparseFactor() = default;
bool SparseFactor::ok() const { return impl_->ok; }
const std::string& SparseFactor::message() const { return impl_->message; }
Eigen::MatrixXd SparseFactor::solve(const Eigen::MatrixXd& rhs) const { return impl_->lu.solve(rhs); }
Eigen::VectorXd SparseFactor::solve_transpose(const Eigen::VectorXd& rhs) const {
  return impl_->lu.transpose().solve(rhs);
}

}  // namespace costate::linear::detail
