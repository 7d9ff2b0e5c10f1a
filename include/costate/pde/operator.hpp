#pragma once
/// \file
/// pde::Operator<Model> — a pointwise stencil model (stencil.hpp) on a
/// distributed grid: the method-of-lines right-hand side u' = f(t, u, a, q)
/// with u the state (Model::components per cell), a the parameter fields
/// (Model::field_parameters per cell, distributed like u, e.g. κ) and q the
/// scalar parameters, and every derivative the implicit steppers and the
/// discrete adjoint need:
///
///   rhs            f(t, u)                  Kokkos kernel on double
///   jacobian       J = ∂f/∂u into a Matrix  ad::Dual over the stencil's colours
///   jvp            J v                      one Dual<double,1> pass
///   jvp_fields     (∂f/∂a) ȧ                one Dual<double,1> pass
///   vjp_fields_add ā += (∂f/∂a)ᵀ w          Dual over the colours of a, added
///                                           locally into the ghosted array,
///                                           then the adjoint ghost exchange Gᵀ
///   vjp_parameters_add  q̄ += (∂f/∂q)ᵀ w     Dual over q, per-rank partials
///                                           summed in rank order
/// (∂f/∂u)ᵀ w is Matrix::mult_transpose on the assembled Jacobian.
///
/// Boundaries: the outer ghosts of u follow the grid's rule (Dirichlet/
/// Neumann mirror), those of a reflect evenly; both are applied on the AD
/// type, so every derivative includes them.
///
/// Collective over the grid's communicator: every member that takes a
/// vector. Not thread-safe (shared work arrays). Limitations: host memory;
/// at most 16 scalar parameters and 8 components; Batch tangents per Dual
/// pass (the colours are processed in ⌈colours / Batch⌉ passes).

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "costate/ad/dual.hpp"
#include "costate/core/error.hpp"
#include "costate/pde/grid.hpp"
#include "costate/pde/matrix.hpp"
#include "costate/pde/operator_view.hpp"
#include "costate/pde/stencil.hpp"
#include "costate/tensor/reduce.hpp"

namespace costate::pde {

/// acc += s from a kernel: atomic when the host space runs threads, a plain
/// add on Kokkos::Serial (no compare-and-swap loop for doubles).
KOKKOS_INLINE_FUNCTION void accumulate(double* acc, double s) {
  if constexpr (costate::detail::kRunsInline<Host>)
    *acc += s;
  else
    Kokkos::atomic_add(acc, s);
}

/// The grid of a model: dim, cells, extent, boundaries and process layout
/// from the caller, dof/stencil width/shape from the model.
struct Domain {
  std::array<std::int64_t, 3> cells{16, 16, 1};
  std::array<std::array<double, 2>, 3> extent{{{0.0, 1.0}, {0.0, 1.0}, {0.0, 1.0}}};
  std::array<Boundary, 3> boundary{Boundary::Periodic, Boundary::Periodic, Boundary::Periodic};
  double dirichlet_value = 0.0;
  std::array<int, 3> processes{0, 0, 0};
};

template <class Model, int Batch = default_batch<Model>()>
class Operator {
 public:
  static constexpr int kDof = Model::components;
  static constexpr int kFields = Model::field_parameters;
  static constexpr int kScalars = Model::scalar_parameters;
  static_assert(kDof >= 1 && kDof <= 8, "pde::Operator: 1 to 8 components per cell");
  static_assert(kScalars >= 0 && kScalars <= 16, "pde::Operator: at most 16 scalar parameters");
  using Tangents = ad::Dual<double, Batch>;
  using model_type = Model;

  /// Builds the state grid (and the parameter-field grid, with the same
  /// decomposition). Collective over `comm`. Fields start at 1, scalar
  /// parameters at 0 unless given.
  Operator(MPI_Comm comm, const Domain& domain, Model model = {},
           std::vector<double> parameters = {})
      : model_(model),
        grid_(comm, spec(domain, kDof)),
        parameters_(std::move(parameters)) {
    if (parameters_.empty()) parameters_.assign(static_cast<std::size_t>(kScalars), 0.0);
    COSTATE_CHECK_EQ(parameters_.size(), static_cast<std::size_t>(kScalars),
                     "pde::Operator: one value per scalar parameter of the model");
    if constexpr (kFields > 0) {
      GridSpec fs = spec(domain, kFields);
      fs.processes = grid_.processes();
      field_grid_ = std::make_unique<Grid>(comm, fs);
      fields_ = field_grid_->create_global("pde::fields");
      fill(fields_, 1.0);
      a_local_ = field_grid_->create_local("pde::fields local");
    }
    u_local_ = grid_.create_local("pde::state local");
    v_local_ = grid_.create_local("pde::direction local");
    {
      std::int64_t n[3];
      bool per[3];
      for (int d = 0; d < 3; ++d) {
        n[d] = grid_.cells(d);
        per[d] = d >= Model::dim || grid_.periodic(d);
      }
      colouring_ = StencilColouring::make(Model::dim, Model::stencil_width, Model::star, n, per);
    }
    // Stencil offsets (star: axis neighbours; box: all within the width).
    const int s = Model::stencil_width;
    const int sy = Model::dim >= 2 ? s : 0, sz = Model::dim >= 3 ? s : 0;
    for (int dk = -sz; dk <= sz; ++dk)
      for (int dj = -sy; dj <= sy; ++dj)
        for (int di = -s; di <= s; ++di) {
          const int nonzero = (di != 0) + (dj != 0) + (dk != 0);
          if (Model::star && nonzero > 1) continue;
          offsets_.push_back({di, dj, dk});
        }
  }

