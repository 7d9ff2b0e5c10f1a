#include "costate/ode/system.hpp"

#include <algorithm>
#include <cassert>
#include <sstream>
#include <type_traits>
#include <variant>

#include "costate/ad/tape.hpp"
#include "costate/expr/kernel.hpp"
#include "costate/ode/detail/gradient_support.hpp"

namespace costate::ode {

namespace {
using Dual8 = ad::Dual<double, 8>;
constexpr int kChunk = 8;
static_assert(static_cast<std::size_t>(kChunk) == Linearization::kRowLanes);
static_assert(sizeof(Dual8) == Linearization::kInputStride * sizeof(double),
              "dense_input's stride: a Dual<double, 8> is its 8 tangents and its value");
}  // namespace

std::string to_string(JacobianStrategy s) {
  switch (s) {
    case JacobianStrategy::Automatic: return "automatic";
    case JacobianStrategy::Dense: return "dense";
    case JacobianStrategy::Sparse: return "sparse";
    case JacobianStrategy::Tape: return "tape";
  }
  return "unknown";
}

JacobianStrategy jacobian_strategy_from_string(std::string_view name) {
  for (JacobianStrategy s : {JacobianStrategy::Automatic, JacobianStrategy::Dense,
                             JacobianStrategy::Sparse, JacobianStrategy::Tape})
    if (name == to_string(s)) return s;
  throw Error("unknown Jacobian strategy '" + std::string(name) +
              "': expected one of automatic, dense, sparse, tape");
}

void SystemOptions::validate() const {
  COSTATE_CHECK(dense_max >= 0, "SystemOptions::dense_max = " << dense_max << " must be >= 0");
  COSTATE_CHECK(max_colours >= 1,
                "SystemOptions::max_colours = " << max_colours << " must be >= 1");
}

/// What all copies of a System share: the resolved strategy and, for the
/// sparse one, the pattern (CSC by input column) and colouring; a tape for
/// the objective's terms.
struct System::Shared {
  JacobianStrategy strategy = JacobianStrategy::Automatic;  // Automatic: not resolved yet
  ad::SparsityPattern pattern;  // n_x × (n + n_p), by rows
  ad::SparsityPattern columns;  // its transpose: the rows of each input column
  std::vector<int> colour;
  int colours = 0;
  /// K when every state column of `columns` has K rows, else 0.
  std::size_t state_column_length = 0;
  /// Sparse linearizations of every Linearization of this System (and its
  /// copies), counted together: the pattern re-checks' clock.
  std::int64_t sparse_linearizations = 0;
  ad::Tape tape;
};

System::System(std::shared_ptr<const detail::SystemModel> model, std::size_t n_model_states,
               std::size_t n_parameters, bool has_terminal, bool has_running,
               bool has_observations, SystemOptions options)
    : model_(std::move(model)), n_(n_model_states), nx_(n_model_states + (has_running ? 1 : 0)),
      np_(n_parameters), has_terminal_(has_terminal), has_running_(has_running),
      has_observations_(has_observations), options_(options),
      shared_(std::make_shared<Shared>()) {
  options_.validate();
  COSTATE_CHECK(n_ > 0, "ode::System: the model has no states");
  direct_ = model_->direct_calls();
  set_algebraic();
  const std::size_t inputs = n_ + np_;
  if (options_.jacobian == JacobianStrategy::Dense ||
      (options_.jacobian == JacobianStrategy::Automatic &&
       inputs <= static_cast<std::size_t>(options_.dense_max)))
    shared_->strategy = JacobianStrategy::Dense;
  else if (options_.jacobian == JacobianStrategy::Tape)
    shared_->strategy = JacobianStrategy::Tape;
  // Sparse / Automatic beyond dense_max: resolved at the first
  // linearization (the pattern is detected there).
}

JacobianStrategy System::strategy() const { return shared_->strategy; }

System System::without_running_cost() const {
  // The same model, its events included (what `costate run` integrates).
  return System(model_, n_, np_, has_terminal_, false, has_observations_, options_)
      .with_events(events_);
}

// ---- DAEs (issue 32) --------------------------------------------------------

void System::set_algebraic() {
  algebraic_.assign(nx_, 0);
  for (const std::size_t i : model_->algebraic_states()) {
    COSTATE_CHECK(i < n_, "ode::System: algebraic state index " << i << " is not a state (the model has "
                                                                << n_ << " states)");
    COSTATE_CHECK(algebraic_[i] == 0, "ode::System: algebraic state " << i << " is listed twice");
    algebraic_[i] = 1;
    ++n_algebraic_;
  }
  unknowns_ = n_algebraic_ > 0 ? algebraic_ : std::vector<std::uint8_t>{};
  const std::vector<std::size_t> u = model_->initial_unknowns();
  if (u.empty()) return;
  residual_form_ = true;
  unknowns_.assign(nx_, 0);
  for (const std::size_t i : u) {
    COSTATE_CHECK(i < n_, "ode::System: initial unknown " << i << " is not a state (the model has "
                                                          << n_ << " states)");
    COSTATE_CHECK(unknowns_[i] == 0, "ode::System: initial unknown " << i << " is listed twice");
    unknowns_[i] = 1;
  }
  COSTATE_CHECK(n_ == 2 * n_algebraic_,
                "ode::System: a fully implicit model (ResidualForm) with n = "
                    << n_algebraic_ << " unknowns has the state (y, y'): its initial state must "
                    << "hold 2n = " << 2 * n_algebraic_ << " values (y0, then a guess of y'(t0)), got "
                    << n_);
  COSTATE_CHECK(u.size() == n_algebraic_,
                "ode::System: " << u.size() << " initial unknowns for " << n_algebraic_
                                << " algebraic equations (a fully implicit model's states are "
                                   "(y, y'): its initial state holds 2n values)");
}


namespace {

ad::SparsityPattern detect(const detail::SystemModel& model, std::size_t n, std::size_t nx,
                           std::size_t np, double t, std::span<const double> x,
                           std::span<const double> p) {
  std::vector<double> in(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
  in.insert(in.end(), p.begin(), p.end());
  auto f = [&](const std::vector<ad::IndexSet>& xs) {
    std::vector<ad::IndexSet> xa(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n));
    xa.resize(nx);  // z: a constant
    std::vector<ad::IndexSet> out(nx);
    model.rhs(t, std::span<const ad::IndexSet>(xa),
              std::span<const ad::IndexSet>(xs.data() + n, np), std::span<ad::IndexSet>(out));
    return out;
  };
  return ad::detect_sparsity(f, in);
}

}  // namespace

const ad::SparsityPattern& System::sparsity(double t, std::span<const double> x,
                                            std::span<const double> p) const {
  if (shared_->pattern.rows == 0) shared_->pattern = detect(*model_, n_, nx_, np_, t, x, p);
  return shared_->pattern;
}

/// Automatic (and Sparse before its first linearization) detect the pattern
/// at (t, x, p) and colour it: Sparse with ≤ max_colours colours, else Tape.
JacobianStrategy System::resolve_strategy(double t0, std::span<const double> x0,
                                          std::span<const double> p0) const {
  const System& sys = *this;
  System::Shared& sh = *sys.shared_;
  if (sh.strategy == JacobianStrategy::Automatic ||
      (sh.strategy == JacobianStrategy::Sparse && sh.colours == 0)) {
    const ad::SparsityPattern& pat = sys.sparsity(t0, x0, p0);
    const int limit = sys.options().max_colours;
    sh.strategy = JacobianStrategy::Tape;
    if (pat.max_row_nnz() <= limit) {
      const ad::ColumnColoring c = ad::color_columns(pat);
      if (c.colors <= limit) {
        sh.strategy = JacobianStrategy::Sparse;
        sh.colours = std::max(1, c.colors);
        sh.colour = c.color;
        sh.columns = pat.transpose();
        const std::size_t n = sys.n_model_states();
        sh.state_column_length = sh.columns.row(0).size();
        for (std::size_t j = 0; j < n; ++j)
          if (sh.columns.row(static_cast<int>(j)).size() != sh.state_column_length)
            sh.state_column_length = 0;
      }
    }
  }
  return sh.strategy;
}

/// The System's sparse linearizations 1, 2, 4, …, 1024 and then every
/// 1024th (all its linearizations together: an explicit RK scheme's s stages
/// check s times less often than s separate clocks).
inline bool System::pattern_check_due() const {
  const std::int64_t c = shared_->sparse_linearizations++;
  return c > 0 &&
         (c % kPatternCheckInterval == 0 || (c < kPatternCheckInterval && (c & (c - 1)) == 0));
}

/// Throws when [f_y | f_p] at (t, x, p) has an entry outside the pattern.
void System::check_sparsity_pattern(double t0, std::span<const double> x0,
                                    std::span<const double> p0) const {
  const System& sys = *this;
  const ad::SparsityPattern now = detect(sys.model(), sys.n_model_states(), sys.n_states(),
                                         sys.n_parameters(), t0, x0, p0);
  const ad::SparsityPattern& known = sys.shared_->pattern;
  for (int i = 0; i < now.rows; ++i)
    for (int j : now.row(i))
      COSTATE_CHECK(known.contains(i, j),
                    "ode::System: the right-hand side's sparsity pattern changed with the "
                    "state: entry ("
                        << i << ", " << j << ") of [f_y | f_p] appeared at t = " << t0
                        << " (not in the pattern detected at the first linearization). The "
                           "coloured Jacobian is invalid for this model: use "
                           "SystemOptions::jacobian = JacobianStrategy::Tape (or "
                           "DiscreteAdjoint::coloured_jacobian = false)");
}

// ------------------------------------------------------------ Linearization

struct Linearization::Impl {
  const System* sys = nullptr;
  JacobianStrategy strategy = JacobianStrategy::Dense;
  std::size_t n = 0, nx = 0, np = 0, nin = 0;
  std::vector<double> value;
  std::vector<double> dense;   // Dense: column-major nx × nin
  std::vector<double> sparse;  // Sparse: values in CSC order of Shared::columns
  bool sparse_ready = true;    // one-pass sparse: `sparse` formed (lazily) from od
  std::vector<Dual8> xd, pd, od;
  std::vector<detail::SystemModel::Dual1> xd1, pd1, od1;  // jvp_many with one direction
  std::int64_t count = 0;
  // Tape
  ad::Tape tape;
  std::vector<ad::Real> xr, pr, outr;
  bool adjoints_dirty = false, tangents_only = false, value_ready = true;
  bool seeded = false;  // xd, pd hold dense_at's one-pass unit seeds
  double t = 0.0;
  std::vector<double> x, p;  // Tape: the point (for jvp / jacobian by Dual passes)
  // The model's own reverse derivatives (SystemModel::own_vjp_workspace).
  bool use_own = false;
  std::vector<double> own;
  // The model's Jacobian rows (DirectCalls::rows): the one-pass dense
  // strategy evaluates them instead of a Dual pass of the model.
  bool use_rows = false;
  std::vector<double> rows_r;  // the rows kernel's registers (prepared)
  bool point_only = false;  // the last linearization was at_point's (own rule without f)
  bool point_in_own = false;  // x, p not copied: own[1 …] holds them (DirectCalls)

