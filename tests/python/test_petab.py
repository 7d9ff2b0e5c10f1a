"""PEtab problems in Python (costate.load("problem.yaml")) against the
command line on the same problem: `costate sensitivity problem.yaml --json`
and `costate calibrate problem.yaml --starts N --seed S --json`. The module
calls the same petab::read / evaluate / calibrate, serially here, so the
values are compared bitwise. Data: the PEtab test suite (v1) under
COSTATE_PETAB_DIR (CMake option), read in place; skipped when absent."""

import os

import h5py
import numpy as np
import pytest

import costate
from cli_support import cli_json

PETAB_DIR = os.environ.get("COSTATE_PETAB_DIR", "")
SUITE = os.path.join(PETAB_DIR, "test-suite-v1")
# Case 0002: two simulation conditions, two estimated parameters (k1, k2, lin).
CASE = os.path.join(SUITE, "0002", "_0002.yaml")
# Case 0004: six estimated parameters, among them an observable's scaling
# and offset.
CASE_OTHER = os.path.join(SUITE, "0004", "_0004.yaml")

pytestmark = pytest.mark.skipif(
    not os.path.isfile(CASE),
    reason="PEtab test suite not found at %s (configure with -DCOSTATE_PETAB_DIR=/path "
           "holding test-suite-v1)" % SUITE)

# The test suite's own tolerance on llh and chi2 (_0002_solution.yaml: tol_llh 1e-3).
SUITE_TOL = 1e-3
# Central differences of llh: h = 1e-5 on θ ~ 1, CVODES at rtol 1e-10:
# round-off of the adaptive solves ~1e-10/1e-5 = 1e-5 relative, truncation ~h².
FD_STEP, FD_TOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def problem():
    return costate.load(CASE)


def test_load_gives_a_petab_problem(problem):
    assert isinstance(problem, costate.PetabProblem)
    assert problem.ids == ["k1", "k2"] and problem.scales == ["lin", "lin"]
    np.testing.assert_array_equal(problem.nominal, [0.8, 0.6])
    assert problem.bounds == [(0.0, 10.0), (0.0, 10.0)]
    assert problem.n_experiments == 2
    assert isinstance(costate.load_petab(CASE), costate.PetabProblem)


@pytest.mark.parametrize("case", [CASE, CASE_OTHER])
def test_evaluate_equals_cli_bitwise(case):
    if not os.path.isfile(case):
        pytest.skip("%s not found" % case)
    r = costate.load(case).evaluate()
    j = cli_json("sensitivity", case)
    assert r.llh == j["llh"] and r.chi2 == j["chi2"] and r.log_prior == j["log_prior"]
    assert r.gradient_dict == j["gradient"]
    assert r.ids == list(j["gradient"])
    assert r.gradient.dtype == np.float64 and r.gradient.shape == (len(r.ids),)
    assert r.method == j["method"]
    # What was integrated: the same counts (one evaluation each).
    assert (r.steps, r.backward_steps, r.rhs_evaluations) == \
        (j["steps"], j["backward_steps"], j["rhs_evaluations"])
    assert r.steps > 0 and r.backward_steps > 0  # the default method is an adjoint


def test_evaluate_matches_the_suite_solution_and_differences(problem):
    r = problem.evaluate()
    # _0002_solution.yaml: llh -4.09983582520606, chi2 0.84816338477474.
    assert abs(r.llh - (-4.09983582520606)) <= SUITE_TOL
    assert abs(r.chi2 - 0.84816338477474) <= SUITE_TOL
    assert r.simulations.shape == r.sigmas.shape == (problem.n_measurements,)
    theta = problem.nominal + np.array([0.05, -0.03])
    g = problem.evaluate(theta).gradient
    for k in range(len(theta)):
        e = np.zeros_like(theta)
        e[k] = FD_STEP
        fd = (problem.evaluate(theta + e, gradient=False).llh
              - problem.evaluate(theta - e, gradient=False).llh) / (2 * FD_STEP)
        assert abs(fd - g[k]) <= FD_TOL * max(1.0, np.abs(g).max()), (k, fd, g[k])
    assert problem.evaluate(theta, gradient=False).gradient is None
    f, fg = problem.objective(theta)
    assert f == -(problem.evaluate(theta).llh) and fg.tolist() == (-g).tolist()


