"""costate (the pybind11 module) against the command line on the same inputs.

The module runs the CLI's computations (io::load_run_config, ode::integrate,
io/file_gradient.hpp, io::calibrate), so values are compared bitwise where
the computation is the same; the scipy fit is compared with `costate
calibrate` to the agreement documented in examples/python."""

import os
import signal
import threading
import time

import h5py
import numpy as np
import pytest
import scipy.optimize

import costate
from cli_support import cli_error, cli_json

EXAMPLES = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "examples")
LV = os.path.join(EXAMPLES, "lotka_volterra.yaml")
LV_EQ = os.path.join(EXAMPLES, "lotka_volterra_equations.yaml")
LV_CAL = os.path.join(EXAMPLES, "lotka_volterra_calibration.yaml")

# scipy's BFGS and TAO's bqnls stop at |gradient| <= 1e-8 and 1e-7 in q;
# with standard errors ~1 % of the values the iterates are within ~1e-10
# relative of the optimum: the 1e-6 is met with room to spare.
FIT_AGREEMENT = 1e-6
# Central differences of J(q) with h = 1e-6 (relative): truncation ~h² and
# round-off ~eps·|J|/h ≈ 1e-8 relative on gradients of order 1e1..1e3.
FD_STEP, FD_TOL = 1e-6, 1e-6


# ---- run ---------------------------------------------------------------------------

def test_run_equals_cli_bitwise(tmp_path):
    sol = costate.load(LV).run()
    out = str(tmp_path / "cli.h5")
    j = cli_json("run", LV, "-o", out)
    assert sol.names == j["state_names"] == ["x", "y"]
    assert sol.y[-1].tolist() == j["final_state"]
    assert sol.summary["steps"] == j["steps"]
    assert sol.summary["rhs_evaluations"] == j["rhs_evaluations"]
    with h5py.File(out) as f:
        np.testing.assert_array_equal(sol.t, f["time"][()])
        np.testing.assert_array_equal(sol.y, f["state"][()])


def test_set_overrides_like_the_cli():
    sol = costate.load(LV, set={"integrator.rtol": 1e-10, "integrator.method": "dopri5"}).run()
    j = cli_json("run", LV, "--set", "integrator.rtol=1e-10", "--set", "integrator.method=dopri5")
    assert sol.y[-1].tolist() == j["final_state"]
    listed = costate.load(LV, set=["integrator.rtol=1e-10"]).run()
    np.testing.assert_array_equal(listed.y, sol.y)


def test_arrays_are_float64_c_order_copies():
    p = costate.load(LV)
    sol = p.run()
    n = len(p._core.output_times)
    assert sol.t.dtype == np.float64 and sol.t.shape == (n,)
    assert sol.y.dtype == np.float64 and sol.y.shape == (n, 2)
    assert sol.y.flags.c_contiguous and sol.y.flags.writeable and sol.y.flags.owndata
    # One column per state: column i is state names[i] at every time.
    assert sol.y[0].tolist() == [p.initial_state["x"], p.initial_state["y"]]
    sol.y[:] = 0.0  # a copy: the next run is unaffected
    assert p.run().y[-1].tolist() == cli_json("run", LV)["final_state"]


def test_run_writes_the_cli_file(tmp_path):
    out = str(tmp_path / "py.h5")
    sol = costate.load(LV).run(output=out)
    with h5py.File(out) as f:
        assert f.attrs["status"] == "complete"
        np.testing.assert_array_equal(f["state"][()], sol.y)