  // at() and vjp() past the model's DirectCalls (out of line: the public
  // entries then keep no frame on that path).
  [[gnu::noinline]] static void at_general(Impl& m, double t, std::span<const double> x,
                                           std::span<const double> p);
  [[gnu::noinline]] static void vjp_general(Impl& m, std::span<const double> w,
                                            std::span<double> xbar, std::span<double> pbar);

  /// x, p of the last at() (from the model's record when left there).
  void point() {
    if (!point_in_own) return;
    x.assign(own.begin() + 1, own.begin() + 1 + static_cast<std::ptrdiff_t>(n));
    p.assign(own.begin() + 1 + static_cast<std::ptrdiff_t>(n),
             own.begin() + 1 + static_cast<std::ptrdiff_t>(n + np));
    point_in_own = false;
  }

  void resolve(double t0, std::span<const double> x0, std::span<const double> p0) {
    strategy = sys->resolve_strategy(t0, x0, p0);
  }

  // One Dual pass seeding input j with tangent seed(j) ∈ [0, 8) or -1.
  template <class Seed>
  void dual_pass(double t0, std::span<const double> x0, std::span<const double> p0, Seed seed) {
    seeded = false;
    for (std::size_t i = 0; i < nx; ++i) {
      xd[i] = Dual8(i < n ? x0[i] : 0.0);
      if (i < n) {
        const int c = seed(i);
        if (c >= 0) xd[i].set_tangent(c, 1.0);
      }
    }
    for (std::size_t j = 0; j < np; ++j) {
      pd[j] = Dual8(p0[j]);
      const int c = seed(n + j);
      if (c >= 0) pd[j].set_tangent(c, 1.0);
    }
    sys->model().rhs(t0, std::span<const Dual8>(xd), std::span<const Dual8>(pd),
                     std::span<Dual8>(od));
  }

  // The one-pass dense evaluation at xd's and pd's values (their seeds are
  // the unit ones): the model's Jacobian rows into the Dual outputs when it
  // has them (the same layout), else a Dual pass.
  void dense_pass(double t0) {
    if (use_rows) {  // rows_r holds p (dense_at) and the constants (prepared)
      double* r = rows_r.data();
      r[0] = t0;
      for (std::size_t i = 0; i < n; ++i) r[1 + i] = xd[i].value();
      expr::Kernel::evaluate_prepared(sys->direct_.rows, r, od.front().tangents());
      return;
    }
    sys->model().rhs(t0, std::span<const Dual8>(xd), std::span<const Dual8>(pd),
                     std::span<Dual8>(od));
  }

  // One-pass dense (n + n_p ≤ 8): the Jacobian stays in the Dual outputs,
  // row i of [f_y | f_p] being od[i]'s tangents (no copy); `dense` is formed
  // only when jacobian() asks for it.
  bool one_pass() const { return nin <= static_cast<std::size_t>(kChunk); }

  void dense_at(double t0, std::span<const double> x0, std::span<const double> p0) {
    if (one_pass()) {
      // One pass; the unit seeds stay in place from call to call, only the
      // values change.
      if (!seeded) {
        for (std::size_t i = 0; i < nx; ++i) {
          xd[i] = Dual8(0.0);
          if (i < n) xd[i].set_tangent(static_cast<int>(i), 1.0);
        }
        for (std::size_t j = 0; j < np; ++j) {
          pd[j] = Dual8(0.0);
          pd[j].set_tangent(static_cast<int>(n + j), 1.0);
        }
        seeded = true;
      }
      for (std::size_t i = 0; i < n; ++i) xd[i].value() = x0[i];
      for (std::size_t j = 0; j < np; ++j) pd[j].value() = p0[j];
      if (use_rows) std::copy(p0.begin(), p0.end(), rows_r.begin() + 1 + static_cast<std::ptrdiff_t>(n));
      dense_pass(t0);
      for (std::size_t i = 0; i < nx; ++i) value[i] = od[i].value();
      return;
    }
    dense.resize(nx * nin);
    const std::size_t passes = std::max<std::size_t>(1, (nin + kChunk - 1) / kChunk);
    for (std::size_t pass = 0; pass < passes; ++pass) {
      const std::size_t first = pass * kChunk, last = std::min(nin, first + kChunk);
      dual_pass(t0, x0, p0, [&](std::size_t j) {
        return j >= first && j < last ? static_cast<int>(j - first) : -1;
      });
      for (std::size_t j = first; j < last; ++j) {
        double* col = dense.data() + j * nx;
        const int c = static_cast<int>(j - first);
        for (std::size_t i = 0; i < nx; ++i) col[i] = od[i].tangent(c);
      }
      if (pass == 0)
        for (std::size_t i = 0; i < nx; ++i) value[i] = od[i].value();
    }
  }

  // The column-major dense Jacobian of a one-pass linearization.
  void dense_from_rows() {
    dense.resize(nx * nin);
    for (std::size_t i = 0; i < nx; ++i)
      for (std::size_t j = 0; j < nin; ++j) dense[j * nx + i] = od[i].tangent(static_cast<int>(j));
  }

  // One-pass sparse (≤ 8 colours): the non-zeros stay in the Dual outputs
  // (vjp reads them there by rows); `sparse` (CSC) is formed only for jvp
  // and jacobian().
  bool sparse_one_pass() const { return sys->shared_->colours <= kChunk; }