  const Grid& grid() const { return grid_; }
  /// The grid of the parameter fields (null without field parameters).
  const Grid* field_grid() const { return field_grid_.get(); }
  /// Parameter fields a (owned entries; set them before use).
  const GlobalVector& fields() const { return fields_; }
  std::vector<double>& parameters() { return parameters_; }
  const std::vector<double>& parameters() const { return parameters_; }
  const Model& model() const { return model_; }
  /// Colours of the state Jacobian (passes = ⌈colours / Batch⌉).
  std::int64_t state_colours() const { return colours(kDof); }

  /// f = f(t, u). Collective.
  void rhs(double t, const GlobalVector& u, const GlobalVector& f) {
    exchange_state(u);
    exchange_fields();
    auto uv = grid_.view(u_local_);
    fill_boundary(grid_, uv);
    const Geometry geo = geometry();
    const double* ul = u_local_.data();
    const double* al = kFields > 0 ? a_local_.data() : nullptr;
    double* out = f.data();
    double q[kScalars > 0 ? kScalars : 1] = {};
    for (int m = 0; m < kScalars; ++m) q[m] = parameters_[static_cast<std::size_t>(m)];
    const Model model = model_;
    Kokkos::parallel_for(
        "costate::pde::rhs", Kokkos::RangePolicy<Host>(0, geo.owned_cells),
        KOKKOS_LAMBDA(std::int64_t cell) {
          Point p;
          std::int64_t lu, la;
          geo.locate(cell, t, p, lu, la);
          double r[kDof];
          model.rhs(p, geo.stencil(ul, lu, kDof), geo.stencil(al, la, kFields), q, r);
          for (int c = 0; c < kDof; ++c) out[cell * kDof + c] = r[c];
        });
    Kokkos::fence();
  }

  /// J = ∂f/∂u at (t, u), assembled into `J` (a Matrix of grid()).
  /// Collective. Cost: ⌈colours / Batch⌉ evaluations on Dual<double, Batch>.
  void jacobian(double t, const GlobalVector& u, Matrix& J) {
    exchange_state(u);
    exchange_fields();
    const Geometry geo = geometry();
    const std::int64_t ncol = colours(kDof);
    const std::size_t per_row = offsets_.size() * kDof;
    const std::size_t rows = static_cast<std::size_t>(geo.owned_cells) * kDof;
    std::vector<double> values(rows * per_row, 0.0);
    if (dual_local_.extent(0) != u_local_.extent(0))
      dual_local_ = Kokkos::View<Tangents*, Kokkos::HostSpace>("pde::dual", u_local_.extent(0));
    auto dv = grid_.view(dual_local_);
    const double* al = kFields > 0 ? a_local_.data() : nullptr;
    Tangents q[kScalars > 0 ? kScalars : 1] = {};
    for (int m = 0; m < kScalars; ++m) q[m] = Tangents(parameters_[static_cast<std::size_t>(m)]);
    for (std::int64_t first = 0; first < ncol; first += Batch) {
      seed_state(first);
      fill_boundary(grid_, dv);
      const Tangents* ud = dual_local_.data();
      const Model model = model_;
      const auto* offs = offsets_.data();
      const int noff = static_cast<int>(offsets_.size());
      double* vals = values.data();
      const StencilColouring col = colouring_;
      Kokkos::parallel_for(
          "costate::pde::jacobian", Kokkos::RangePolicy<Host>(0, geo.owned_cells),
          KOKKOS_LAMBDA(std::int64_t cell) {
            Point p;
            std::int64_t lu, la;
            geo.locate(cell, t, p, lu, la);
            Tangents r[kDof];
            model.rhs(p, geo.stencil(ud, lu, kDof), geo.stencil(al, la, kFields), q, r);
            const std::int64_t centre_colour = col(p.i, p.j, p.k);
            for (int o = 0; o < noff; ++o) {
              const Offset& off = offs[o];
              if (geo.outer(p.i + off.di, p.j + off.dj, p.k + off.dk)) continue;
              const std::int64_t base = col.neighbour(centre_colour, p.i, p.j, p.k, off.di, off.dj, off.dk) * kDof;
              for (int cq = 0; cq < kDof; ++cq) {
                const std::int64_t tangent = base + cq - first;
                if (tangent < 0 || tangent >= Batch) continue;
                for (int cr = 0; cr < kDof; ++cr)
                  vals[(static_cast<std::size_t>(cell) * kDof + cr) * per_row + o * kDof + cq] =
                      r[cr].tangent(static_cast<int>(tangent));
              }
            }
          });
      Kokkos::fence();
    }
    // Insert row by row in local numbering.
    std::vector<std::int64_t> cols;
    std::vector<double> vrow;
    for (std::int64_t cell = 0; cell < geo.owned_cells; ++cell) {
      Point p;
      std::int64_t lu, la;
      geo.locate(cell, t, p, lu, la);
      for (int cr = 0; cr < kDof; ++cr) {
        cols.clear();
        vrow.clear();
        for (std::size_t o = 0; o < offsets_.size(); ++o) {
          const Offset& off = offsets_[o];
          if (geo.outer(p.i + off.di, p.j + off.dj, p.k + off.dk)) continue;
          for (int cq = 0; cq < kDof; ++cq) {
            cols.push_back(grid_.local_index(cq, p.i + off.di, p.j + off.dj, p.k + off.dk));
            vrow.push_back(values[(static_cast<std::size_t>(cell) * kDof + cr) * per_row + o * kDof + cq]);
          }
        }
        J.set_row(lu + cr, cols, vrow);
      }
    }
    J.assemble();
  }

  /// out = (∂f/∂u) v. Collective.
  void jvp(double t, const GlobalVector& u, const GlobalVector& v, const GlobalVector& out) {
    exchange_state(u);
    exchange_fields();
    grid_.global_to_local(v, v_local_);
    std::vector<ad::Dual<double, 1>> ud(u_local_.extent(0));
    for (std::size_t l = 0; l < ud.size(); ++l) {
      ud[l] = ad::Dual<double, 1>(u_local_(l));
      ud[l].tangent(0) = v_local_(l);
    }
    LocalView4<ad::Dual<double, 1>> dv(ud.data(), grid_.ghosted().count[2], grid_.ghosted().count[1],
                                       grid_.ghosted().count[0], kDof);
    fill_boundary(grid_, dv);
    directional(t, ud.data(), kFields > 0 ? a_local_.data() : nullptr, out);
  }

