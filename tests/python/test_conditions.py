"""Problem.sensitivity and Problem.gradcheck on files with conditions (issue
33): the summed objective and gradient against per-condition problems
written as files without conditions, central differences, gradcheck, and
`costate sensitivity` on the same file."""

import os

import h5py
import numpy as np

import costate
from cli_support import cli_json

EXAMPLES = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "examples")
DATA = os.path.join(EXAMPLES, "decay_conditions")
DOSES = [1, 2, 4, 8]
NOISE = 0.02
POINT = {"k": 0.4, "m": 0.25, "k_i": 0.2}  # away from the file's values (and from the fit)

# Each condition's J_c is the same arithmetic in its plain file as in the
# file with conditions; the sums add them in the same order — but the
# plain files' gradients are added here by numpy in another order than the
# library's: 1e-13 relative is a few roundings of sums of 5 terms.
SUM_RTOL = 1e-13
# Central differences with h = 1e-6 on fixed rk4 steps: truncation ~h²·J'''
# (1e-12 relative) and round-off eps·J/h ≈ 1e-10·J against gradients of the
# size of J: 1e-6 relative to (|g| + 1) is far above both.
FD_STEP, FD_TOL = 1e-6, 1e-6


def model(parameters, x0="dose"):
    return {
        "model": {"states": ["x", "y"], "equations": {"x": "-k*x", "y": "k*x - m*y"}},
        "parameters": parameters,
        "initial_state": {"x": x0, "y": 0.0},
        "time": {"start": 0.0, "end": 10.0, "output_every": 0.5},
        "integrator": {"method": "rk4", "dt": 0.01},
        "sensitivity": {"method": "discrete_adjoint", "wrt": ["k", "m", "k_i", "dose", "initial_state"]},
    }


def with_conditions(point):
    d = model(dict(point, dose=1.0))
    d["conditions"] = [
        {"id": "dose%d" % v, "parameters": {"dose": v},
         "data": {"file": os.path.join(DATA, "dose%d.csv" % v), "noise": NOISE}} for v in DOSES
    ] + [{"id": "inhibited", "parameters": {"dose": 4, "k": "k_i"},
          "data": {"file": os.path.join(DATA, "inhibited.csv"), "noise": NOISE}}]
    return d


def plain(point, dose, k, data):
    """One condition as a file without conditions: dose and k replaced by numbers."""
    d = model(dict(point, k=k, dose=float(dose)))
    d["objective"] = {"data": {"file": os.path.join(DATA, data), "noise": {"x": NOISE, "y": NOISE}}}
    return d


def test_sensitivity_sums_the_conditions_like_per_condition_files(tmp_path):
    s = costate.load(with_conditions(POINT)).sensitivity()
    assert s.conditions == ["dose1", "dose2", "dose4", "dose8", "inhibited"]
    # The conditions as files of their own: dose rows read k, the inhibited
    # row reads k_i in k's place.
    rows = [plain(POINT, v, POINT["k"], "dose%d.csv" % v) for v in DOSES]
    rows.append(plain(POINT, 4, POINT["k_i"], "inhibited.csv"))
    parts = [costate.load(r).sensitivity() for r in rows]
    for c, part in enumerate(parts):
        assert s.condition_objectives[c] == part.objective  # the same arithmetic: the same bits
    total = 0.0
    for part in parts:
        total += part.objective
    assert s.objective == total  # summed in the conditions' order
    g = s.gradient_dict
    expect_k = sum(p.gradient_dict["k"] for p in parts[:4])
    expect_m = sum(p.gradient_dict["m"] for p in parts)
    expect_ki = parts[4].gradient_dict["k"]
    np.testing.assert_allclose([g["k"], g["m"], g["k_i"]], [expect_k, expect_m, expect_ki], rtol=SUM_RTOL)
    assert g["dose"] == 0.0  # replaced by a number in every condition
    # y(t0) = 0 is a number, shared by every condition: its gradient sums too.
    np.testing.assert_allclose(s.gradient_initial_state_dict["y"],
                               sum(p.gradient_initial_state_dict["y"] for p in parts), rtol=SUM_RTOL)


def test_sensitivity_of_conditions_against_central_differences():
    s = costate.load(with_conditions(POINT)).sensitivity()
    for name in ("k", "m", "k_i"):
        h = FD_STEP * max(1.0, abs(POINT[name]))
        up = costate.load(with_conditions(dict(POINT, **{name: POINT[name] + h}))).sensitivity().objective
        down = costate.load(with_conditions(dict(POINT, **{name: POINT[name] - h}))).sensitivity().objective
        fd = (up - down) / (2 * h)
        g = s.gradient_dict[name]
        assert abs(g - fd) <= FD_TOL * (abs(g) + 1.0), (name, g, fd)


def test_gradcheck_of_conditions_checks_the_sum():
    p = costate.load(with_conditions(POINT))
    c = p.gradcheck()
    s = p.sensitivity()
    assert c.passed, (c.taylor["report"], c.finite_differences["report"])
    assert c.taylor["min_order"] >= 1.9
    assert c.objective == s.objective
    # x = (k, m, k_i, dose, y(t0)); x(t0) = dose is an expression, not a coordinate.
    assert c.names == ["k", "m", "k_i", "dose", "y(t0)"]
    np.testing.assert_array_equal(c.gradient[:4], s.gradient)
    assert c.gradient[3] == 0.0 and abs(c.finite_differences["values"][3]) <= FD_TOL
    assert c.finite_differences["max_rel_error"] <= 1e-5  # gradcheck's own bar for frozen steps


def test_sensitivity_of_conditions_equals_the_cli_and_writes_every_condition(tmp_path):
    out = str(tmp_path / "py.h5")
    path = os.path.join(EXAMPLES, "decay_conditions.yaml")
    s = costate.load(path).sensitivity(output=out)
    j = cli_json("sensitivity", path)
    assert s.objective == j["objective"]
    assert s.gradient_dict == j["gradient"]
    assert [c["objective"] for c in j["conditions"]] == s.condition_objectives.tolist()
    with h5py.File(out, "r") as f:
        assert f.attrs["command"] in ("sensitivity", b"sensitivity")
        assert len(f["conditions"].keys()) - ("ids" in f["conditions"]) == 5
        np.testing.assert_array_equal(f["sensitivity"]["gradient"][()], s.gradient)


def test_hessian_of_conditions_against_differences_of_the_gradient():
    # Central differences of the summed gradient with h = 1e-5: truncation
    # ~h² (1e-10 relative), round-off eps·|g|/h ≈ 1e-11·|g| — against Hessian
    # entries of the gradient's size, 1e-6 relative to the column's largest.
    s = costate.load(with_conditions(POINT)).sensitivity(hessian=True)
    H = np.asarray(s.hessian)
    assert H.shape == (4, 4) and s.hessian_asymmetry <= 1e-12
    names = ["k", "m", "k_i"]
    for b, name in enumerate(names):
        h = 1e-5 * max(1.0, abs(POINT[name]))
        up = costate.load(with_conditions(dict(POINT, **{name: POINT[name] + h}))).sensitivity().gradient
        down = costate.load(with_conditions(dict(POINT, **{name: POINT[name] - h}))).sensitivity().gradient
        column = (up - down) / (2 * h)
        scale = np.max(np.abs(column))
        assert np.max(np.abs(H[:, b] - column)) <= 1e-6 * scale, (name, H[:, b], column)
    assert np.all(H[3, :] == 0.0) and np.all(H[:, 3] == 0.0)  # dose reaches no condition
