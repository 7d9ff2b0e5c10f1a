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


def test_fit_restarts_when_the_rescues_are_exhausted():
    def flaky(c, x):
        if x[1] > 3.2:  # SGD's first full-batch step at 0.9 lands at x1 ≈ 3.6
            return float("nan"), np.zeros(2)
        return line_loss(c, x)

    slope, intercept = np.polyfit(A, B, 1)
    # No rescues and no restarts: the fit stops at its start, the last
    # accepted point.
    f = costate.fit(flaky, 100, [0.0, 0.0], optimizer="sgd", epochs=40, learning_rate=0.9,
                    max_rescues=0, max_restarts=0)
    assert f.termination == "rescue_failed" and f.restarts == 0 and list(f.x) == [0.0, 0.0]
    # A restart goes back there, skips the (whole) batch and continues at
    # half the learning rate, where full-batch SGD converges to the line
    # (measured within 1e-12; 1e-8 leaves round-off room).
    f = costate.fit(flaky, 100, [0.0, 0.0], optimizer="sgd", epochs=40, learning_rate=0.9,
                    max_rescues=0, max_restarts=3)
    assert f.termination == "epochs" and f.restarts == 1
    assert [e["restarts"] for e in f.epochs[:3]] == [0, 1, 0]
    assert [e["learning_rate"] for e in f.epochs[:3]] == [0.9, 0.45, 0.45]
    assert abs(f.x[0] - intercept) < 1e-8 and abs(f.x[1] - slope) < 1e-8


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


# ---- costate.fit over an input file's conditions (issue 33) ----

SOURCE = os.environ.get("COSTATE_SOURCE_DIR", "")
DECAY = os.path.join(SOURCE, "data", "examples", "decay_conditions.yaml")


def test_fit_over_an_input_files_conditions_is_the_command_lines():
    """costate.fit(problem, …) with the ggml-style arguments is the same
    library call as `costate calibrate FILE --optimizer adamw …`: the same
    bits (the JSON keeps 17 digits), one callback per epoch, the physical
    batch changing no bit, the validation split held out."""
    from cli_support import cli_json
    p = costate.load(DECAY)
    seen = []
    args = dict(optimizer="adamw", epochs=12, batch=2, learning_rate=0.05, validation_split=0.2, seed=4)
    f = costate.fit(p, callback=seen.append, **args)
    j = cli_json("calibrate", DECAY, "--optimizer", "adamw", "--epochs", "12", "--batch", "2",
                 "--learning-rate", "0.05", "--validation-split", "0.2", "--seed", "4")
    assert f.objective == j["objective"]
    assert f.values_dict == j["parameters"]
    assert f.simulations == j["simulations"]
    assert [e["train_loss"] for e in f.epochs] == [e["train_loss"] for e in j["epochs"]]
    assert len(seen) == 12 and seen == f.epochs
    # 5 conditions, ⌈0.2·5⌉ = 1 held out, 4 trained on: 2 steps an epoch.
    assert len(f.validation) == 1 and len(f.training) == 4 and f.steps == 24
    assert all(np.isfinite(e["validation_loss"]) for e in f.epochs)
    assert f.conditions == 5 and f.names == ["k", "m", "k_i"]
    kLibmExp = 1e-15  # log: true for all three; C++'s exp and numpy's may differ in the last bit
    np.testing.assert_allclose(f.values, np.exp(f.x), rtol=kLibmExp, atol=0)
    g = costate.fit(DECAY, physical_batch=1, **args)  # a path; physical batches of 1
    assert np.array_equal(f.x, g.x) and f.objective == g.objective


def test_fit_over_conditions_reaches_the_full_batch_optimum():
    """Enough epochs (cosine schedule) end within 1 of TAO's full-batch
    objective — the bar bench/README.md uses (J is −log-likelihood up to a
    constant: the noise σ is given) — and not below it."""
    p = costate.load(DECAY)
    full = p.calibrate()
    f = costate.fit(p, optimizer="adamw", epochs=150, batch=2, learning_rate=0.05,
                    schedule="cosine", seed=3)
    kSameObjective = 1.0
    assert full.objective - 1e-9 * full.objective <= f.objective <= full.objective + kSameObjective


def test_a_converged_finish_gives_the_command_lines_standard_errors():
    """With a full-batch finish that converges, costate.fit reports the
    standard errors of the fitted values — the command line's bits (the JSON
    keeps 17 digits); without a finish, None."""
    from cli_support import cli_json
    args = dict(optimizer="adamw", epochs=40, batch=2, learning_rate=0.05, seed=3)
    f = costate.fit(DECAY, finish_iterations=50, **args)
    j = cli_json("calibrate", DECAY, "--optimizer", "adamw", "--epochs", "40", "--batch", "2",
                 "--learning-rate", "0.05", "--seed", "3", "--finish", "50")
    assert j["status"] == "ok"
    assert dict(zip(f.names, f.standard_errors.tolist())) == j["standard_errors"]
    assert costate.fit(DECAY, **args).standard_errors is None


def test_fit_over_conditions_refuses_what_the_file_brings():
    p = costate.load(DECAY)
    with pytest.raises(TypeError, match="brings its conditions, start and bounds"):
        costate.fit(p, 5, [0.0])
    with pytest.raises(TypeError, match="unknown keyword 'epoch'"):
        costate.fit(p, epoch=3)
    with pytest.raises(costate.Error, match="batch = 9 is larger than the training set"):
        costate.fit(p, batch=9)
    with pytest.raises(costate.Error, match="learning_rate = 0 must be > 0"):
        costate.fit(p, learning_rate=0.0)


def test_stochastic_fit_file_carries_provenance_and_settings_that_load_back(tmp_path):
    """The -o file of a stochastic fit records costate_version, command and
    the resolved settings (#36); the settings load back as an input file and
    give the same fit."""
    import h5py
    import subprocess
    from cli_support import CLI, cli_env
    out = str(tmp_path / "fit.h5")
    r = subprocess.run([CLI, "calibrate", DECAY, "--optimizer", "adamw", "--epochs", "10", "--batch", "2",
                        "--learning-rate", "0.05", "--seed", "5", "-q", "-o", out], env=cli_env(),
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr  # epochs only: not converged, and says so
    with h5py.File(out, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        x = f["stochastic/x"][()]
    assert attrs["command"] == "calibrate" and attrs["costate_version"]
    assert attrs["problem"] == DECAY
    saved = tmp_path / "saved.yaml"
    saved.write_text(attrs["settings"])  # the settings as run (data paths absolute)
    p = costate.load(str(saved))
    f = costate.fit(p)  # their calibration.optimizer: adamw, 10 epochs, batch 2, …
    assert np.array_equal(f.x, x)


def test_calibrate_writes_every_conditions_trajectory(tmp_path):
    """Problem.calibrate(output) on a file with conditions writes the file
    `costate calibrate -o` writes: every condition's trajectory at the fitted
    values, the same bits."""
    import h5py
    import subprocess
    from cli_support import CLI, cli_env
    mine, theirs = str(tmp_path / "py.h5"), str(tmp_path / "cli.h5")
    costate.load(DECAY).calibrate(output=mine)
    subprocess.run([CLI, "calibrate", DECAY, "-q", "-o", theirs], env=cli_env(), check=True,
                   stdout=subprocess.DEVNULL)
    with h5py.File(mine, "r") as a, h5py.File(theirs, "r") as b:
        assert len(a["conditions/ids"]) == 5
        for c in range(5):
            np.testing.assert_array_equal(a["conditions/%d/state" % c][()], b["conditions/%d/state" % c][()])
