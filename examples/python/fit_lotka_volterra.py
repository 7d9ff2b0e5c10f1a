"""Fit Lotka–Volterra rates with scipy.optimize.minimize and costate's adjoint gradient.

    x' = alpha x - beta x y,   y' = delta x y - gamma y

The data and the fit are those of data/examples/lotka_volterra_calibration.yaml:
noisy counts of x and y (sigma = 0.1), the four rates fitted on a log scale,
q = log(rate). costate supplies the objective of the calibration section,

    J(q) = 1/2 sum_k sum_i (y_i(t_k) - d_ki)^2 / sigma_i^2,

and its gradient dJ/dq from the discrete adjoint of RK4 (problem.objective
returns both, for minimize(jac=True)). scipy's BFGS then finds the same
optimum as `costate calibrate` (PETSc TAO), and so does scipy's Newton
method trust-ncg with costate's exact Hessian-vector product (problem.hessp);
the script checks that the three agree to 1e-6 relative and exits 1 when
they do not. BFGS is unbounded: in
q = log(rate) the rates stay positive and the file's bounds (0.01..100) are
not active at the optimum. (L-BFGS-B's first step, of unit length in q,
reaches rates at which RK4 with dt = 0.01 overflows; J = NaN there stops
its line search.)

Sample runs:
    PYTHONPATH=build/python /usr/bin/python3 examples/python/fit_lotka_volterra.py
"""

import os
import sys

import numpy as np
import scipy.optimize

import costate

# The two optimisers stop at |gradient| <= 1e-7 (TAO) and 1e-8 (BFGS) in q; at this curvature
# (standard errors ~1 % of the values) that places both within ~1e-10
# relative of the optimum: 1e-6 leaves room and still catches a wrong fit.
AGREEMENT = 1e-6

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "data", "examples", "lotka_volterra_calibration.yaml")
problem = costate.load(path)
fit = problem.fit

# 1. scipy, with costate's adjoint gradient.
result = scipy.optimize.minimize(problem.objective, fit.start, jac=True, method="BFGS",
                                 options={"gtol": 1e-8})
scipy_values = problem.values(result.x)

# 2. costate calibrate (PETSc TAO) on the same file.
tao = problem.calibrate()

# 3. Newton (scipy's trust-ncg) with costate's exact Hessian-vector product
#    of the same objective (problem.hessp: forward over the discrete adjoint).
newton = scipy.optimize.minimize(problem.objective, fit.start, jac=True, hessp=problem.hessp,
                                 method="trust-ncg", options={"gtol": 1e-7})
newton_values = problem.values(newton.x)

print("scipy BFGS:     %s after %d iterations, J = %.10g"
      % (result.message, result.nit, result.fun))
print("costate (TAO):  %s after %d iterations, J = %.10g"
      % (tao.termination, tao.iterations, tao.objective))
print("scipy trust-ncg with hessp: %s after %d iterations (%d Hessian-vector products), J = %.10g"
      % (newton.message, newton.nit, newton.nhev, newton.fun))
print("\n  %-10s %18s %18s %12s %12s" % ("rate", "scipy", "costate", "rel. diff", "std. error"))
rel = np.abs(scipy_values - tao.values) / np.abs(tao.values)
for name, a, b, r, se in zip(fit.names, scipy_values, tao.values, rel, tao.standard_errors):
    print("  %-10s %18.12f %18.12f %12.2e %12.4g" % (name, a, b, r, se))

rel_newton = np.abs(newton_values - tao.values) / np.abs(tao.values)
print("  trust-ncg with hessp vs costate: %.2e relative" % rel_newton.max())

worst = max(rel.max(), rel_newton.max())
if not result.success or not newton.success or not tao.converged or worst > AGREEMENT:
    print("\nFAILED: the fits differ by %.3g relative (allowed %g)" % (worst, AGREEMENT))
    sys.exit(1)
print("\nthe fits agree to %.2e relative" % worst)