def test_dict_input_equals_the_file():
    d = {
        "model": "lotka_volterra",
        "parameters": {"alpha": 1.5, "beta": 1.0, "gamma": 3.0, "delta": 1.0},
        "initial_state": {"x": 1.0, "y": 1.0},
        "time": {"start": 0.0, "end": 10.0, "output_every": 0.1},
        "integrator": {"method": "dopri5", "rtol": 1.0e-8, "atol": 1.0e-10},
    }
    np.testing.assert_array_equal(costate.load(d).run().y, costate.load(LV).run().y)
    eq = {
        "model": {"states": ["x", "y"],
                  "equations": {"x": "a*x - b*x*y", "y": "-c*y + d*x*y"}},
        "parameters": {"a": 1.5, "b": 1.0, "c": 3.0, "d": 1.0},
        "initial_state": {"x": 1.0, "y": 1.0},
        "time": {"start": 0.0, "end": 10.0, "output_every": 0.1},
        "integrator": {"method": "dopri5", "rtol": 1.0e-8, "atol": 1.0e-10},
    }
    np.testing.assert_allclose(costate.load(eq).run().y, costate.load(LV).run().y, rtol=1e-12)


def test_input_file_events_equal_cli_and_the_closed_form():
    """An input file's events: section (data/examples/bouncing_ball.yaml) runs
    from Python as from the CLI, bit for bit, and matches the closed form:
    on [t_2, t_3], h = e² g t_1 (t − t_2) − g/2 (t − t_2)², t_2 = t_1 (1 + 2e)."""
    ball = os.path.join(EXAMPLES, "bouncing_ball.yaml")
    sol = costate.load(ball).run()
    assert sol.y[-1].tolist() == cli_json("run", ball)["final_state"]
    g, e, h0, t = 9.81, 0.8, 10.0, 5.0
    t1 = np.sqrt(2 * h0 / g)
    s, u = t - t1 * (1 + 2 * e), e * e * g * t1
    # dopri5 at rtol 1e-10 on a piecewise quadratic: round-off, located impacts.
    np.testing.assert_allclose(sol.y[-1], [u * s - 0.5 * g * s * s, u - g * s], rtol=0, atol=1e-8)


def test_dae_input_file_native_bdf_gradient_matches_idas_example():
    """A DAE input file (model.algebraic: data/examples/robertson_dae.yaml) with
    the native bdf: the discrete adjoint gives idasRoberts_ASAi_dns' published
    dG/dp = (1.4878e+06, -5.9467, 9.9112e-04) at rtol 1e-8 (5 printed digits
    and the example's own rtol-1e-6 error: 5e-4 relative), forward tangents of
    the same steps give the same gradient (two transposes of one discrete
    map; Robertson's step matrices round them apart by ~1e-9: 1e-8), and the
    CLI gives the same bits."""
    rob = os.path.join(EXAMPLES, "robertson_dae.yaml")
    assert costate.load(rob).algebraic_states == ["y3"]
    assert costate.load(os.path.join(EXAMPLES, "lotka_volterra.yaml")).algebraic_states == []
    native = {"integrator.method": "bdf", "integrator.rtol": 1e-8,
              "integrator.atol": [1e-10, 1e-16, 1e-8],
              "sensitivity.method": "discrete_adjoint"}
    a = costate.load(rob, set=native).sensitivity()
    published = {"k1": 1.4878e+06, "k2": -5.9467, "k3": 9.9112e-04}
    for name, value in published.items():
        assert abs(a.gradient_dict[name] / value - 1) < 5e-4, (name, a.gradient_dict[name])
    f = costate.load(rob, set=native).sensitivity(method="forward")
    np.testing.assert_allclose(f.gradient, a.gradient, rtol=1e-8)
    sets = []
    for k, v in native.items():
        sets += ["--set", "%s=%s" % (k, str(v).replace("'", ""))]
    j = cli_json("sensitivity", rob, *sets)
    assert a.gradient_dict == j["gradient"]


# ---- errors ------------------------------------------------------------------------

def test_bad_file_raises_the_cli_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: lotka_volterra\ntime: {start: 0, end: 1}\n"
                   "integrator: {method: rk4, dt: fast}\n")
    with pytest.raises(costate.Error) as e:
        costate.load(str(bad))
    message = str(e.value)
    assert message == cli_error("run", str(bad))
    assert message.startswith(str(bad) + ":3:31: integrator.dt")
    assert isinstance(e.value, RuntimeError)