def test_calibrate_multistart_equals_cli(problem, tmp_path):
    out = str(tmp_path / "ms.h5")
    c = problem.calibrate(starts=4, seed=3, output=out)
    j = cli_json("calibrate", CASE, "--starts", "4", "--seed", "3")
    assert c.best_llh == j["llh"] and c.best_objective == j["objective"]
    assert c.best_x_dict == j["parameters"]
    assert c.best_index == j["best_start"] and c.at_best == j["at_best"]
    assert c.waterfall_starts == [w["start"] for w in j["waterfall"]]
    assert c.waterfall.tolist() == [w["objective"] for w in j["waterfall"]]
    assert c.iterations == [j["waterfall"][c.waterfall_starts.index(i)]["iterations"]
                            for i in range(4)]
    assert c.x.shape == c.initial.shape == (4, 2) and c.x.flags.c_contiguous
    # The waterfall is sorted, best first, and the best is its first entry.
    assert np.all(np.diff(c.waterfall) >= 0) and c.waterfall[0] == c.best_objective
    assert c.output_file == out
    with h5py.File(out) as f:
        g = f["calibration"]
        np.testing.assert_array_equal(g["waterfall"][()], c.waterfall)
        np.testing.assert_array_equal(g["x"][()], c.x)
        np.testing.assert_array_equal(g["best_x"][()], c.best_x)


def test_fisher_information_equals_cli_bitwise(problem):
    # The same petab::evaluate with Options::fim as `costate sensitivity
    # --fim` (without --fim it computes none): bitwise equal, ids × ids, C order.
    r = problem.evaluate(fim=True)
    j = cli_json("sensitivity", CASE, "--fim")
    assert cli_json("sensitivity", CASE)["fim"] is None
    assert r.ids == j["parameter_ids"]
    assert r.fim.dtype == np.float64 and r.fim.shape == (2, 2) and r.fim.flags.c_contiguous
    assert r.fim.tolist() == j["fim"]
    assert problem.evaluate().fim is None


def test_calibrate_sampling_equals_cli(problem):
    for sampling in ("lhs", "uniform"):
        c = problem.calibrate(starts=3, seed=5, sampling=sampling)
        j = cli_json("calibrate", CASE, "--starts", "3", "--seed", "5", "--sampling", sampling)
        assert c.waterfall.tolist() == [w["objective"] for w in j["waterfall"]], sampling
        assert c.best_x_dict == j["parameters"], sampling
    with pytest.raises(costate.Error, match="sampling 'sobol'"):
        problem.calibrate(starts=2, sampling="sobol")


def test_calibrate_nominal_start_and_bad_arguments(problem):
    c = problem.calibrate()
    j = cli_json("calibrate", CASE)
    assert c.best_llh == j["llh"] and c.best_x_dict == j["parameters"]
    assert c.initial.tolist() == [problem.nominal.tolist()]
    with pytest.raises(ValueError, match=r"calibrate\(starts=-2\)"):
        problem.calibrate(starts=-2)
    with pytest.raises(ValueError, match=r"calibrate\(seed=-1\)"):
        problem.calibrate(starts=2, seed=-1)
    with pytest.raises(ValueError, match=r"\.h5"):
        problem.calibrate(output="x.txt")


def test_wrong_theta_and_set_are_refused(problem):
    with pytest.raises(ValueError, match=r"evaluate\(theta\): expected a 1-D array of 2 numbers"):
        problem.evaluate([1.0])
    with pytest.raises(ValueError):
        problem.objective(["a", "b"])
    with pytest.raises(costate.Error, match="set= is not supported for PEtab problems"):
        costate.load(CASE, set={"integrator.rtol": 1e-6})


def test_pde_inputs_are_pde_problems_not_petab():
    # costate.load tells the three kinds of input apart (test_pde.py tests PDE inputs).
    pde = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "examples", "heat2d_kappa.yaml")
    assert isinstance(costate.load(pde), costate.PdeProblem)