  /// out = (∂f/∂a) ȧ (ȧ a vector of field_grid()). Collective.
  void jvp_fields(double t, const GlobalVector& u, const GlobalVector& a_dot, const GlobalVector& out) {
    static_assert(kFields > 0, "jvp_fields: the model has no parameter fields");
    exchange_state(u);
    exchange_fields();
    auto uv = grid_.view(u_local_);
    fill_boundary(grid_, uv);
    auto adl = field_grid_->create_local();
    field_grid_->global_to_local(a_dot, adl);
    std::vector<ad::Dual<double, 1>> ad_(a_local_.extent(0));
    for (std::size_t l = 0; l < ad_.size(); ++l) {
      ad_[l] = ad::Dual<double, 1>(a_local_(l));
      ad_[l].tangent(0) = adl(l);
    }
    const Grid& fg = *field_grid_;
    LocalView4<ad::Dual<double, 1>> av(ad_.data(), fg.ghosted().count[2], fg.ghosted().count[1],
                                       fg.ghosted().count[0], kFields);
    fill_boundary(fg, av, true);
    directional(t, u_local_.data(), ad_.data(), out);
  }

  /// a_bar += (∂f/∂a)ᵀ w. Local products added into a ghosted array, then
  /// the adjoint ghost exchange. Collective.
  void vjp_fields_add(double t, const GlobalVector& u, const GlobalVector& w, const GlobalVector& a_bar) {
    static_assert(kFields > 0, "vjp_fields_add: the model has no parameter fields");
    exchange_state(u);
    exchange_fields();
    auto uv = grid_.view(u_local_);
    fill_boundary(grid_, uv);
    const Grid& fg = *field_grid_;
    if (field_dual_.extent(0) != a_local_.extent(0))
      field_dual_ = Kokkos::View<Tangents*, Kokkos::HostSpace>("pde::field dual", a_local_.extent(0));
    if (acc_.extent(0) != a_local_.extent(0)) acc_ = fg.create_local("pde::field adjoint");
    Kokkos::deep_copy(acc_, 0.0);
    auto av = fg.view(field_dual_);
    const Geometry geo = geometry();
    const std::int64_t ncol = colours(kFields);
    const double* ul = u_local_.data();
    const double* wv = w.data();
    double* acc = acc_.data();
    Tangents q[kScalars > 0 ? kScalars : 1] = {};
    for (int m = 0; m < kScalars; ++m) q[m] = Tangents(parameters_[static_cast<std::size_t>(m)]);
    const auto* offs = offsets_.data();
    const int noff = static_cast<int>(offsets_.size());
    const StencilColouring col = colouring_;
    for (std::int64_t first = 0; first < ncol; first += Batch) {
      seed(first, kFields, fg, a_local_, field_dual_);
      fill_boundary(fg, av, true);
      const Tangents* ad_ = field_dual_.data();
      const Model model = model_;
      Kokkos::parallel_for(
          "costate::pde::vjp_fields", Kokkos::RangePolicy<Host>(0, geo.owned_cells),
          KOKKOS_LAMBDA(std::int64_t cell) {
            Point p;
            std::int64_t lu, la;
            geo.locate(cell, t, p, lu, la);
            Tangents r[kDof];
            model.rhs(p, geo.stencil(ul, lu, kDof), geo.stencil(ad_, la, kFields), q, r);
            scatter_fields(geo, col, offs, noff, p, la, first, wv + cell * kDof, r, acc);
          });
      Kokkos::fence();
    }
    fg.local_to_global_add(acc_, a_bar);
  }