def test_bad_dict_names_line_column_and_the_nearest_key():
    with pytest.raises(costate.Error) as e:
        costate.load({"model": "lotka_volterra", "time": {"start": 0, "end": 1},
                      "integrator": {"method": "rk4", "dtt": 0.1}})
    assert str(e.value).startswith("<dict>:")
    assert "integrator.dtt" in str(e.value) and "'dt'" in str(e.value)
    with pytest.raises(costate.Error, match="sensitivity needs an 'objective:' section"):
        costate.load(LV).sensitivity()
    with pytest.raises(costate.Error, match="input file not found"):
        costate.load("/nonexistent.yaml")


# ---- sensitivity and gradcheck -------------------------------------------------------

def test_sensitivity_and_hessian_equal_cli_bitwise():
    s = costate.load(LV_EQ).sensitivity(hessian=True)
    j = cli_json("sensitivity", LV_EQ, "--hessian")
    assert s.objective == j["objective"]
    assert s.gradient_dict == j["gradient"]
    assert s.gradient_initial_state_dict == j["gradient_initial_state"]
    assert s.names == list(j["gradient"])
    assert s.gradient.dtype == np.float64 and s.gradient.shape == (len(s.names),)
    assert s.hessian.shape == (len(s.names), len(s.names)) and s.hessian.flags.c_contiguous
    assert s.hessian.tolist() == j["hessian"]["matrix"]
    assert s.method == j["method"]


def test_sensitivity_method_override_equals_cli():
    s = costate.load(LV_EQ).sensitivity(method="forward")
    j = cli_json("sensitivity", LV_EQ, "--set", "sensitivity.method=forward")
    assert s.method == j["method"] and s.gradient_dict == j["gradient"]
    with pytest.raises(costate.Error, match="sensitivity.method"):
        costate.load(LV_EQ).sensitivity(method="adjoynt")


def test_gradcheck_equals_cli():
    c = costate.load(LV_EQ).gradcheck()
    j = cli_json("gradcheck", LV_EQ)
    assert c.passed and j["status"] == "ok"
    assert c.objective == j["objective"]
    assert c.taylor["min_order"] == j["taylor"]["min_order"]
    comps = j["finite_differences"]["components"]
    assert c.names == list(comps)
    assert c.gradient.tolist() == [comps[n]["adjoint"] for n in c.names]
    assert c.finite_differences["values"].tolist() == [comps[n]["fd"] for n in c.names]


# ---- calibration -------------------------------------------------------------------

@pytest.fixture(scope="module")
def calibration():
    return costate.load(LV_CAL)


@pytest.fixture(scope="module")
def tao(calibration):
    return calibration.calibrate()


def test_calibrate_equals_cli(tao):
    j = cli_json("calibrate", LV_CAL)
    assert tao.converged and j["converged"]
    assert tao.values_dict == j["parameters"]
    assert tao.standard_errors.tolist() == [j["standard_errors"][n] for n in tao.names]
    assert tao.objective == j["objective"] and tao.iterations == j["iterations"]
    assert tao.objective_history.tolist() == j["objective_history"]
    corr = [[j["correlation"][a][b] for b in tao.names] for a in tao.names]
    assert tao.correlation.tolist() == corr
    assert tao.correlation.shape == (4, 4)