  void sparse_from_outputs() {
    if (sparse_ready) return;
    const System::Shared& sh = *sys->shared_;
    for (std::size_t j = 0; j < nin; ++j) {
      const int c = sh.colour[j];
      const auto b = static_cast<std::size_t>(sh.columns.row_ptr[j]);
      const auto e = static_cast<std::size_t>(sh.columns.row_ptr[j + 1]);
      for (std::size_t k = b; k < e; ++k)
        sparse[k] = od[static_cast<std::size_t>(sh.columns.col_idx[k])].tangent(c);
    }
    sparse_ready = true;
  }

  void sparse_at(double t0, std::span<const double> x0, std::span<const double> p0) {
    const System::Shared& sh = *sys->shared_;
    if (sparse.size() != static_cast<std::size_t>(sh.columns.nnz()))
      sparse.resize(static_cast<std::size_t>(sh.columns.nnz()));
    if (sparse_one_pass()) {
      // One pass: the colour seeds stay in place from call to call (as
      // dense_at's), only the values change.
      if (!seeded) {
        dual_pass(t0, x0, p0, [&](std::size_t j) { return sh.colour[j]; });
        seeded = true;
      } else {
        for (std::size_t i = 0; i < n; ++i) xd[i].value() = x0[i];
        for (std::size_t j = 0; j < np; ++j) pd[j].value() = p0[j];
        sys->model().rhs(t0, std::span<const Dual8>(xd), std::span<const Dual8>(pd),
                         std::span<Dual8>(od));
      }
      sparse_ready = false;
      for (std::size_t i = 0; i < nx; ++i) value[i] = od[i].value();
      return;
    }
    const int passes = std::max(1, (sh.colours + kChunk - 1) / kChunk);
    for (int pass = 0; pass < passes; ++pass) {
      const int first = pass * kChunk;
      dual_pass(t0, x0, p0, [&](std::size_t j) {
        const int c = sh.colour[j] - first;
        return c >= 0 && c < kChunk ? c : -1;
      });
      for (std::size_t j = 0; j < nin; ++j) {
        const int c = sh.colour[j] - first;
        if (c < 0 || c >= kChunk) continue;
        const auto b = static_cast<std::size_t>(sh.columns.row_ptr[j]);
        const auto e = static_cast<std::size_t>(sh.columns.row_ptr[j + 1]);
        for (std::size_t k = b; k < e; ++k)
          sparse[k] = od[static_cast<std::size_t>(sh.columns.col_idx[k])].tangent(c);
      }
      if (pass == 0)
        for (std::size_t i = 0; i < nx; ++i) value[i] = od[i].value();
    }
    sparse_ready = true;
  }

  void check_pattern(double t0, std::span<const double> x0, std::span<const double> p0) {
    sys->check_sparsity_pattern(t0, x0, p0);
  }

  void tape_at(double t0, std::span<const double> x0, std::span<const double> p0) {
    t = t0;
    x.assign(x0.begin(), x0.end());
    p.assign(p0.begin(), p0.end());
    ad::Tape::Scope scope(tape);
    tape.reset();
    tape.start_recording();
    for (std::size_t i = 0; i < nx; ++i) {
      xr[i] = ad::Real(i < n ? x0[i] : 0.0);
      if (i < n) tape.register_input(xr[i]);
    }
    for (std::size_t j = 0; j < np; ++j) {
      pr[j] = ad::Real(p0[j]);
      tape.register_input(pr[j]);
    }
    sys->model().rhs(t0, std::span<const ad::Real>(xr), std::span<const ad::Real>(pr),
                     std::span<ad::Real>(outr));
    for (auto& o : outr) tape.register_output(o);
    tape.stop_recording();
    for (std::size_t i = 0; i < nx; ++i) value[i] = outr[i].value();
    adjoints_dirty = false;
  }
};

Linearization::Linearization(const System& system, bool tangents_only)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.tangents_only = tangents_only;
  m.sys = &system;
  m.n = system.n_model_states();
  m.nx = system.n_states();
  m.np = system.n_parameters();
  m.nin = m.n + m.np;
  m.value.assign(m.nx, 0.0);
  m.xd.resize(m.nx);
  m.pd.resize(m.np);
  m.od.resize(m.nx);
  m.strategy = system.strategy();
  const std::size_t own = system.model().own_vjp_workspace();
  if (!tangents_only && system.options().jacobian == JacobianStrategy::Automatic) {
    // The model's Jacobian rows (one call for f and [f_y | f_p], dense
    // products fused into the explicit RK adjoint) before its own vjp.
    if (system.direct_.rows != nullptr && m.one_pass() && m.nx == m.n &&
        m.strategy == JacobianStrategy::Dense) {
      m.use_rows = true;
      const expr::Kernel& rows = *system.direct_.rows;
      assert(rows.n_outputs() == m.nx * kInputStride && "DirectCalls::rows: Dual<double, 8> rows");
      m.rows_r.assign(rows.registers(), 0.0);
      rows.prepare(m.rows_r.data(), m.od.front().tangents());
    } else if (own > 0) {
      m.use_own = true;
      m.own.resize(own);
    }
  }
}
Linearization::~Linearization() = default;
Linearization::Linearization(Linearization&&) noexcept = default;
Linearization& Linearization::operator=(Linearization&&) noexcept = default;

JacobianStrategy Linearization::strategy() const { return impl_->strategy; }

const double* Linearization::dense_row(std::size_t i) const {
  const Impl& m = *impl_;
  if (m.use_own || m.tangents_only || m.strategy != JacobianStrategy::Dense || !m.one_pass() ||
      i >= m.nx)
    return nullptr;
  return m.od[i].tangents();
}

double* Linearization::dense_input(std::size_t i) {
  Impl& m = *impl_;
  if (!m.seeded || dense_row(0) == nullptr || i >= m.nx) return nullptr;
  return &m.xd[i].value();
}

void Linearization::evaluate(double t) {
  Impl& m = *impl_;
  assert(m.seeded && "Linearization::evaluate: no one-pass dense at() before");
  m.dense_pass(t);
  for (std::size_t i = 0; i < m.nx; ++i) m.value[i] = m.od[i].value();
  ++m.count;
}

void Linearization::at(double t, std::span<const double> x, std::span<const double> p) {
  Impl& m = *impl_;
  m.point_only = false;
  const detail::DirectCalls& d = m.sys->direct_;
  if (m.use_own && d.rhs != nullptr) {
    // The model's own record through its DirectCalls (a tail call: this
    // entry keeps no frame). The point (for jvp / jacobian's Dual passes)
    // stays in the record, read back only if asked for (DirectCalls: work
    // begins with t, y, p).
    m.t = t;
    m.value_ready = true;
    m.point_in_own = true;
    ++m.count;
    return d.rhs(d.self, t, x.data(), p.data(), m.value.data(), m.own.data());
  }
  Impl::at_general(m, t, x, p);
}

void Linearization::Impl::at_general(Impl& m, double t, std::span<const double> x,
                                     std::span<const double> p) {
  if (m.use_own) {  // the model differentiates itself: keep its record
    m.t = t;
    m.value_ready = true;
    ++m.count;
    m.x.assign(x.begin(), x.end());
    m.p.assign(p.begin(), p.end());
    m.sys->model().own_linearize(t, x, p, std::span<double>(m.value), std::span<double>(m.own));
    return;
  }
  if (m.tangents_only) {
    // Tangents never form the Jacobian: jvp_many seeds its directions into
    // one Dual pass per 8 of them (f_x V + f_p Q directly, f as the primal).
    m.t = t;
    m.x.assign(x.begin(), x.end());
    m.p.assign(p.begin(), p.end());
    m.value_ready = false;
    ++m.count;
    return;
  }
  if (m.strategy != JacobianStrategy::Dense && m.strategy != JacobianStrategy::Tape &&
      !(m.strategy == JacobianStrategy::Sparse && m.sys->shared_->colours > 0))
    m.resolve(t, x, p);
  switch (m.strategy) {
    case JacobianStrategy::Dense: m.dense_at(t, x, p); break;
    case JacobianStrategy::Sparse: {
      if (m.sys->pattern_check_due()) m.check_pattern(t, x, p);
      m.sparse_at(t, x, p);
      break;
    }
    case JacobianStrategy::Tape:
    case JacobianStrategy::Automatic:
      if (m.xr.size() != m.nx) {
        m.xr.resize(m.nx);
        m.pr.resize(m.np);
        m.outr.resize(m.nx);
      }
      m.tape_at(t, x, p);
      break;
  }
  ++m.count;
}