  /// Both parameter vJps in one set of Dual passes (the adjoint's per-step
  /// work): a_bar += (∂f/∂a)ᵀ w and q_bar += (∂f/∂q)ᵀ w, the scalars riding
  /// as extra tangents of the first pass. Same results as the two separate
  /// calls up to the summation order within a cell. Collective.
  void vjp_add(double t, const GlobalVector& u, const GlobalVector& w, const GlobalVector& a_bar,
               std::span<double> q_bar) {
    if constexpr (kFields == 0) {
      vjp_parameters_add(t, u, w, q_bar);
    } else if constexpr (kScalars == 0) {
      vjp_fields_add(t, u, w, a_bar);
    } else {
      COSTATE_CHECK_EQ(q_bar.size(), static_cast<std::size_t>(kScalars),
                       "pde::Operator::vjp_add: one entry per scalar parameter");
      constexpr int NT = Batch + kScalars;
      using TT = ad::Dual<double, NT>;
      exchange_state(u);
      exchange_fields();
      auto uv = grid_.view(u_local_);
      fill_boundary(grid_, uv);
      const Grid& fg = *field_grid_;
      if (vjp_dual_.extent(0) != a_local_.extent(0))
        vjp_dual_ = Kokkos::View<TT*, Kokkos::HostSpace>("pde::vjp dual", a_local_.extent(0));
      const auto& dual = vjp_dual_;
      if (acc_.extent(0) != a_local_.extent(0)) acc_ = fg.create_local("pde::field adjoint");
      Kokkos::deep_copy(acc_, 0.0);
      auto av = fg.view(dual);
      const Geometry geo = geometry();
      if (qcell_.extent(0) != static_cast<std::size_t>(geo.owned_cells * kScalars))
        qcell_ = Kokkos::View<double*, Kokkos::HostSpace>("pde::vjp q", static_cast<std::size_t>(geo.owned_cells * kScalars));
      const auto& qcell = qcell_;
      const std::int64_t ncol = colours(kFields);
      const double* ul = u_local_.data();
      const double* wv = w.data();
      double* acc = acc_.data();
      double* qc = qcell.data();
      const auto* offs = offsets_.data();
      const int noff = static_cast<int>(offsets_.size());
      const StencilColouring col = colouring_;
      const Box& b = fg.ghosted();
      for (std::int64_t first = 0; first < ncol; first += Batch) {
        const bool with_q = first == 0;
        TT q[kScalars];
        for (int m = 0; m < kScalars; ++m) {
          q[m] = TT(parameters_[static_cast<std::size_t>(m)]);
          if (with_q) q[m].tangent(Batch + m) = 1.0;
        }
        std::int64_t l = 0;
        for (std::int64_t k = b.start[2]; k < b.start[2] + b.count[2]; ++k)
          for (std::int64_t j = b.start[1]; j < b.start[1] + b.count[1]; ++j)
            for (std::int64_t i = b.start[0]; i < b.start[0] + b.count[0]; ++i) {
              const std::int64_t base = colouring_(i, j, k) * kFields;
              for (int c = 0; c < kFields; ++c, ++l) {
                TT x(a_local_(static_cast<std::size_t>(l)));
                const std::int64_t tangent = base + c - first;
                if (tangent >= 0 && tangent < Batch) x.tangent(static_cast<int>(tangent)) = 1.0;
                dual(static_cast<std::size_t>(l)) = x;
              }
            }
        fill_boundary(fg, av, true);
        const TT* ad_ = dual.data();
        const Model model = model_;
        Kokkos::parallel_for(
            "costate::pde::vjp", Kokkos::RangePolicy<Host>(0, geo.owned_cells),
            KOKKOS_LAMBDA(std::int64_t cell) {
              Point p;
              std::int64_t lu, la;
              geo.locate(cell, t, p, lu, la);
              TT r[kDof];
              model.rhs(p, geo.stencil(ul, lu, kDof), geo.stencil(ad_, la, kFields), q, r);
              scatter_fields(geo, col, offs, noff, p, la, first, wv + cell * kDof, r, acc);
              if (with_q)
                for (int m = 0; m < kScalars; ++m) {
                  double s = 0.0;
                  for (int cr = 0; cr < kDof; ++cr) s += wv[cell * kDof + cr] * r[cr].tangent(Batch + m);
                  qc[cell * kScalars + m] = s;
                }
            });
        Kokkos::fence();
      }
      fg.local_to_global_add(acc_, a_bar);
      // Scalars: cell order within the rank, then rank order.
      std::vector<double> partial(kScalars, 0.0);
      for (std::int64_t cell = 0; cell < geo.owned_cells; ++cell)
        for (int m = 0; m < kScalars; ++m) partial[static_cast<std::size_t>(m)] += qc[cell * kScalars + m];
      global_sum(grid_.comm(), partial.data(), partial.size());
      for (int m = 0; m < kScalars; ++m) q_bar[static_cast<std::size_t>(m)] += partial[static_cast<std::size_t>(m)];
    }
  }

  /// The total directional derivative in one Dual pass:
  ///     out = (∂f/∂u) u̇ + (∂f/∂a) ȧ + (∂f/∂q) q̇
  /// at (t, u). A null u̇ or ȧ, or an empty q̇, is a zero direction. ȧ is a
  /// vector of field_grid(); q̇ has one entry per scalar parameter.
  /// Collective. (Forward sensitivities of the θ integrator use it.)
  void jvp_total(double t, const GlobalVector& u, const GlobalVector* u_dot, const GlobalVector* a_dot,
                 std::span<const double> q_dot, const GlobalVector& out) {
    using D1 = ad::Dual<double, 1>;
    COSTATE_CHECK(q_dot.empty() || q_dot.size() == static_cast<std::size_t>(kScalars),
                  "pde::Operator::jvp_total: q_dot has " << q_dot.size() << " entries; the model has "
                                                         << kScalars << " scalar parameters");
    exchange_state(u);
    exchange_fields();
    if (u_dot) grid_.global_to_local(*u_dot, v_local_);
    std::vector<D1> ud(u_local_.extent(0));
    for (std::size_t l = 0; l < ud.size(); ++l) {
      ud[l] = D1(u_local_(l));
      if (u_dot) ud[l].tangent(0) = v_local_(l);
    }
    LocalView4<D1> uv(ud.data(), grid_.ghosted().count[2], grid_.ghosted().count[1],
                      grid_.ghosted().count[0], kDof);
    fill_boundary(grid_, uv);
    std::vector<D1> ad_;
    if constexpr (kFields > 0) {
      const Grid& fg = *field_grid_;
      ad_.resize(a_local_.extent(0));
      LocalArray adl;
      if (a_dot) {
        adl = fg.create_local();
        fg.global_to_local(*a_dot, adl);
      }
      for (std::size_t l = 0; l < ad_.size(); ++l) {
        ad_[l] = D1(a_local_(l));
        if (a_dot) ad_[l].tangent(0) = adl(l);
      }
      LocalView4<D1> av(ad_.data(), fg.ghosted().count[2], fg.ghosted().count[1], fg.ghosted().count[0],
                        kFields);
      fill_boundary(fg, av, true);
    }
    directional(t, ud.data(), kFields > 0 ? ad_.data() : static_cast<const D1*>(nullptr), out,
                q_dot.empty() ? nullptr : q_dot.data());
  }