def test_objective_is_the_calibration_objective(calibration, tao):
    fit = calibration.fit
    assert fit.names == tao.names and fit.log == [True] * 4
    np.testing.assert_array_equal(calibration.values(fit.start), tao.initial)
    f, g = calibration.objective(fit.start)
    # TAO's iteration 0 is J at the start: the same evaluation.
    assert f == tao.objective_history[0]
    assert isinstance(f, float) and g.dtype == np.float64 and g.shape == (4,)
    # The adjoint gradient against central differences.
    for k in range(4):
        e = np.zeros(4)
        e[k] = FD_STEP * max(1.0, abs(fit.start[k]))
        fd = (calibration.objective(fit.start + e)[0] - calibration.objective(fit.start - e)[0]) \
            / (2 * e[k])
        assert abs(fd - g[k]) <= FD_TOL * max(abs(g[k]), np.abs(g).max()), (k, fd, g[k])


def test_scipy_fit_reaches_the_calibrate_optimum(calibration, tao):
    fit = calibration.fit
    # BFGS in q = log(rate): the bounds (0.01..100) are not active at the
    # optimum. (L-BFGS-B's first step, of unit length in q, reaches rates
    # where RK4 at dt = 0.01 overflows: J = NaN stops its line search.)
    r = scipy.optimize.minimize(calibration.objective, fit.start, jac=True, method="BFGS",
                                options={"gtol": 1e-8})
    assert r.success, r.message
    assert all(lo < x < hi for x, (lo, hi) in zip(r.x, fit.bounds))
    v = calibration.values(r.x)
    np.testing.assert_allclose(v, tao.values, rtol=FIT_AGREEMENT, atol=0)
    assert abs(r.fun - tao.objective) <= FIT_AGREEMENT * tao.objective


# hessp: central differences of objective()'s gradient along u, step h
# (absolute: q are logs or O(1) values): truncation ~h²·|∇³J| and round-off
# ~eps·|∇J|/h ≈ 1e-16·1e3/1e-5 = 1e-8; compared relative to the largest
# |H u| entry. Measured: 1.8e-9 (LV start), 1.7e-9 (dopri5), 1.2e-7 (the
# chain-rule case, whose x(t0) = exp(2 q_a)/2.25 has a large third
# derivative: its error falls as h², 1.2e-3 → 1.2e-5 → 1.2e-7 for
# h = 1e-3 → 1e-5, the differences' truncation, not the product's).
HVP_FD_STEP, HVP_FD_TOL = 1e-5, 1e-6
# Forward over the discrete adjoint is symmetric to rounding (the same
# second derivatives, summed in different orders): e_iᵀ H e_j = e_jᵀ H e_i.
HVP_SYMMETRY_TOL = 1e-10


def hessp_against_differences(problem, q):
    n = len(q)
    rng = np.random.default_rng(7)
    directions = list(np.eye(n)) + [rng.standard_normal(n)]
    columns = []
    for u in directions:
        hu = problem.hessp(q, u)
        assert hu.dtype == np.float64 and hu.shape == (n,)
        h = HVP_FD_STEP
        fd = (problem.objective(q + h * u)[1] - problem.objective(q - h * u)[1]) / (2 * h)
        err = np.abs(fd - hu).max() / np.abs(hu).max()
        assert err <= HVP_FD_TOL, (u, hu, fd, err)
        columns.append(hu)
    H = np.array(columns[:n]).T
    asym = np.abs(H - H.T).max() / np.abs(H).max()
    assert asym <= HVP_SYMMETRY_TOL, asym
    # Linear in u: H (e_0 .. e_n combined) = the combination of the columns.
    np.testing.assert_allclose(columns[n], H @ directions[n], rtol=0, atol=1e-10 * np.abs(H).max())
    return H


def test_hessp_is_the_hessian_of_the_objective(calibration):
    q = calibration.fit.start
    hessp_against_differences(calibration, q)
    np.testing.assert_array_equal(calibration.hessp(q, np.zeros(4)), np.zeros(4))


LV_DATA = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "synthetic", "lotka_volterra.csv")