void Linearization::at_point(double t, std::span<const double> x, std::span<const double> p) {
  Impl& m = *impl_;
  // A model with DirectCalls (an equation model's kernel) has no
  // linearize_point: straight to at()'s direct path, no virtual call.
  if (m.use_own && m.sys->direct_.rhs == nullptr &&
      m.sys->model().own_linearize_point(t, x, p, std::span<double>(m.own))) {
    m.point_only = true;  // no copy of (t, x, p): value(), jvp, jacobian refuse
    m.point_in_own = false;
    ++m.count;
    return;
  }
  at(t, x, p);
}

std::span<const double> Linearization::value() const {
  Impl& m = *impl_;
  COSTATE_CHECK(!m.point_only, "Linearization::value: the last linearization was at_point's "
                               "(no f there); use at()");
  if (!m.value_ready) {
    m.sys->model().rhs(m.t, m.x, m.p, std::span<double>(m.value));
    m.value_ready = true;
  }
  return m.value;
}

void Linearization::vjp(std::span<const double> w, std::span<double> xbar,
                        std::span<double> pbar) {
  Impl& m = *impl_;
  const detail::DirectCalls& d = m.sys->direct_;
  if (m.use_own && d.vjp != nullptr)  // no running cost here: x = y (a tail call, no frame)
    return d.vjp(d.self, m.own.data(), w.data(), xbar.data(), pbar.data());
  Impl::vjp_general(m, w, xbar, pbar);
}

void Linearization::Impl::vjp_general(Impl& m, std::span<const double> w, std::span<double> xbar,
                                      std::span<double> pbar) {
  if (m.use_own) {  // no running cost here: x = y
    m.sys->model().own_vjp(std::span<double>(m.own), w, xbar, pbar);
    return;
  }
  const std::size_t n = m.n, nx = m.nx;
  COSTATE_CHECK(!m.tangents_only, "Linearization::vjp: this linearization was made for tangents only");
  switch (m.strategy) {
    case JacobianStrategy::Dense: {
      if (m.one_pass()) {
        // Row by row over the Dual outputs; each entry sums over i in the
        // same order as the column-wise product below.
        // All kChunk lanes (a fixed-length loop the compiler unrolls; the
        // lanes past n + n_p were never seeded and stay unused).
        double acc[kChunk] = {};
        for (std::size_t i = 0; i < nx; ++i) {
          const double wi = w[i];
          const double* row = m.od[i].tangents();
          for (int j = 0; j < kChunk; ++j) acc[j] += wi * row[j];
        }
        for (std::size_t j = 0; j < n; ++j) xbar[j] = acc[j];
        for (std::size_t j = n; j < m.nin; ++j) pbar[j - n] += acc[j];
        break;
      }
      for (std::size_t j = 0; j < m.nin; ++j) {
        const double* col = m.dense.data() + j * nx;
        double acc = 0.0;
        for (std::size_t i = 0; i < nx; ++i) acc += w[i] * col[i];
        if (j < n)
          xbar[j] = acc;
        else
          pbar[j - n] += acc;
      }
      break;
    }
    case JacobianStrategy::Sparse: {
      if (m.sparse_one_pass()) {
        // By columns over the Dual outputs (entry J(i, j) is lane colour(j)
        // of od[i]): each entry j sums w_i J(i, j) over i in increasing
        // order, as the CSC loop below does (the same bits), in a register
        // — a sum by rows into memory would chain each entry's updates
        // through store-to-load forwarding (a parameter read by every row:
        // n such updates in a row).
        const System::Shared& sh = *m.sys->shared_;
        const ad::SparsityPattern& cols = sh.columns;
        const int* first = cols.row_ptr.data();
        const int* rows = cols.col_idx.data();
        const Dual8* od = m.od.data();
        const double* wv = w.data();
        // State columns all of one length K (banded models: Lorenz-96,
        // stencils) with K a compile-time constant: the same sums, unrolled.
        auto uniform = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
          for (std::size_t j = 0; j < n; ++j) {
            const int c = sh.colour[j];
            const int* r = rows + j * K;
            double acc = 0.0;
            for (std::size_t k = 0; k < K; ++k) {
              const auto i = static_cast<std::size_t>(r[k]);
              acc += wv[i] * od[i].tangent(c);
            }
            xbar[j] = acc;
          }
          return n;
        };
        std::size_t done = 0;  // state columns summed by `uniform`
        switch (sh.state_column_length) {
          case 2: done = uniform(std::integral_constant<std::size_t, 2>{}); break;
          case 3: done = uniform(std::integral_constant<std::size_t, 3>{}); break;
          case 4: done = uniform(std::integral_constant<std::size_t, 4>{}); break;
          case 5: done = uniform(std::integral_constant<std::size_t, 5>{}); break;
          case 6: done = uniform(std::integral_constant<std::size_t, 6>{}); break;
          default: break;
        }
        for (std::size_t j = done; j < m.nin; ++j) {
          const int c = sh.colour[j];
          double acc = 0.0;
          for (auto k = static_cast<std::size_t>(first[j]); k < static_cast<std::size_t>(first[j + 1]);
               ++k) {
            const auto i = static_cast<std::size_t>(rows[k]);
            acc += wv[i] * od[i].tangent(c);
          }
          if (j < n)
            xbar[j] = acc;
          else
            pbar[j - n] += acc;
        }
        break;
      }
      const ad::SparsityPattern& cols = m.sys->shared_->columns;
      for (std::size_t j = 0; j < m.nin; ++j) {
        double acc = 0.0;
        const auto b = static_cast<std::size_t>(cols.row_ptr[j]);
        const auto e = static_cast<std::size_t>(cols.row_ptr[j + 1]);
        for (std::size_t k = b; k < e; ++k)
          acc += w[static_cast<std::size_t>(cols.col_idx[k])] * m.sparse[k];
        if (j < n)
          xbar[j] = acc;
        else
          pbar[j - n] += acc;
      }
      break;
    }
    case JacobianStrategy::Tape:
    case JacobianStrategy::Automatic: {
      ad::Tape::Scope scope(m.tape);
      if (m.adjoints_dirty) m.tape.clear_adjoints();
      for (std::size_t i = 0; i < nx; ++i) m.outr[i].set_gradient(w[i]);
      m.tape.evaluate();
      m.adjoints_dirty = true;
      for (std::size_t i = 0; i < n; ++i) xbar[i] = m.xr[i].gradient();
      for (std::size_t j = 0; j < m.np; ++j) pbar[j] += m.pr[j].gradient();
      break;
    }
  }
  for (std::size_t i = n; i < nx; ++i) xbar[i] = 0.0;
}