  /// q_bar[m] += Σ_cells wᵀ ∂f/∂q_m; per-rank partials summed in rank
  /// order (bitwise reproducible for a given decomposition). Collective.
  void vjp_parameters_add(double t, const GlobalVector& u, const GlobalVector& w, std::span<double> q_bar) {
    COSTATE_CHECK_EQ(q_bar.size(), static_cast<std::size_t>(kScalars),
                     "pde::Operator::vjp_parameters_add: one entry per scalar parameter");
    if constexpr (kScalars > 0) {
      using Q = ad::Dual<double, kScalars>;
      exchange_state(u);
      exchange_fields();
      auto uv = grid_.view(u_local_);
      fill_boundary(grid_, uv);
      const Geometry geo = geometry();
      Q q[kScalars];
      for (int m = 0; m < kScalars; ++m) q[m] = Q::seed(parameters_[static_cast<std::size_t>(m)], m);
      const double* ul = u_local_.data();
      const double* al = kFields > 0 ? a_local_.data() : nullptr;
      const double* wv = w.data();
      std::vector<double> partial(kScalars, 0.0);
      // Serial loop: a fixed summation order within the rank.
      for (std::int64_t cell = 0; cell < geo.owned_cells; ++cell) {
        Point p;
        std::int64_t lu, la;
        geo.locate(cell, t, p, lu, la);
        Q r[kDof];
        model_.rhs(p, geo.stencil(ul, lu, kDof), geo.stencil(al, la, kFields), q, r);
        for (int cr = 0; cr < kDof; ++cr)
          for (int m = 0; m < kScalars; ++m)
            partial[static_cast<std::size_t>(m)] += wv[cell * kDof + cr] * r[cr].tangent(m);
      }
      global_sum(grid_.comm(), partial.data(), partial.size());
      for (int m = 0; m < kScalars; ++m) q_bar[static_cast<std::size_t>(m)] += partial[static_cast<std::size_t>(m)];
    }
  }

  /// The direction and the sums of vjp_tangent_add (operator_view.hpp).
  using VjpDirection = pde::VjpDirection;
  using VjpSums = pde::VjpSums;