def test_hessp_chain_rule_initial_values_priors_and_scales():
    # A fitted initial value (y), an initial value written as a nonlinear
    # expression of a fitted parameter (x(t0) = a²/2.25), log and linear
    # quantities and a regularisation: every term of H(q) u.
    d = {
        "model": {"states": ["x", "y"],
                  "equations": {"x": "a*x - b*x*y", "y": "-c*y + d*x*y"}},
        "parameters": {"a": 1.3, "b": 0.9, "c": 2.7, "d": 1.1},
        "initial_state": {"x": "a*a/2.25", "y": 1.1},
        "time": {"start": 0.0, "end": 10.0, "output_every": 0.25},
        "integrator": {"method": "rk4", "dt": 0.01},
        "calibration": {
            "parameters": {"a": {"lower": 0.01, "upper": 100, "log": True},
                           "b": {"lower": 0.01, "upper": 100, "log": True},
                           "c": {"lower": 0.01, "upper": 100},
                           "d": {"lower": 0.01, "upper": 100}},
            "initial_state": {"y": {"lower": 0.01, "upper": 10, "log": True}},
            "data": {"file": LV_DATA, "noise": 0.1},
            "regularization": {"weight": 0.5},
        },
    }
    p = costate.load(d)
    assert p.fit.names[-1] == "y(t0)"
    hessp_against_differences(p, p.fit.start + 0.05)


def test_hessp_with_an_adaptive_integrator(calibration):
    # dopri5: the sweep replays the steps the gradient's adaptive run chose
    # at q; differences re-choose them at q ± h u. With rtol = 1e-12 the
    # step choice changes J only at ~1e-12 relative, below the differences'
    # resolution at h = 1e-5.
    p = costate.load(LV_CAL, set={"integrator.method": "dopri5", "integrator.rtol": 1e-12,
                                  "integrator.atol": 1e-12})
    hessp_against_differences(p, p.fit.start)


# cvodes_adjoint: CVODES' continuous second-order adjoint against central
# differences of CVODES adjoint gradients (each re-choosing its steps) at
# rtol = atol = 1e-12, h = 1e-4: both are exact only to the tolerances'
# order, amplified by 1/h in the differences; 8.7e-7 measured, bound 1e-5.
CVODES_HVP_FD_STEP, CVODES_HVP_FD_TOL = 1e-4, 1e-5


def test_hessp_with_cvodes_adjoint():
    p = costate.load(LV_CAL, set={"integrator.method": "cvodes_bdf", "integrator.rtol": 1e-12,
                                  "integrator.atol": 1e-12, "sensitivity.method": "cvodes_adjoint"})
    q = p.fit.start
    for u in np.eye(len(q)):
        hu = p.hessp(q, u)
        h = CVODES_HVP_FD_STEP
        fd = (p.objective(q + h * u)[1] - p.objective(q - h * u)[1]) / (2 * h)
        assert np.abs(fd - hu).max() <= CVODES_HVP_FD_TOL * np.abs(hu).max(), (u, fd, hu)


def test_hessp_refuses_first_order_methods_and_wrong_arrays(calibration):
    with pytest.raises(ValueError, match=r"hessp\(x, v\): v: expected a 1-D array of 4 numbers"):
        calibration.hessp(calibration.fit.start, np.zeros(3))
    with pytest.raises(ValueError, match=r"hessp\(x, v\): x"):
        calibration.hessp(np.zeros((2, 2)), np.zeros(4))
    with pytest.raises(ValueError):
        calibration.hessp(calibration.fit.start, ["a", "b", "c", "d"])
    forward = costate.load(LV_CAL, set={"sensitivity.method": "forward"})
    with pytest.raises(costate.Error, match="Hessian-vector product.*forward"):
        forward.hessp(forward.fit.start, np.ones(4))


# Stopping rules. At the optimum the Hessian's eigenvalues in q are
# 3.4e3 … 2.4e6, so |∇J| ≤ 1e-5 puts q within 1e-5/3.4e3 ≈ 3e-9 of it, far
# inside FIT_AGREEMENT. trust-krylov cannot go below |∇J| ≈ 4e-6 here: its
# predicted decrease, ~|∇J|²/λ_min ≈ 5e-15, is then J's own rounding
# (40·2e-16), and it reports "failure to predict improvement".
NEWTON_METHODS = [("trust-krylov", {"gtol": 1e-5}), ("trust-ncg", {"gtol": 1e-7}),
                  ("Newton-CG", {"xtol": 1e-12})]


