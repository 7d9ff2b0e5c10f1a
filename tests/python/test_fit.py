"""costate.fit (mini-batch stochastic fits over conditions with a Python
loss) and PetabProblem.fit (over a PEtab problem's experiments), against
the least-squares optimum, the command line, and their own reproducibility."""

import os

import numpy as np
import pytest

import costate

PETAB_DIR = os.environ.get("COSTATE_PETAB_DIR", "")
CASE = os.path.join(PETAB_DIR, "test-suite-v1", "0002", "_0002.yaml")
FUJITA = os.path.join(PETAB_DIR, "benchmark", "Fujita_SciSignal2010", "Fujita_SciSignal2010.yaml")

# One point per condition: loss_c = ½ (x0 + x1 a_c − b_c)².
RNG = np.random.default_rng(5)
A = RNG.uniform(-2, 2, 100)
B = 2.0 + 3.0 * A + 0.1 * RNG.standard_normal(100)


def line_loss(c, x):
    r = x[0] + x[1] * A[c] - B[c]
    return 0.5 * r * r, np.array([r, r * A[c]])


def test_fit_reaches_the_least_squares_line():
    slope, intercept = np.polyfit(A, B, 1)
    seen = []
    f = costate.fit(line_loss, 100, [0.0, 0.0], epochs=40, batch=10, learning_rate=0.05,
                    schedule="cosine", seed=3, callback=seen.append)
    # The cosine schedule anneals the noise of the mini-batches: within 1e-3
    # of the line (measured ~1e-5).
    assert f.termination == "epochs"
    assert abs(f.x[0] - intercept) < 1e-3 and abs(f.x[1] - slope) < 1e-3
    assert len(f.epochs) == 40 and len(seen) == 40
    assert seen[-1]["train_loss"] == f.epochs[-1]["train_loss"]
    assert f.simulations == 40 * 100 + 100
    # The same seed, the same bits; physical batches change none.
    g = costate.fit(line_loss, 100, [0.0, 0.0], epochs=40, batch=10, learning_rate=0.05,
                    schedule="cosine", seed=3, physical_batch=1)
    assert np.array_equal(f.x, g.x)


def test_fit_rescues_failed_conditions_and_refuses_bad_options():
    def flaky(c, x):
        if x[1] > 3.2:  # the first full-batch step at 0.9 lands at x1 ≈ 3.6; the optimum is ≈ 3
            return float("nan"), np.zeros(2)
        return line_loss(c, x)

    f = costate.fit(flaky, 100, [0.0, 0.0], optimizer="sgd", epochs=20, learning_rate=0.9)
    assert f.rescues > 0 and f.x[1] <= 3.2 and np.isfinite(f.objective)
    with pytest.raises(TypeError, match="unknown keyword 'epoch'"):
        costate.fit(line_loss, 100, [0.0, 0.0], epoch=3)
    with pytest.raises(costate.Error, match="learning_rate = -1 must be > 0"):
        costate.fit(line_loss, 100, [0.0, 0.0], learning_rate=-1.0)
    with pytest.raises(costate.Error, match="batch = 101 is larger than the training set"):
        costate.fit(line_loss, 100, [0.0, 0.0], batch=101)


@pytest.mark.skipif(not os.path.isfile(FUJITA), reason="PEtab benchmark not found under %s" % PETAB_DIR)
def test_petab_fit_matches_the_command_line():
    from cli_support import cli_json
    pe = costate.load(FUJITA)
    f = pe.fit(optimizer="adamw", epochs=3, batch=2, learning_rate=0.02)
    j = cli_json("calibrate", FUJITA, "--optimizer", "adamw", "--epochs", "3", "--batch", "2",
                 "--learning-rate", "0.02")
    # The same library call: the same bits (the JSON keeps 17 digits).
    assert f.llh == j["llh"]
    assert [f.x_dict[k] for k in pe.ids] == [j["parameters"][k] for k in pe.ids]
    assert f.simulations == j["simulations"]


@pytest.mark.skipif(not os.path.isfile(FUJITA), reason="PEtab benchmark not found under %s" % PETAB_DIR)
def test_plot_draws_the_training_curves(tmp_path):
    import h5py
    import subprocess
    from cli_support import CLI, cli_env
    from costate import plot
    out = str(tmp_path / "fit.h5")
    r = subprocess.run([CLI, "calibrate", FUJITA, "--optimizer", "adamw", "--epochs", "3", "--batch", "2",
                        "--validation-split", "0.2", "-q", "-o", out], env=cli_env(), capture_output=True,
                       text=True)
    assert r.returncode == 2, r.stderr  # epochs only: written, not converged (exit 2)
    fig, panels = plot.figure(out)
    assert set(panels) == {"training", "learning rate", "parameters"}
    with h5py.File(out, "r") as f:
        train = f["stochastic/train_loss"][()]
        valid = f["stochastic/validation_loss"][()]
        change = f["stochastic/x"][()] - f["stochastic/initial"][()]
    # The artists hold the file's numbers: the training curve, the
    # validation curve, and one bar per parameter.
    lines = panels["training"].get_lines()
    assert any(np.array_equal(l.get_ydata(), train) for l in lines)
    assert any(np.array_equal(l.get_ydata(), valid) for l in lines)
    heights = [p.get_height() for p in panels["parameters"].patches]
    assert np.allclose(heights, change, rtol=0, atol=0)
    assert "3 epochs" in panels["training"].get_title()