void Linearization::jvp_many(std::size_t mdir, std::span<const double> V,
                             std::span<const double> Q, std::span<double> out) {
  Impl& m = *impl_;
  COSTATE_CHECK(!m.point_only, "Linearization::jvp_many: the last linearization was at_point's "
                               "(vjp only); use at()");
  m.point();
  const std::size_t n = m.n, nx = m.nx;
  std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(nx * mdir), 0.0);
  const JacobianStrategy strategy =
      m.tangents_only || m.use_own ? JacobianStrategy::Tape : m.strategy;
  // Row j of the direction block: V's for a state, Q's for a parameter.
  auto dir_row = [&](std::size_t j) {
    return j < n ? V.data() + j * mdir : Q.data() + (j - n) * mdir;
  };
  switch (strategy) {
    case JacobianStrategy::Dense:
      if (m.one_pass()) {
        // Row i of the Dual outputs; each out entry sums over j in the same
        // order as the column-wise loop below.
        for (std::size_t i = 0; i < nx; ++i) {
          const double* row = m.od[i].tangents();
          double* o = out.data() + i * mdir;
          for (std::size_t j = 0; j < m.nin; ++j) {
            const double a = row[j];
            if (a == 0.0) continue;
            const double* d = dir_row(j);
            for (std::size_t k = 0; k < mdir; ++k) o[k] += a * d[k];
          }
        }
        return;
      }
      for (std::size_t j = 0; j < m.nin; ++j) {
        const double* col = m.dense.data() + j * nx;
        const double* d = dir_row(j);
        for (std::size_t i = 0; i < nx; ++i) {
          const double a = col[i];
          if (a == 0.0) continue;
          double* o = out.data() + i * mdir;
          for (std::size_t k = 0; k < mdir; ++k) o[k] += a * d[k];
        }
      }
      return;
    case JacobianStrategy::Sparse: {
      m.sparse_from_outputs();
      const ad::SparsityPattern& cols = m.sys->shared_->columns;
      for (std::size_t j = 0; j < m.nin; ++j) {
        const double* d = dir_row(j);
        const auto b = static_cast<std::size_t>(cols.row_ptr[j]);
        const auto e = static_cast<std::size_t>(cols.row_ptr[j + 1]);
        for (std::size_t q = b; q < e; ++q) {
          const double a = m.sparse[q];
          double* o = out.data() + static_cast<std::size_t>(cols.col_idx[q]) * mdir;
          for (std::size_t k = 0; k < mdir; ++k) o[k] += a * d[k];
        }
      }
      return;
    }
    case JacobianStrategy::Tape:
    case JacobianStrategy::Automatic: {
      if (mdir == 1 && m.sys->model().second_order()) {
        // One direction (second-order sweeps): one Dual<double, 1> pass (a
        // second-order System evaluates the model on Dual<double, 1>).
        using Dual1 = detail::SystemModel::Dual1;
        if (m.xd1.size() != nx) {
          m.xd1.resize(nx);
          m.pd1.resize(m.np);
          m.od1.resize(nx);
        }
        for (std::size_t i = 0; i < nx; ++i)
          m.xd1[i] = i < n ? Dual1(m.x[i], {V[i]}) : Dual1(0.0);
        for (std::size_t j = 0; j < m.np; ++j) m.pd1[j] = Dual1(m.p[j], {Q[j]});
        m.sys->model().rhs(m.t, std::span<const Dual1>(m.xd1), std::span<const Dual1>(m.pd1),
                           std::span<Dual1>(m.od1));
        for (std::size_t i = 0; i < nx; ++i) out[i] = m.od1[i].tangent(0);
        if (!m.value_ready) {
          for (std::size_t i = 0; i < nx; ++i) m.value[i] = m.od1[i].value();
          m.value_ready = true;
        }
        return;
      }
      // Dual passes of up to 8 directions at the recorded point.
      m.seeded = false;
      for (std::size_t first = 0; first < mdir; first += kChunk) {
        const std::size_t last = std::min(mdir, first + kChunk);
        for (std::size_t i = 0; i < nx; ++i) {
          m.xd[i] = Dual8(i < n ? m.x[i] : 0.0);
          if (i < n)
            for (std::size_t k = first; k < last; ++k)
              m.xd[i].set_tangent(static_cast<int>(k - first), V[i * mdir + k]);
        }
        for (std::size_t j = 0; j < m.np; ++j) {
          m.pd[j] = Dual8(m.p[j]);
          for (std::size_t k = first; k < last; ++k)
            m.pd[j].set_tangent(static_cast<int>(k - first), Q[j * mdir + k]);
        }
        m.sys->model().rhs(m.t, std::span<const Dual8>(m.xd), std::span<const Dual8>(m.pd),
                           std::span<Dual8>(m.od));
        for (std::size_t i = 0; i < nx; ++i)
          for (std::size_t k = first; k < last; ++k)
            out[i * mdir + k] = m.od[i].tangent(static_cast<int>(k - first));
        if (first == 0 && !m.value_ready) {
          for (std::size_t i = 0; i < nx; ++i) m.value[i] = m.od[i].value();
          m.value_ready = true;
        }
      }
      return;
    }
  }
}

void Linearization::jvp(std::span<const double> v, std::span<const double> q,
                        std::span<double> out) {
  jvp_many(1, v, q, out);
}

void Linearization::jacobian(std::span<double> out) {
  Impl& m = *impl_;
  const std::size_t nx = m.nx;
  COSTATE_CHECK_EQ(out.size(), nx * m.nin, "Linearization::jacobian: out must be n_x × (n + n_p)");
  COSTATE_CHECK(!m.point_only, "Linearization::jacobian: the last linearization was at_point's "
                               "(vjp only); use at()");
  m.point();
  if (m.tangents_only || m.use_own) {
    m.dense_at(m.t, m.x, m.p);
    if (m.one_pass()) m.dense_from_rows();
    std::copy(m.dense.begin(), m.dense.end(), out.begin());
    return;
  }
  switch (m.strategy) {
    case JacobianStrategy::Dense:
      if (m.one_pass()) m.dense_from_rows();
      std::copy(m.dense.begin(), m.dense.end(), out.begin());
      return;
    case JacobianStrategy::Sparse: {
      m.sparse_from_outputs();
      std::fill(out.begin(), out.end(), 0.0);
      const ad::SparsityPattern& cols = m.sys->shared_->columns;
      for (std::size_t j = 0; j < m.nin; ++j)
        for (auto k = static_cast<std::size_t>(cols.row_ptr[j]);
             k < static_cast<std::size_t>(cols.row_ptr[j + 1]); ++k)
          out[j * nx + static_cast<std::size_t>(cols.col_idx[k])] = m.sparse[k];
      return;
    }
    case JacobianStrategy::Tape:
    case JacobianStrategy::Automatic: {
      m.dense_at(m.t, m.x, m.p);
      if (m.one_pass()) m.dense_from_rows();
      std::copy(m.dense.begin(), m.dense.end(), out.begin());
      return;
    }
  }
}

// ------------------------------------------------------- System's products

void System::jacobian(double t, std::span<const double> x, std::span<const double> p,
                      std::span<double> out) const {
  Linearization lin(*this);
  lin.at(t, x, p);
  lin.jacobian(out);
}

void System::vjp(double t, std::span<const double> x, std::span<const double> p,
                 std::span<const double> w, std::span<double> xbar, std::span<double> pbar) const {
  Linearization lin(*this);
  lin.at(t, x, p);
  lin.vjp(w, xbar, pbar);
}

void System::jvp(double t, std::span<const double> x, std::span<const double> p,
                 std::span<const double> v, std::span<const double> q,
                 std::span<double> out) const {
  Linearization lin(*this);
  lin.at(t, x, p);
  lin.jvp(v, q, out);
}

double System::terminal_gradient(std::span<const double> y, std::span<const double> p,
                                 std::span<double> gy, std::span<double> gp) const {
  if (!has_terminal_) return 0.0;
  return detail::value_and_gradient(
      [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
        return model_->terminal(yy, pp);
      },
      y.first(n_), p, gy, gp, shared_->tape);
}

double System::observation_gradient(std::size_t k, std::span<const double> y,
                                    std::span<const double> p, std::span<double> gy,
                                    std::span<double> gp) const {
  if (!has_observations_) return 0.0;
  return detail::value_and_gradient(
      [&](std::span<const ad::Real> yy, std::span<const ad::Real> pp) {
        return model_->observation(k, yy, pp);
      },
      y.first(n_), p, gy, gp, shared_->tape);
}

}  // namespace costate::ode

// ---------------------------------------------------------------- second order
// (issue 14: SecondOrderLinearization and the objective terms' Hessian–vector
// pieces; system.hpp's last section has the maths)