@pytest.mark.parametrize("method,options", NEWTON_METHODS)
def test_scipy_newton_with_hessp_reaches_the_calibrate_optimum(calibration, tao, method, options):
    fit = calibration.fit
    r = scipy.optimize.minimize(calibration.objective, fit.start, jac=True,
                                hessp=calibration.hessp, method=method, options=options)
    assert r.success, r.message
    assert r.nhev > 0
    np.testing.assert_allclose(calibration.values(r.x), tao.values, rtol=FIT_AGREEMENT, atol=0)
    assert abs(r.fun - tao.objective) <= FIT_AGREEMENT * tao.objective


def test_objective_rejects_wrong_arrays(calibration):
    with pytest.raises(ValueError, match="1-D array of 4 numbers"):
        calibration.objective(np.zeros(3))
    with pytest.raises(ValueError, match="1-D array of 4 numbers"):
        calibration.objective(np.zeros((2, 2)))
    with pytest.raises(ValueError):
        calibration.objective(["a", "b", "c", "d"])
    with pytest.raises(costate.Error, match="needs a 'calibration:' section"):
        costate.load(LV).objective(np.zeros(4))


def test_calibrate_writes_a_plottable_file(calibration, tmp_path):
    out = str(tmp_path / "cal.h5")
    r = calibration.calibrate(output=out)
    with h5py.File(out) as f:
        np.testing.assert_array_equal(f["calibration/values"][()], r.values)
        np.testing.assert_array_equal(f["calibration/objective_history"][()], r.objective_history)


# ---- the GIL -----------------------------------------------------------------------

def test_gil_is_released_during_a_run():
    # 10⁷ RK4 steps (~1.5 s); meanwhile this thread wakes every 10 ms. A held GIL
    # would leave one gap as long as the whole run.
    p = costate.load(LV, set={"integrator.method": "rk4", "integrator.dt": 1e-6})
    done = []
    worker = threading.Thread(target=lambda: done.append(p.run()))
    start = time.perf_counter()
    worker.start()
    wakeups = [start]
    while worker.is_alive():
        time.sleep(0.01)
        wakeups.append(time.perf_counter())
    worker.join()
    duration = wakeups[-1] - start
    assert done and duration > 0.2, "the run was too short to tell (%.3f s)" % duration
    assert max(np.diff(wakeups)) < 0.5 * duration


# ---- Ctrl-C ------------------------------------------------------------------------

@pytest.mark.parametrize("what,dt,output", [("run", 1e-7, True), ("sensitivity", 1e-7, True),
                                            ("sensitivity", 1e-5, False)])
def test_ctrl_c_interrupts_and_writes_nothing(tmp_path, what, dt, output):
    # RK4 for 10⁸ steps (~15 s uninterrupted); SIGINT after 0.3 s.
    # sensitivity() with an output file integrates the trajectory first, and
    # that is where the signal lands; without one (10⁷ steps, several seconds
    # of store-all adjoint) it lands in the gradient's own sweep, which calls
    # the interrupt check every 16 steps (scheme.hpp's SweepHook). Had the
    # computation not stopped, Python would raise the KeyboardInterrupt only
    # after it ends: the elapsed time tells the two apart.
    p = costate.load(LV if what == "run" else LV_EQ,
                     set={"integrator.method": "rk4", "integrator.dt": dt,
                          "integrator.max_steps": 1000000000})
    out = tmp_path / "interrupted.h5"
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        if output:
            getattr(p, what)(output=str(out))
        else:
            getattr(p, what)()
    elapsed = time.perf_counter() - start
    timer.join()
    assert elapsed < 3.0, elapsed
    assert not out.exists() and not (tmp_path / "interrupted.h5.partial").exists()
    # costate is usable afterwards.
    assert costate.load(LV).run().y.shape[1] == 2