  /// Second-order vector–Jacobian products, the per-step work of the
  /// second-order adjoint. With x = (u, a, q) moved along ε (u̇, ȧ, q̇) and
  /// the weight w along ε ẇ, the first-order vJps
  ///     g_x(ε) = (∂f/∂x (x + ε ẋ))ᵀ (w + ε ẇ) = g_x + ε ġ_x,
  ///     ġ_x = (∂f/∂x)ᵀ ẇ + (∂²(wᵀf)/∂x ∂u) u̇ + (∂²(wᵀf)/∂x ∂a) ȧ + (∂²(wᵀf)/∂x ∂q) q̇,
  /// are added for x = u, a, q: g_x into `value`, ġ_x into `tangent`.
  /// One evaluation of the model per pass on ad::Dual<Dual<double, 1>, N>
  /// (the outer tangents carry the colours of u and a and the scalars, the
  /// inner one the direction); the passes are ⌈colours / Batch⌉ of the
  /// larger requested grid. Fields: local sums, then the adjoint ghost
  /// exchange (as vjp_fields_add); scalars: cell order, then rank order.
  /// Collective.
  void vjp_tangent_add(double t, const GlobalVector& u, const GlobalVector& w, const VjpDirection& d,
                       const VjpSums& value, const VjpSums& tangent) {
    using D1 = ad::Dual<double, 1>;
    constexpr int kSlotsA = kFields > 0 ? Batch : 0;
    constexpr int NT = Batch + kSlotsA + kScalars;
    using TT = ad::Dual<D1, NT>;
    COSTATE_CHECK((d.q_dot.empty() || d.q_dot.size() == static_cast<std::size_t>(kScalars)) &&
                      (value.q.empty() || value.q.size() == static_cast<std::size_t>(kScalars)) &&
                      (tangent.q.empty() || tangent.q.size() == static_cast<std::size_t>(kScalars)),
                  "pde::Operator::vjp_tangent_add: scalar spans need one entry per scalar parameter ("
                      << kScalars << ") or none");
    const bool need_u = value.u || tangent.u;
    const bool need_a = kFields > 0 && (value.a || tangent.a);
    const bool need_q = kScalars > 0 && (!value.q.empty() || !tangent.q.empty());
    exchange_state(u);
    exchange_fields();
    if (d.u_dot) grid_.global_to_local(*d.u_dot, v_local_);
    const std::int64_t passes_u = need_u ? (colours(kDof) + Batch - 1) / Batch : 0;
    const std::int64_t passes_a = need_a ? (colours(kFields) + Batch - 1) / Batch : 0;
    const std::int64_t passes = std::max({passes_u, passes_a, std::int64_t(need_q ? 1 : 0)});
    if (passes == 0) return;
    Kokkos::View<TT*, Kokkos::HostSpace> su("pde::second-order state", u_local_.extent(0));
    Kokkos::View<TT*, Kokkos::HostSpace> sa;
    LocalArray adot, acc_av, acc_at;
    if constexpr (kFields > 0) {
      sa = Kokkos::View<TT*, Kokkos::HostSpace>("pde::second-order fields", a_local_.extent(0));
      adot = field_grid_->create_local();
      if (d.a_dot) field_grid_->global_to_local(*d.a_dot, adot);
      acc_av = field_grid_->create_local();
      acc_at = field_grid_->create_local();
    }
    LocalArray acc_uv = grid_.create_local(), acc_ut = grid_.create_local();
    const Geometry geo = geometry();
    Kokkos::View<double*, Kokkos::HostSpace> qcell("pde::second-order q",
                                                   static_cast<std::size_t>(geo.owned_cells * kScalars * 2));
    const StencilColouring col = colouring_;
    const auto* offs = offsets_.data();
    const int noff = static_cast<int>(offsets_.size());
    const double* wv = w.data();
    const double* wd = d.w_dot ? d.w_dot->data() : nullptr;
    double* uv_acc = acc_uv.data();
    double* ut_acc = acc_ut.data();
    double* av_acc = kFields > 0 ? acc_av.data() : nullptr;
    double* at_acc = kFields > 0 ? acc_at.data() : nullptr;
    double* qc = qcell.data();
    const bool have_udot = d.u_dot != nullptr;
    for (std::int64_t pass = 0; pass < passes; ++pass) {
      const std::int64_t first = pass * Batch;
      const bool with_q = need_q && pass == 0;
      // Seeds: inner tangent = the direction, outer = the colours of this pass.
      {
        const Box& b = grid_.ghosted();
        std::int64_t l = 0;
        for (std::int64_t k = b.start[2]; k < b.start[2] + b.count[2]; ++k)
          for (std::int64_t j = b.start[1]; j < b.start[1] + b.count[1]; ++j)
            for (std::int64_t i = b.start[0]; i < b.start[0] + b.count[0]; ++i) {
              const std::int64_t base = colouring_(i, j, k) * kDof;
              for (int c = 0; c < kDof; ++c, ++l) {
                const auto L = static_cast<std::size_t>(l);
                D1 x0(u_local_(L));
                if (have_udot) x0.tangent(0) = v_local_(L);
                TT x(x0);
                const std::int64_t slot = base + c - first;
                if (pass < passes_u && slot >= 0 && slot < Batch) x.tangent(static_cast<int>(slot)) = D1(1.0);
                su(L) = x;
              }
            }
        auto sv = grid_.view(su);
        fill_boundary(grid_, sv);
      }
      if constexpr (kFields > 0) {
        const Grid& fg = *field_grid_;
        const Box& b = fg.ghosted();
        std::int64_t l = 0;
        for (std::int64_t k = b.start[2]; k < b.start[2] + b.count[2]; ++k)
          for (std::int64_t j = b.start[1]; j < b.start[1] + b.count[1]; ++j)
            for (std::int64_t i = b.start[0]; i < b.start[0] + b.count[0]; ++i) {
              const std::int64_t base = colouring_(i, j, k) * kFields;
              for (int c = 0; c < kFields; ++c, ++l) {
                const auto L = static_cast<std::size_t>(l);
                D1 x0(a_local_(L));
                if (d.a_dot) x0.tangent(0) = adot(L);
                TT x(x0);
                const std::int64_t slot = base + c - first;
                if (pass < passes_a && slot >= 0 && slot < Batch)
                  x.tangent(static_cast<int>(Batch + slot)) = D1(1.0);
                sa(L) = x;
              }
            }
        auto av = fg.view(sa);
        fill_boundary(fg, av, true);
      }
      TT q[kScalars > 0 ? kScalars : 1] = {};
      for (int m = 0; m < kScalars; ++m) {
        D1 x0(parameters_[static_cast<std::size_t>(m)]);
        if (!d.q_dot.empty()) x0.tangent(0) = d.q_dot[static_cast<std::size_t>(m)];
        q[m] = TT(x0);
        if (with_q) q[m].tangent(Batch + kSlotsA + m) = D1(1.0);
      }
      const TT* sud = su.data();
      const TT* sad = kFields > 0 ? sa.data() : nullptr;
      const Model model = model_;
      const bool do_u = pass < passes_u, do_a = pass < passes_a;
      Kokkos::parallel_for(
          "costate::pde::vjp_tangent", Kokkos::RangePolicy<Host>(0, geo.owned_cells),
          KOKKOS_LAMBDA(std::int64_t cell) {
            Point p;
            std::int64_t lu, la;
            geo.locate(cell, t, p, lu, la);
            TT r[kDof];
            model.rhs(p, geo.stencil(sud, lu, kDof), geo.stencil(sad, la, kFields), q, r);
            D1 W[kDof];
            for (int cr = 0; cr < kDof; ++cr) {
              W[cr] = D1(wv[cell * kDof + cr]);
              if (wd) W[cr].tangent(0) = wd[cell * kDof + cr];
            }
            const std::int64_t centre_colour = col(p.i, p.j, p.k);
            for (int o = 0; o < noff; ++o) {
              const Offset& off = offs[o];
              if (geo.outer(p.i + off.di, p.j + off.dj, p.k + off.dk)) continue;
              const std::int64_t nb = col.neighbour(centre_colour, p.i, p.j, p.k, off.di, off.dj, off.dk);
              const std::int64_t shift = off.di + off.dj * geo.sy + off.dk * geo.sz;
              if (do_u)
                for (int cq = 0; cq < kDof; ++cq) {
                  const std::int64_t slot = nb * kDof + cq - first;
                  if (slot < 0 || slot >= Batch) continue;
                  D1 s(0.0);
                  for (int cr = 0; cr < kDof; ++cr) s += W[cr] * r[cr].tangent(static_cast<int>(slot));
                  accumulate(&uv_acc[lu + shift * kDof + cq], s.value());
                  accumulate(&ut_acc[lu + shift * kDof + cq], s.tangent(0));
                }
              if constexpr (kFields > 0)
                if (do_a)
                  for (int f = 0; f < kFields; ++f) {
                    const std::int64_t slot = nb * kFields + f - first;
                    if (slot < 0 || slot >= Batch) continue;
                    D1 s(0.0);
                    for (int cr = 0; cr < kDof; ++cr)
                      s += W[cr] * r[cr].tangent(static_cast<int>(Batch + slot));
                    accumulate(&av_acc[la + shift * kFields + f], s.value());
                    accumulate(&at_acc[la + shift * kFields + f], s.tangent(0));
                  }
            }
            if (with_q)
              for (int m = 0; m < kScalars; ++m) {
                D1 s(0.0);
                for (int cr = 0; cr < kDof; ++cr) s += W[cr] * r[cr].tangent(Batch + kSlotsA + m);
                qc[(cell * kScalars + m) * 2] = s.value();
                qc[(cell * kScalars + m) * 2 + 1] = s.tangent(0);
              }
          });
      Kokkos::fence();
    }
    if (value.u) grid_.local_to_global_add(acc_uv, *value.u);
    if (tangent.u) grid_.local_to_global_add(acc_ut, *tangent.u);
    if constexpr (kFields > 0) {
      if (value.a) field_grid_->local_to_global_add(acc_av, *value.a);
      if (tangent.a) field_grid_->local_to_global_add(acc_at, *tangent.a);
    }
    if (need_q) {
      // Cell order within the rank, then rank order: [value_0.., tangent_0..].
      std::vector<double> partial(2 * static_cast<std::size_t>(kScalars), 0.0);
      for (std::int64_t cell = 0; cell < geo.owned_cells; ++cell)
        for (int m = 0; m < kScalars; ++m) {
          partial[static_cast<std::size_t>(m)] += qc[(cell * kScalars + m) * 2];
          partial[static_cast<std::size_t>(kScalars + m)] += qc[(cell * kScalars + m) * 2 + 1];
        }
      global_sum(grid_.comm(), partial.data(), partial.size());
      for (int m = 0; m < kScalars; ++m) {
        const auto M = static_cast<std::size_t>(m);
        if (!value.q.empty()) value.q[M] += partial[M];
        if (!tangent.q.empty()) tangent.q[M] += partial[static_cast<std::size_t>(kScalars) + M];
      }
    }
  }