namespace costate::ode {

namespace {

using Dual1 = ad::Dual<double, 1>;
using Reverse1 = ad::Reverse<Dual1>;

/// The second-order terms' tape: private to this file and to the thread
/// (a caller's recording is not disturbed), kept between calls.
ad::BasicTape<Dual1>& term_tape() {
  thread_local ad::BasicTape<Dual1> tape;
  return tape;
}

/// ℓ and ∇ℓ at (y + ε ẏ, p + ε ṗ), every quantity a Dual: one recording of
/// the term on Reverse<Dual<double, 1>>, one reverse sweep seeded with 1.
template <class F>
double term_hessian_vector(F&& f, std::span<const double> y, std::span<const double> ydot,
                           std::span<const double> p, std::span<const double> pdot,
                           std::span<double> gy, std::span<double> gy_dot, std::span<double> gp,
                           std::span<double> gp_dot, double& value_dot) {
  ad::BasicTape<Dual1>& tape = term_tape();
  typename ad::BasicTape<Dual1>::Scope scope(tape);
  tape.reset();
  tape.start_recording();
  std::vector<Reverse1> yr(y.size()), pr(p.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    yr[i] = Reverse1(Dual1(y[i], {ydot[i]}));
    tape.register_input(yr[i]);
  }
  for (std::size_t j = 0; j < p.size(); ++j) {
    pr[j] = Reverse1(Dual1(p[j], {pdot[j]}));
    tape.register_input(pr[j]);
  }
  Reverse1 J = f(std::span<const Reverse1>(yr), std::span<const Reverse1>(pr));
  tape.register_output(J);
  tape.stop_recording();
  J.set_gradient(Dual1(1.0));
  tape.evaluate();
  for (std::size_t i = 0; i < yr.size(); ++i) {
    const Dual1 g = yr[i].gradient();
    gy[i] += g.value();
    gy_dot[i] += g.tangent(0);
  }
  for (std::size_t j = 0; j < pr.size(); ++j) {
    const Dual1 g = pr[j].gradient();
    gp[j] += g.value();
    gp_dot[j] += g.tangent(0);
  }
  value_dot = J.value().tangent(0);
  return J.value().value();
}

}  // namespace

double System::terminal_hessian_vector(std::span<const double> y, std::span<const double> ydot,
                                       std::span<const double> p, std::span<const double> pdot,
                                       std::span<double> gy, std::span<double> gy_dot,
                                       std::span<double> gp, std::span<double> gp_dot,
                                       double& value_dot) const {
  value_dot = 0.0;
  if (!has_terminal_) return 0.0;
  return term_hessian_vector(
      [&](std::span<const Reverse1> yy, std::span<const Reverse1> pp) {
        return model_->terminal(yy, pp);
      },
      y.first(n_), ydot.first(n_), p, pdot, gy, gy_dot, gp, gp_dot, value_dot);
}

double System::observation_hessian_vector(std::size_t k, std::span<const double> y,
                                          std::span<const double> ydot,
                                          std::span<const double> p,
                                          std::span<const double> pdot, std::span<double> gy,
                                          std::span<double> gy_dot, std::span<double> gp,
                                          std::span<double> gp_dot, double& value_dot) const {
  value_dot = 0.0;
  if (!has_observations_) return 0.0;
  return term_hessian_vector(
      [&](std::span<const Reverse1> yy, std::span<const Reverse1> pp) {
        return model_->observation(k, yy, pp);
      },
      y.first(n_), ydot.first(n_), p, pdot, gy, gy_dot, gp, gp_dot, value_dot);
}

namespace detail {

namespace {
[[noreturn]] void no_second_order() {
  throw Error(
      "ode::System: second-order evaluations need a System from make_second_order_system "
      "(this one was made by make_system, first order only)");
}
}  // namespace

void SystemModel::rhs(double t, std::span<const Dual1> y, std::span<const Dual1> p,
                      std::span<Dual1> dxdt) const {
  std::vector<Dual8> yw(y.size()), pw(p.size()), ow(dxdt.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    yw[i] = Dual8(y[i].value());
    yw[i].set_tangent(0, y[i].tangent(0));
  }
  for (std::size_t j = 0; j < p.size(); ++j) {
    pw[j] = Dual8(p[j].value());
    pw[j].set_tangent(0, p[j].tangent(0));
  }
  rhs(t, std::span<const Dual8>(yw), std::span<const Dual8>(pw), std::span<Dual8>(ow));
  for (std::size_t i = 0; i < dxdt.size(); ++i) dxdt[i] = Dual1(ow[i].value(), {ow[i].tangent(0)});
}

void SystemModel::rhs(double, std::span<const SecondOrder4>, std::span<const SecondOrder4>,
                      std::span<SecondOrder4>) const {
  no_second_order();
}
void SystemModel::rhs(double, std::span<const SecondOrder6>, std::span<const SecondOrder6>,
                      std::span<SecondOrder6>) const {
  no_second_order();
}
void SystemModel::rhs(double, std::span<const SecondOrder8>, std::span<const SecondOrder8>,
                      std::span<SecondOrder8>) const {
  no_second_order();
}
void SystemModel::rhs(double, std::span<const Reverse1>, std::span<const Reverse1>,
                      std::span<Reverse1>) const {
  no_second_order();
}
SystemModel::Reverse1 SystemModel::terminal(std::span<const Reverse1>,
                                            std::span<const Reverse1>) const {
  no_second_order();
}
SystemModel::Reverse1 SystemModel::observation(std::size_t, std::span<const Reverse1>,
                                               std::span<const Reverse1>) const {
  no_second_order();
}

}  // namespace detail

namespace {

/// Tapes of the tape strategy, kept per thread between linearizations (a
/// fresh BasicTape<Dual<double, 1>> zero-fills its first chunk: that cost
/// dominated short sweeps); at most kKeptTapes are kept.
constexpr std::size_t kKeptTapes = 32;
std::vector<std::unique_ptr<ad::BasicTape<Dual1>>>& tape_pool() {
  thread_local std::vector<std::unique_ptr<ad::BasicTape<Dual1>>> pool;
  return pool;
}
std::unique_ptr<ad::BasicTape<Dual1>> acquire_tape() {
  auto& pool = tape_pool();
  if (pool.empty()) return std::make_unique<ad::BasicTape<Dual1>>();
  std::unique_ptr<ad::BasicTape<Dual1>> t = std::move(pool.back());
  pool.pop_back();
  return t;
}

}  // namespace

/// The outputs and inputs of the dense passes on K lanes.
template <int K>
struct SecondOrderPasses {
  static constexpr int kLanes = K;
  using Scalar = ad::SecondOrderDual<K>;
  static_assert(sizeof(Scalar) == 2 * (K + 1) * sizeof(double),
                "dense_input's stride: a SecondOrderDual<K> is 2 (K + 1) doubles");
  std::vector<Scalar> xd, pd, od;
};

/// x + ε ẋ, every lane 0, or lane l's 1 (a unit seed).
template <int K>
ad::SecondOrderDual<K> second_order_input(double x, double xdot, int seed = -1) {
  ad::SecondOrderDual<K> r(x);
  r.value_dot() = xdot;
  if (seed >= 0) r.lanes_value()[seed] = 1.0;
  return r;
}

struct SecondOrderLinearization::Impl {
  ~Impl() {
    if (tape_ptr && tape_pool().size() < kKeptTapes) tape_pool().push_back(std::move(tape_ptr));
  }
  const System* sys = nullptr;
  bool dense = true;
  std::size_t n = 0, nx = 0, np = 0, nin = 0;
  std::vector<double> value, value_dot;
  // Dense: [f_y | f_p] and its ε-part, column-major nx × nin.
  std::vector<double> J, Jdot;
  bool jacobian_ready = false;
  bool in_outputs = false;  // one dense pass: J and J̇ are read from od
  bool seeded = false;  // one pass: xd, pd hold the unit seeds
  // The passes' lanes: the narrowest K that holds nin (sparse: the colours)
  // in one pass, else 8.
  std::variant<SecondOrderPasses<4>, SecondOrderPasses<6>, SecondOrderPasses<8>> passes;
  // Sparse (the System's coloured strategy, resolved at the first at()):
  // [f_y | f_p] and J̇ by the System's columns (CSC, as `columns`).
  bool resolved = false, sparse = false, sparse_seeded = false;
  std::vector<double> sp, spd;
  // Tape: the recording at the point (a pooled tape, only for this strategy).
  std::unique_ptr<ad::BasicTape<Dual1>> tape_ptr;
  std::vector<Reverse1> xr, pr, outr;
  bool adjoints_dirty = false;
  double t = 0.0;
  std::vector<double> x, xdot, p, pdot;  // the point (for jacobian())

  template <class F>
  decltype(auto) with_passes(F&& f) {
    return std::visit(std::forward<F>(f), passes);
  }
  template <class F>
  decltype(auto) with_passes(F&& f) const {
    return std::visit(std::forward<F>(f), passes);
  }