@pytest.mark.parametrize("what", ["objective", "hessp"])
def test_ctrl_c_interrupts_objective_and_hessp(what):
    # RK4 at dt = 1e-6: 10⁷ steps per evaluation, binomial checkpointing
    # (20 snapshots, so memory stays small); uninterrupted, objective() takes
    # ~14 s and hessp() longer, far above the 3 s bound. SIGINT after 0.3 s.
    p = costate.load(LV_CAL, set={"integrator.dt": 1e-6, "integrator.max_steps": 1000000000,
                                  "sensitivity.checkpointing.schedule": "binomial",
                                  "sensitivity.checkpointing.snapshots": 20})
    q = p.fit.start
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        if what == "objective":
            p.objective(q)
        else:
            p.hessp(q, np.ones(len(q)))
    elapsed = time.perf_counter() - start
    timer.join()
    assert elapsed < 3.0, elapsed
    f, g = costate.load(LV_CAL).objective(q)  # costate is usable afterwards
    assert np.isfinite(f) and g.shape == q.shape


def test_run_gives_an_sbml_models_symbols(tmp_path):
    # Every SBML symbol (states, parameters, rule targets, fluxes) at each
    # output time; the last row is the CLI's final_symbols, bitwise.
    path = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "sbml", "conversion.yaml")
    sol = costate.load(path).run()
    j = cli_json("run", path, "-o", str(tmp_path / "cli.h5"))
    assert sol.symbol_names == j["symbol_names"]
    assert sol.symbols.shape == (len(sol.t), len(sol.symbol_names))
    assert sol.symbols[-1].tolist() == j["final_symbols"]
    # The states' columns are the states.
    for i, name in enumerate(sol.names):
        np.testing.assert_array_equal(sol.symbols[:, sol.symbol_names.index(name)], sol.y[:, i])


DELAY_SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
<model id="dde"><listOfParameters>
<parameter id="x" value="1" constant="false"/><parameter id="y" constant="false"/>
</listOfParameters><listOfRules>
<rateRule variable="x"><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><minus/><apply>
<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/delay">delay</csymbol>
<ci>x</ci><cn>1</cn></apply></apply></math></rateRule>
<assignmentRule variable="y"><math xmlns="http://www.w3.org/1998/Math/MathML"><apply>
<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/delay">delay</csymbol>
<ci>x</ci><cn>0.5</cn></apply></math></assignmentRule>
</listOfRules></model></sbml>
"""


def test_run_gives_the_symbols_of_a_model_with_delay(tmp_path):
    # dx/dt = -x(t - 1), x = 1 before 0: x = 1 - t on [0, 1], then
    # 1 - t + (t - 1)^2/2 on [1, 2]; y = x(t - 0.5), read from the history.
    (tmp_path / "dde.xml").write_text(DELAY_SBML)
    path = tmp_path / "dde.yaml"
    path.write_text("model: {sbml: dde.xml}\ntime: {end: 2, output_every: 0.25}\n"
                    "integrator: {method: cvodes_bdf, rtol: 1.0e-10, atol: 1.0e-12}\n")
    sol = costate.load(str(path)).run()
    j = cli_json("run", str(path))
    assert sol.symbols[-1].tolist() == j["final_symbols"]

    def x(t):
        return 1.0 if t <= 0 else 1 - t + (max(t - 1, 0.0) ** 2) / 2

    y = sol.symbols[:, sol.symbol_names.index("y")]
    # cvodes_bdf at rtol 1e-10 on a cubic history (Hermite-exact): 1e-8
    np.testing.assert_allclose(y, [x(t - 0.5) for t in sol.t], atol=1e-8)