 private:
  struct Offset {
    int di, dj, dk;
  };

  /// Everything a kernel needs to place a cell, captured by value.
  struct Geometry {
    std::int64_t owned_cells = 0;
    std::int64_t os[3], oc[3], gs[3], gc[3], n[3];
    bool periodic[3];
    double lo[3], h[3];
    std::int64_t sy, sz;  // state strides in cells (x stride 1)
    std::int64_t fy, fz;  // field strides in cells (same boxes)
    KOKKOS_INLINE_FUNCTION void locate(std::int64_t cell, double t, Point& p, std::int64_t& lu,
                                       std::int64_t& la) const {
      const std::int64_t i = cell % oc[0], rest = cell / oc[0];
      const std::int64_t j = rest % oc[1], k = rest / oc[1];
      p.i = os[0] + i;
      p.j = os[1] + j;
      p.k = os[2] + k;
      p.x = lo[0] + (static_cast<double>(p.i) + 0.5) * h[0];
      p.y = lo[1] + (static_cast<double>(p.j) + 0.5) * h[1];
      p.z = lo[2] + (static_cast<double>(p.k) + 0.5) * h[2];
      p.hx = h[0];
      p.hy = h[1];
      p.hz = h[2];
      p.t = t;
      const std::int64_t cell_local = (p.k - gs[2]) * sz + (p.j - gs[1]) * sy + (p.i - gs[0]);
      lu = cell_local * kDof;
      la = cell_local * (kFields > 0 ? kFields : 1);
    }
    template <class S>
    KOKKOS_INLINE_FUNCTION Stencil<S> stencil(const S* base, std::int64_t at, int dof) const {
      Stencil<S> s;
      if (base == nullptr) return s;
      s.centre = base + at;
      s.sx = dof;
      s.sy = sy * dof;
      s.sz = sz * dof;
      return s;
    }
    KOKKOS_INLINE_FUNCTION bool outer(std::int64_t i, std::int64_t j, std::int64_t k) const {
      const std::int64_t idx[3] = {i, j, k};
      for (int d = 0; d < 3; ++d)
        if (!periodic[d] && (idx[d] < 0 || idx[d] >= n[d])) return true;
      return false;
    }
  };

  /// The field part of one cell's vJp: for every field entry in the cell's
  /// stencil whose colour lies in the batch [first, first + Batch), adds
  /// Σ_c w_c ∂r_c/∂a (r's tangent number colour − first) into acc. The
  /// colouring is distance-2, so a tangent of r belongs to one entry.
  template <class TT>
  KOKKOS_INLINE_FUNCTION static void scatter_fields(const Geometry& geo, const StencilColouring& col,
                                                    const Offset* offs, int noff, const Point& p,
                                                    std::int64_t la, std::int64_t first,
                                                    const double* w, const TT* r, double* acc) {
    const std::int64_t centre_colour = col(p.i, p.j, p.k);
    for (int o = 0; o < noff; ++o) {
      const Offset& off = offs[o];
      if (geo.outer(p.i + off.di, p.j + off.dj, p.k + off.dk)) continue;
      const std::int64_t base = col.neighbour(centre_colour, p.i, p.j, p.k, off.di, off.dj, off.dk) * kFields;
      const std::int64_t target = la + (off.di + off.dj * geo.fy + off.dk * geo.fz) * kFields;
      for (int f = 0; f < kFields; ++f) {
        const std::int64_t tangent = base + f - first;
        if (tangent < 0 || tangent >= Batch) continue;
        double s = 0.0;
        for (int cr = 0; cr < kDof; ++cr) s += w[cr] * r[cr].tangent(static_cast<int>(tangent));
        accumulate(&acc[target + f], s);
      }
    }
  }

  static GridSpec spec(const Domain& d, int dof) {
    GridSpec s;
    s.dim = Model::dim;
    s.cells = d.cells;
    for (int e = Model::dim; e < 3; ++e) s.cells[static_cast<std::size_t>(e)] = 1;
    s.extent = d.extent;
    s.boundary = d.boundary;
    s.dirichlet_value = d.dirichlet_value;
    s.dof = dof;
    s.stencil_width = Model::stencil_width;
    s.star_stencil = Model::star;
    s.processes = d.processes;
    return s;
  }