  // ⌈nin/K⌉ passes on Dual<Dual<double, 1>, K> at the stored point: f, ḟ,
  // [f_y | f_p] and its ε-part.
  void dense_passes() { dense_passes(x, xdot, p, pdot); }
  // The same at (x, p) + ε (xdot, pdot), read now (at() with the dense
  // strategy passes its arguments straight through: nothing is stored).
  void dense_passes(std::span<const double> x0, std::span<const double> xdot0,
                    std::span<const double> p0, std::span<const double> pdot0) {
    with_passes([&](auto& ps) { dense_passes(ps, x0, xdot0, p0, pdot0); });
  }
  template <class Passes>
  void dense_passes(Passes& ps, std::span<const double> x0, std::span<const double> xdot0,
                    std::span<const double> p0, std::span<const double> pdot0) {
    constexpr int K = Passes::kLanes;
    J.resize(nx * nin);
    Jdot.resize(nx * nin);
    const int npass = static_cast<int>(std::max<std::size_t>(1, (nin + K - 1) / K));
    // Input e in lane e − first of its pass; one pass: [f_y | f_p] and its
    // ε-part stay in the Dual outputs (vjp reads them by rows), J, Jdot are
    // formed only for jacobian().
    run_passes(
        ps, npass, seeded, x0, xdot0, p0, pdot0,
        [&](std::size_t e, int first) {
          const auto c = static_cast<std::ptrdiff_t>(e) - first;
          return c >= 0 && c < K ? static_cast<int>(c) : -1;
        },
        [&](int first) {
          if (npass > 1)
            from_outputs(ps, static_cast<std::size_t>(first),
                         std::min<std::size_t>(nin, static_cast<std::size_t>(first + K)));
        });
    in_outputs = npass == 1;
    jacobian_ready = npass > 1;
  }

  // The passes of the dense and coloured strategies at (x0, p0) + ε (xdot0,
  // pdot0): pass k seeds input e in lane lane(e, k K) (−1: none), runs the
  // model, keeps f, ḟ from the first pass and hands the outputs to
  // read(k K). One pass (npass = 1): the unit seeds stay in place from call
  // to call once `seeded_once` (as Linearization's dense_at), only the values
  // and their ε-parts change.
  template <class Passes, class Lane, class Read>
  void run_passes(Passes& ps, int npass, bool& seeded_once, std::span<const double> x0,
                  std::span<const double> xdot0, std::span<const double> p0,
                  std::span<const double> pdot0, Lane lane, Read read) {
    using DD = typename Passes::Scalar;
    constexpr int K = Passes::kLanes;
    for (int pass = 0; pass < npass; ++pass) {
      const int first = pass * K;
      if (npass == 1 && seeded_once) {
        for (std::size_t i = 0; i < n; ++i) {
          ps.xd[i].value() = x0[i];
          ps.xd[i].value_dot() = xdot0[i];
        }
        for (std::size_t j = 0; j < np; ++j) {
          ps.pd[j].value() = p0[j];
          ps.pd[j].value_dot() = pdot0[j];
        }
      } else {
        seeded_once = npass == 1;
        for (std::size_t i = 0; i < nx; ++i)
          ps.xd[i] = i < n ? second_order_input<K>(x0[i], xdot0[i], lane(i, first)) : DD(0.0);
        for (std::size_t j = 0; j < np; ++j)
          ps.pd[j] = second_order_input<K>(p0[j], pdot0[j], lane(n + j, first));
      }
      sys->model().rhs(t, std::span<const DD>(ps.xd), std::span<const DD>(ps.pd),
                       std::span<DD>(ps.od));
      if (pass == 0)
        for (std::size_t i = 0; i < nx; ++i) {
          value[i] = ps.od[i].value();
          value_dot[i] = ps.od[i].value_dot();
        }
      read(first);
    }
  }

  // Columns [first, last) of J, Jdot from the Dual outputs of their pass.
  template <class Passes>
  void from_outputs(const Passes& ps, std::size_t first, std::size_t last) {
    for (std::size_t j = first; j < last; ++j) {
      const int c = static_cast<int>(j - first);
      for (std::size_t i = 0; i < nx; ++i) {
        J[j * nx + i] = ps.od[i].lanes_value()[c];
        Jdot[j * nx + i] = ps.od[i].lanes_dot()[c];
      }
    }
  }

  // K lanes for `lanes` columns per pass: the narrowest of 4, 6, 8.
  void choose_lanes(std::size_t lanes) {
    if (lanes <= 4)
      passes.emplace<SecondOrderPasses<4>>();
    else if (lanes <= 6)
      passes.emplace<SecondOrderPasses<6>>();
    else
      passes.emplace<SecondOrderPasses<8>>();
    with_passes([&](auto& ps) {
      ps.xd.resize(nx);
      ps.pd.resize(np);
      ps.od.resize(nx);
    });
  }

  // The coloured passes at the stored point: input j seeded in lane
  // colour(j) of its pass (⌈colours/K⌉ passes), each non-zero read from its
  // row's output in its column's lane.
  template <class Passes>
  void sparse_passes(Passes& ps) {
    constexpr int K = Passes::kLanes;
    const System::Shared& sh = *sys->shared_;
    const ad::SparsityPattern& cols = sh.columns;
    if (sp.size() != static_cast<std::size_t>(cols.nnz())) {
      sp.resize(static_cast<std::size_t>(cols.nnz()));
      spd.resize(sp.size());
    }
    run_passes(
        ps, std::max(1, (sh.colours + K - 1) / K), sparse_seeded, x, xdot, p, pdot,
        [&](std::size_t e, int first) {
          const int c = sh.colour[e] - first;
          return c >= 0 && c < K ? c : -1;
        },
        [&](int first) {
          for (std::size_t j = 0; j < nin; ++j) {
            const int c = sh.colour[j] - first;
            if (c < 0 || c >= K) continue;
            const auto b = static_cast<std::size_t>(cols.row_ptr[j]);
            const auto e = static_cast<std::size_t>(cols.row_ptr[j + 1]);
            for (std::size_t k = b; k < e; ++k) {
              const auto& o = ps.od[static_cast<std::size_t>(cols.col_idx[k])];
              sp[k] = o.lanes_value()[c];
              spd[k] = o.lanes_dot()[c];
            }
          }
        });
  }

  // vjp by rows of the one pass's Dual outputs; each entry sums over i in
  // increasing order (as the column loop of vjp, and as Linearization::vjp's
  // value sums).
  template <class Passes>
  void vjp_by_rows(const Passes& ps, std::span<const double> w, std::span<const double> wdot,
                   std::span<double> xbar, std::span<double> xbar_dot, std::span<double> pbar,
                   std::span<double> pbar_dot) const {
    constexpr std::size_t K = Passes::kLanes;
    double acc[K] = {}, accd[K] = {};
    for (std::size_t i = 0; i < nx; ++i) {
      const double wi = w[i], wdi = wdot[i];
      const double* row = ps.od[i].lanes_value();
      const double* row_dot = ps.od[i].lanes_dot();
      for (std::size_t j = 0; j < K; ++j) {
        const double a = row[j], adot = row_dot[j];
        acc[j] += wi * a;
        accd[j] += wdi * a + wi * adot;
      }
    }
    for (std::size_t j = 0; j < n; ++j) {
      xbar[j] = acc[j];
      xbar_dot[j] = accd[j];
    }
    for (std::size_t j = n; j < nin; ++j) {
      pbar[j - n] += acc[j];
      pbar_dot[j - n] += accd[j];
    }
  }

  void tape_at() {
    ad::BasicTape<Dual1>& tape = *tape_ptr;
    typename ad::BasicTape<Dual1>::Scope scope(tape);
    tape.reset();
    tape.start_recording();
    for (std::size_t i = 0; i < nx; ++i) {
      xr[i] = i < n ? Reverse1(Dual1(x[i], {xdot[i]})) : Reverse1(Dual1(0.0));
      if (i < n) tape.register_input(xr[i]);
    }
    for (std::size_t j = 0; j < np; ++j) {
      pr[j] = Reverse1(Dual1(p[j], {pdot[j]}));
      tape.register_input(pr[j]);
    }
    sys->model().rhs(t, std::span<const Reverse1>(xr), std::span<const Reverse1>(pr),
                     std::span<Reverse1>(outr));
    for (auto& o : outr) tape.register_output(o);
    tape.stop_recording();
    for (std::size_t i = 0; i < nx; ++i) {
      value[i] = outr[i].value().value();
      value_dot[i] = outr[i].value().tangent(0);
    }
    adjoints_dirty = false;
  }
};

SecondOrderLinearization::SecondOrderLinearization(const System& system)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  COSTATE_CHECK(system.model().second_order(),
                "SecondOrderLinearization: the System was made by make_system (first order "
                "only): use make_second_order_system");
  m.sys = &system;
  m.n = system.n_model_states();
  m.nx = system.n_states();
  m.np = system.n_parameters();
  m.nin = m.n + m.np;
  const SystemOptions& o = system.options();
  m.dense = o.jacobian == JacobianStrategy::Dense ||
            (o.jacobian != JacobianStrategy::Tape &&
             m.nin <= static_cast<std::size_t>(o.dense_max));
  m.value.assign(m.nx, 0.0);
  m.value_dot.assign(m.nx, 0.0);
  m.choose_lanes(m.nin);
  if (!m.dense) {
    m.tape_ptr = acquire_tape();
    m.xr.resize(m.nx);
    m.pr.resize(m.np);
    m.outr.resize(m.nx);
  }
}
SecondOrderLinearization::~SecondOrderLinearization() = default;
SecondOrderLinearization::SecondOrderLinearization(SecondOrderLinearization&&) noexcept = default;
SecondOrderLinearization& SecondOrderLinearization::operator=(SecondOrderLinearization&&) noexcept =
    default;