  Geometry geometry() const {
    Geometry g;
    g.owned_cells = grid_.owned().cells();
    for (int d = 0; d < 3; ++d) {
      const auto D = static_cast<std::size_t>(d);
      g.os[d] = grid_.owned().start[D];
      g.oc[d] = grid_.owned().count[D];
      g.gs[d] = grid_.ghosted().start[D];
      g.gc[d] = grid_.ghosted().count[D];
      g.n[d] = grid_.cells(d);
      g.periodic[d] = d >= Model::dim || grid_.periodic(d);
      g.lo[d] = grid_.spec().extent[D][0];
      g.h[d] = grid_.spacing(d);
    }
    g.sy = g.gc[0];
    g.sz = g.gc[0] * g.gc[1];
    g.fy = g.sy;
    g.fz = g.sz;
    return g;
  }

  std::int64_t colours(int dof) const {
    return dof * colouring_.colours;
  }

  void exchange_state(const GlobalVector& u) {
    COSTATE_CHECK_EQ(u.size(), grid_.owned_size(), "pde::Operator: state vector of another grid");
    grid_.global_to_local(u, u_local_);
  }
  void exchange_fields() {
    if constexpr (kFields > 0) {
      field_grid_->global_to_local(fields_, a_local_);
      auto av = field_grid_->view(a_local_);
      fill_boundary(*field_grid_, av, true);
    }
  }

  /// dual(l) = value(l) + seeds for colours [first, first + Batch).
  void seed(std::int64_t first, int dof, const Grid& g, const LocalArray& values,
            const Kokkos::View<Tangents*, Kokkos::HostSpace>& dual) const {
    const Box& b = g.ghosted();
    std::int64_t l = 0;
    for (std::int64_t k = b.start[2]; k < b.start[2] + b.count[2]; ++k)
      for (std::int64_t j = b.start[1]; j < b.start[1] + b.count[1]; ++j)
        for (std::int64_t i = b.start[0]; i < b.start[0] + b.count[0]; ++i) {
          const std::int64_t base =
              colouring_(i, j, k) * dof;
          for (int c = 0; c < dof; ++c, ++l) {
            Tangents x(values(static_cast<std::size_t>(l)));
            const std::int64_t tangent = base + c - first;
            if (tangent >= 0 && tangent < Batch) x.tangent(static_cast<int>(tangent)) = 1.0;
            dual(static_cast<std::size_t>(l)) = x;
          }
        }
  }
  void seed_state(std::int64_t first) { seed(first, kDof, grid_, u_local_, dual_local_); }

  template <class U, class A>
  void directional(double t, const U* ul, const A* al, const GlobalVector& out,
                   const double* q_dot = nullptr) {
    const Geometry geo = geometry();
    using D1 = ad::Dual<double, 1>;
    D1 q[kScalars > 0 ? kScalars : 1] = {};
    for (int m = 0; m < kScalars; ++m) {
      q[m] = D1(parameters_[static_cast<std::size_t>(m)]);
      if (q_dot) q[m].tangent(0) = q_dot[m];
    }
    double* o = out.data();
    const Model model = model_;
    Kokkos::parallel_for(
        "costate::pde::jvp", Kokkos::RangePolicy<Host>(0, geo.owned_cells),
        KOKKOS_LAMBDA(std::int64_t cell) {
          Point p;
          std::int64_t lu, la;
          geo.locate(cell, t, p, lu, la);
          D1 r[kDof];
          model.rhs(p, geo.stencil(ul, lu, kDof), geo.stencil(al, la, kFields), q, r);
          for (int c = 0; c < kDof; ++c) o[cell * kDof + c] = r[c].tangent(0);
        });
    Kokkos::fence();
  }

  Model model_;
  Grid grid_;
  std::unique_ptr<Grid> field_grid_;
  GlobalVector fields_;
  std::vector<double> parameters_;
  LocalArray u_local_, v_local_, a_local_, acc_;
  Kokkos::View<Tangents*, Kokkos::HostSpace> dual_local_, field_dual_;
  Kokkos::View<ad::Dual<double, Batch + kScalars>*, Kokkos::HostSpace> vjp_dual_;
  Kokkos::View<double*, Kokkos::HostSpace> qcell_;
  StencilColouring colouring_{};
  std::vector<Offset> offsets_;
};

/// The OperatorView of an Operator (operator_view.hpp): each member the
/// Operator's own. The one per-model template of the PDE integrators.
template <class Op>
class OperatorViewOf final : public OperatorView {
  using M = typename Op::model_type;

 public:
  explicit OperatorViewOf(Op& op)
      : OperatorView(Traits{.fields = Op::kFields,
                            .scalars = Op::kScalars,
                            .linear_in_state = M::linear_in_state,
                            .autonomous = M::autonomous}),
        op_(op) {}
  const Grid& grid() const override { return op_.grid(); }
  const Grid* field_grid() const override { return op_.field_grid(); }
  void rhs(double t, const GlobalVector& u, const GlobalVector& f) override { op_.rhs(t, u, f); }
  void jacobian(double t, const GlobalVector& u, Matrix& J) override { op_.jacobian(t, u, J); }
  void jvp(double t, const GlobalVector& u, const GlobalVector& v, const GlobalVector& out) override {
    op_.jvp(t, u, v, out);
  }
  void jvp_total(double t, const GlobalVector& u, const GlobalVector* u_dot, const GlobalVector* a_dot,
                 std::span<const double> q_dot, const GlobalVector& out) override {
    op_.jvp_total(t, u, u_dot, a_dot, q_dot, out);
  }
  void vjp_add(double t, const GlobalVector& u, const GlobalVector& w, const GlobalVector& a_bar,
               std::span<double> q_bar) override {
    op_.vjp_add(t, u, w, a_bar, q_bar);
  }
  void vjp_tangent_add(double t, const GlobalVector& u, const GlobalVector& w, const VjpDirection& d,
                       const VjpSums& value, const VjpSums& tangent) override {
    op_.vjp_tangent_add(t, u, w, d, value, tangent);
  }

 private:
  Op& op_;
};

}  // namespace costate::pde