bool SecondOrderLinearization::dense() const { return impl_->dense; }

std::size_t SecondOrderLinearization::row_lanes() const {
  return impl_->with_passes([](const auto& ps) -> std::size_t { return ps.kLanes; });
}

static_assert(SecondOrderLinearization::kRowLanes == static_cast<std::size_t>(kChunk));

const double* SecondOrderLinearization::dense_row(std::size_t i) const {
  const Impl& m = *impl_;
  if (!m.dense || !m.seeded || i >= m.nx) return nullptr;
  return m.with_passes([&](const auto& ps) { return ps.od[i].lanes_value(); });
}

const double* SecondOrderLinearization::dense_row_dot(std::size_t i) const {
  const Impl& m = *impl_;
  if (!m.dense || !m.seeded || i >= m.nx) return nullptr;
  return m.with_passes([&](const auto& ps) { return ps.od[i].lanes_dot(); });
}

double* SecondOrderLinearization::dense_input(std::size_t i) {
  Impl& m = *impl_;
  if (dense_row(0) == nullptr || i >= m.nx) return nullptr;
  return m.with_passes([&](auto& ps) { return &ps.xd[i].value(); });
}

double* SecondOrderLinearization::dense_input_dot(std::size_t i) {
  Impl& m = *impl_;
  if (dense_row(0) == nullptr || i >= m.nx) return nullptr;
  return m.with_passes([&](auto& ps) { return &ps.xd[i].value_dot(); });
}

void SecondOrderLinearization::evaluate(double t) {
  Impl& m = *impl_;
  assert(m.dense && m.seeded && "SecondOrderLinearization::evaluate: no one-pass dense at() before");
  m.t = t;
  m.with_passes([&](auto& ps) {
    using DD = typename std::remove_cvref_t<decltype(ps)>::Scalar;
    m.sys->model().rhs(t, std::span<const DD>(ps.xd), std::span<const DD>(ps.pd),
                       std::span<DD>(ps.od));
    for (std::size_t i = 0; i < m.nx; ++i) {
      m.value[i] = ps.od[i].value();
      m.value_dot[i] = ps.od[i].value_dot();
    }
  });
  m.in_outputs = true;
  m.jacobian_ready = false;
}

void SecondOrderLinearization::at(double t, std::span<const double> x,
                                  std::span<const double> xdot, std::span<const double> p,
                                  std::span<const double> pdot) {
  Impl& m = *impl_;
  m.t = t;
  m.jacobian_ready = false;
  m.in_outputs = false;
  if (m.dense) {
    // jacobian() reads the passes' outputs: the point is not kept.
    m.dense_passes(x, xdot, p, pdot);
    return;
  }
  m.x.assign(x.begin(), x.end());
  m.xdot.assign(xdot.begin(), xdot.end());
  m.p.assign(p.begin(), p.end());
  m.pdot.assign(pdot.begin(), pdot.end());
  if (!m.resolved) {
    // Beyond dense_max: the System's coloured strategy when it has one (the
    // pattern detected and coloured once for all its linearizations), else
    // the tape.
    m.resolved = true;
    m.sparse = m.sys->options().jacobian != JacobianStrategy::Tape &&
               m.sys->resolve_strategy(t, x, p) == JacobianStrategy::Sparse;
    if (m.sparse) m.choose_lanes(static_cast<std::size_t>(m.sys->shared_->colours));
  }
  if (m.sparse) {
    if (m.sys->pattern_check_due()) m.sys->check_sparsity_pattern(t, x, p);
    m.with_passes([&](auto& ps) { m.sparse_passes(ps); });
    return;
  }
  m.tape_at();
}

std::span<const double> SecondOrderLinearization::value() const { return impl_->value; }
std::span<const double> SecondOrderLinearization::value_dot() const { return impl_->value_dot; }

void SecondOrderLinearization::vjp(std::span<const double> w, std::span<const double> wdot,
                                   std::span<double> xbar, std::span<double> xbar_dot,
                                   std::span<double> pbar, std::span<double> pbar_dot) {
  Impl& m = *impl_;
  const std::size_t n = m.n, nx = m.nx;
  if (m.dense && m.in_outputs) {
    m.with_passes(
        [&](const auto& ps) { m.vjp_by_rows(ps, w, wdot, xbar, xbar_dot, pbar, pbar_dot); });
  } else if (m.dense) {
    // Each value entry sums over i in Linearization::vjp's dense order.
    for (std::size_t j = 0; j < m.nin; ++j) {
      const double* col = m.J.data() + j * nx;
      const double* cold = m.Jdot.data() + j * nx;
      double acc = 0.0, accd = 0.0;
      for (std::size_t i = 0; i < nx; ++i) {
        acc += w[i] * col[i];
        accd += wdot[i] * col[i] + w[i] * cold[i];
      }
      if (j < n) {
        xbar[j] = acc;
        xbar_dot[j] = accd;
      } else {
        pbar[j - n] += acc;
        pbar_dot[j - n] += accd;
      }
    }
  } else if (m.sparse) {
    // By columns: each entry sums over its column's rows in increasing order.
    const ad::SparsityPattern& cols = m.sys->shared_->columns;
    for (std::size_t j = 0; j < m.nin; ++j) {
      double acc = 0.0, accd = 0.0;
      const auto b = static_cast<std::size_t>(cols.row_ptr[j]);
      const auto e = static_cast<std::size_t>(cols.row_ptr[j + 1]);
      for (std::size_t k = b; k < e; ++k) {
        const auto i = static_cast<std::size_t>(cols.col_idx[k]);
        acc += w[i] * m.sp[k];
        accd += wdot[i] * m.sp[k] + w[i] * m.spd[k];
      }
      if (j < n) {
        xbar[j] = acc;
        xbar_dot[j] = accd;
      } else {
        pbar[j - n] += acc;
        pbar_dot[j - n] += accd;
      }
    }
  } else {
    ad::BasicTape<Dual1>& tape = *m.tape_ptr;
    typename ad::BasicTape<Dual1>::Scope scope(tape);
    if (m.adjoints_dirty) tape.clear_adjoints();
    for (std::size_t i = 0; i < nx; ++i) m.outr[i].set_gradient(Dual1(w[i], {wdot[i]}));
    tape.evaluate();
    m.adjoints_dirty = true;
    for (std::size_t i = 0; i < n; ++i) {
      const Dual1 g = m.xr[i].gradient();
      xbar[i] = g.value();
      xbar_dot[i] = g.tangent(0);
    }
    for (std::size_t j = 0; j < m.np; ++j) {
      const Dual1 g = m.pr[j].gradient();
      pbar[j] += g.value();
      pbar_dot[j] += g.tangent(0);
    }
  }
  for (std::size_t i = n; i < nx; ++i) {
    xbar[i] = 0.0;
    xbar_dot[i] = 0.0;
  }
}

void SecondOrderLinearization::jacobian(std::span<double> out, std::span<double> out_dot) {
  Impl& m = *impl_;
  if (!m.jacobian_ready) {
    if (!m.in_outputs) {
      // Tape or sparse: the dense passes keep their f (the same values);
      // they overwrite the sparse passes' seeds.
      const std::vector<double> v = m.value, vd = m.value_dot;
      m.dense_passes();
      m.value = v;
      m.value_dot = vd;
      m.sparse_seeded = false;
    }
    if (!m.jacobian_ready) {
      m.with_passes([&](const auto& ps) { m.from_outputs(ps, 0, m.nin); });
      m.jacobian_ready = true;
    }
  }
  std::copy(m.J.begin(), m.J.end(), out.begin());
  std::copy(m.Jdot.begin(), m.Jdot.end(), out_dot.begin());
}

}  // namespace costate::ode
