"""costate.plot and `costate plot`: every panel kind drawn from a file the
CLI writes in the test; the data on each panel's artists equals the HDF5
data; the PNG has the documented size and is not blank."""

import os
import shutil
import subprocess

import h5py
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from costate import plot  # noqa: E402
from cli_support import cli_env  # noqa: E402

CLI = os.environ["COSTATE_CLI"]
EXAMPLES = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "examples")


def costate(*args):
    subprocess.run([CLI, *args, "-q"], check=True, env=cli_env(), stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("plot")
    out = {k: str(d / (k + ".h5")) for k in ("run", "sens", "cal", "pde")}
    costate("run", os.path.join(EXAMPLES, "lotka_volterra.yaml"), "-o", out["run"])
    costate("sensitivity", os.path.join(EXAMPLES, "lotka_volterra_equations.yaml"), "--hessian",
            "-o", out["sens"])
    costate("calibrate", os.path.join(EXAMPLES, "lotka_volterra_calibration.yaml"), "-o", out["cal"])
    costate("sensitivity", os.path.join(EXAMPLES, "heat2d_kappa.yaml"), "-o", out["pde"])
    return out


def strings(ds):
    return [v.decode() if isinstance(v, bytes) else v for v in ds]


def test_trajectory_lines_are_the_state(files):
    fig, panels = plot.figure(files["run"])
    assert list(panels) == ["trajectory"]
    ax = panels["trajectory"]
    with h5py.File(files["run"]) as f:
        names, t, y = strings(f["state_names"][()]), f["time"][()], f["state"][()]
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == names
    for i, ln in enumerate(lines):
        np.testing.assert_array_equal(ln.get_xdata(), t)
        np.testing.assert_array_equal(ln.get_ydata(), y[:, i])
    assert ax.get_xlabel() == "t"
    plt.close(fig)


def test_gradient_bars_and_hessian_image(files):
    fig, panels = plot.figure(files["sens"])
    assert set(panels) == {"trajectory", "gradient", "hessian"}
    with h5py.File(files["sens"]) as f:
        s = f["sensitivity"]
        g = np.concatenate([s["gradient"][()], s["gradient_initial_state"][()]])
        labels = strings(s["gradient"].attrs["names"]) + \
            [n + "(t0)" for n in strings(s["gradient_initial_state"].attrs["names"])]
        H = s["hessian"][()]
        hnames = strings(s["hessian"].attrs["names"])
    bars = panels["gradient"].patches
    np.testing.assert_array_equal([b.get_height() for b in bars], g)
    assert [t.get_text() for t in panels["gradient"].get_xticklabels()] == labels
    images = panels["hessian"].get_images()
    assert len(images) == 1
    np.testing.assert_array_equal(np.asarray(images[0].get_array()), H)
    assert [t.get_text() for t in panels["hessian"].get_yticklabels()] == hnames
    # Symmetric colour scale around 0.
    lo, hi = images[0].get_clim()
    assert lo == -hi and hi == np.abs(H).max()
    plt.close(fig)


def test_calibration_panels(files):
    fig, panels = plot.figure(files["cal"])
    assert set(panels) == {"trajectory", "residuals", "history", "correlation"}
    with h5py.File(files["cal"]) as f:
        c = f["calibration"]
        states = np.array(strings(c["residual_states"][()]))
        rt, obs, res = c["residual_times"][()], c["observed"][()], c["residuals"][()]
        fh, gh = c["objective_history"][()], c["gradient_norm_history"][()]
        corr = c["correlation"][()]
        names = strings(f["state_names"][()])
    observed = {ln.get_label(): ln for ln in panels["trajectory"].get_lines()}
    residual = {ln.get_label(): ln for ln in panels["residuals"].get_lines()}
    for name in names:
        sel = states == name
        np.testing.assert_array_equal(observed[name + " observed"].get_xdata(), rt[sel])
        np.testing.assert_array_equal(observed[name + " observed"].get_ydata(), obs[sel])
        np.testing.assert_array_equal(residual[name].get_ydata(), res[sel])
    hist = {ln.get_label(): ln for ln in panels["history"].get_lines()}
    np.testing.assert_array_equal(hist["objective J"].get_ydata(), fh)
    np.testing.assert_array_equal(hist["TAO residual (not ‖∇J‖)"].get_ydata(), gh)
    with h5py.File(files["cal"]) as f:
        jh = f["calibration/objective_gradient_norm_history"][()]
    np.testing.assert_array_equal(hist["‖∇J‖ (fitted variables)"].get_ydata(), jh)
    np.testing.assert_array_equal(hist["objective J"].get_xdata(), np.arange(len(fh)))
    assert panels["history"].get_yscale() == "log"
    im = panels["correlation"].get_images()[0]
    np.testing.assert_array_equal(np.asarray(im.get_array()), corr)
    assert im.get_clim() == (-1.0, 1.0)
    plt.close(fig)


def test_pde_fields_are_images(files):
    fig, panels = plot.figure(files["pde"])
    with h5py.File(files["pde"]) as f:
        frames = sorted(f["frames"].keys())
        expected = {"frame:u:" + frames[0], "frame:u:" + frames[-1]}
        data = {"frame:u:" + k: f["frames"][k]["u"][()] for k in (frames[0], frames[-1])}
        for name in f["fields"]:
            for comp in f["fields"][name]:
                expected.add("field:%s:%s" % (name, comp))
                data["field:%s:%s" % (name, comp)] = f["fields"][name][comp][()]
        cells = f.attrs["cells"]
        origin, spacing = f.attrs["origin"], f.attrs["spacing"]
    assert "field:kappa:kappa" in expected and "field:dJ_dkappa:dJ_dkappa" in expected
    assert set(panels) == expected
    for name, ax in panels.items():
        im = ax.get_images()
        assert len(im) == 1, name
        np.testing.assert_array_equal(np.asarray(im[0].get_array()), data[name][0])
        # Axes in the grid's coordinates, with a colour bar.
        np.testing.assert_allclose(im[0].get_extent(),
                                   [origin[0], origin[0] + spacing[0] * cells[0],
                                    origin[1], origin[1] + spacing[1] * cells[1]])
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "y")
        assert im[0].colorbar is not None
    plt.close(fig)


PETAB_CASE = os.path.join(os.environ.get("COSTATE_PETAB_DIR", ""), "test-suite-v1", "0002",
                          "_0002.yaml")


@pytest.fixture(scope="module")
def petab_file(tmp_path_factory):
    if not os.path.isfile(PETAB_CASE):
        pytest.skip("PEtab test suite not found at %s (configure with -DCOSTATE_PETAB_DIR)"
                    % PETAB_CASE)
    out = str(tmp_path_factory.mktemp("petab") / "multistart.h5")
    costate("calibrate", PETAB_CASE, "--starts", "5", "--seed", "2", "-o", out)
    return out


def test_petab_waterfall(petab_file):
    fig, panels = plot.figure(petab_file)
    assert list(panels) == ["waterfall"]
    with h5py.File(petab_file) as f:
        w = f["calibration/waterfall"][()]
    assert len(w) == 5 and np.all(np.isfinite(w))
    line = panels["waterfall"].get_lines()[0]
    np.testing.assert_array_equal(line.get_ydata(), w)
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 6))
    assert "final objective" in panels["waterfall"].get_ylabel()
    assert "k1, k2" in panels["waterfall"].get_title()
    # Case 0002 has one optimum: every start reaches it, and the axis spans
    # the best ± the tolerance instead of rounding-level differences.
    assert w[-1] - w[0] < plot.BEST_TOLERANCE
    assert panels["waterfall"].get_ylim() == (w[0] - plot.BEST_TOLERANCE,
                                              w[0] + 2 * plot.BEST_TOLERANCE)
    plt.close(fig)


@pytest.fixture(scope="module")
def petab_run_files(tmp_path_factory):
    """`costate run` (the simulation table's HDF5) and `costate sensitivity
    --fim -o` of case 0002 (two conditions, one observable)."""
    if not os.path.isfile(PETAB_CASE):
        pytest.skip("PEtab test suite not found at %s (configure with -DCOSTATE_PETAB_DIR)"
                    % PETAB_CASE)
    d = tmp_path_factory.mktemp("petab_run")
    run, sens = str(d / "sims.h5"), str(d / "sens.h5")
    costate("run", PETAB_CASE, "-o", run)
    costate("sensitivity", PETAB_CASE, "--fim", "-o", sens)
    return run, sens


def test_petab_run_file_draws_measurements_and_simulations(petab_run_files):
    run, _ = petab_run_files
    fig, panels = plot.figure(run)
    assert list(panels) == ["observable obs_a"]
    ax = panels["observable obs_a"]
    with h5py.File(run) as f:
        g = f["simulation"]
        t, m, h, cond = g["time"][()], g["measurement"][()], g["simulation"][()], g["condition"][()]
    lines = [ln for ln in ax.get_lines() if ln.get_label().endswith("(at the measured times)")]
    assert [ln.get_label().split()[0] for ln in lines] == ["c0", "c1"]
    for c, ln in enumerate(lines):
        rows = np.flatnonzero(cond == c)
        rows = rows[np.argsort(t[rows], kind="stable")]
        np.testing.assert_array_equal(ln.get_xdata(), t[rows])
        np.testing.assert_array_equal(ln.get_ydata(), h[rows])
    # The measurements are the error-bar markers.
    measured = sorted(float(y) for c in ax.containers for y in c.lines[0].get_ydata())
    assert measured == sorted(m.tolist())
    plt.close(fig)


def test_petab_sensitivity_file_draws_gradient_and_fim(petab_run_files):
    _, sens = petab_run_files
    fig, panels = plot.figure(sens)
    assert list(panels) == ["observable obs_a", "gradient", "fisher information"]
    with h5py.File(sens) as f:
        g, fim = f["gradient"][()], f["fim"][()]
    bars = [p.get_height() for p in panels["gradient"].patches]
    np.testing.assert_array_equal(bars, g)
    assert [t.get_text() for t in panels["gradient"].get_xticklabels()] == ["k1", "k2"]
    np.testing.assert_array_equal(panels["fisher information"].get_images()[0].get_array(), fim)
    plt.close(fig)


@pytest.fixture(scope="module")
def inversion(tmp_path_factory):
    """`costate calibrate heat2d_inversion.yaml` (a PDE inversion with its
    Laplace posterior, ~10 s): MAP only (`calibration.posterior=null`), with
    the posterior (the example's: /arrays/eigenvalues, the fields
    m_variance, m_prior_variance, eigenvector_i, sample_i), and a copy of
    the latter whose spectrum is replaced with h5py by one holding a
    non-positive value (the plot counts what it cannot draw on a log axis)."""
    d = tmp_path_factory.mktemp("inversion")
    plain, full, tweaked = (str(d / n) for n in ("map.h5", "posterior.h5", "tweaked.h5"))
    example = os.path.join(EXAMPLES, "heat2d_inversion.yaml")
    costate("calibrate", example, "--set", "output.file=" + plain, "--set", "calibration.posterior=null")
    costate("calibrate", example, "--set", "output.file=" + full)
    shutil.copy(full, tweaked)
    lam = np.array([3.0e2, 4.1e1, 1.0e1, 2.2, 0.4, 3e-2, -1e-9, 1e-3])  # one tiny negative
    with h5py.File(tweaked, "r+") as f:
        del f["arrays/eigenvalues"]
        f["arrays/eigenvalues"] = lam
    return plain, full, tweaked


def test_pde_inversion_history(inversion):
    fig, panels = plot.figure(inversion[0])
    assert "history" in panels and "eigenvalues" not in panels
    assert "field:m_map:m_map" in panels
    hist = {ln.get_label(): ln for ln in panels["history"].get_lines()}
    with h5py.File(inversion[0]) as f:
        a = f["arrays"]
        for label, key in (("objective", "history_objective"), ("misfit", "history_misfit"),
                           ("‖∇J‖", "history_gradient_norm")):
            np.testing.assert_array_equal(hist[label].get_ydata(), a[key][()])
            np.testing.assert_array_equal(hist[label].get_xdata(), a["history_iteration"][()])
    assert panels["history"].get_yscale() == "log"
    plt.close(fig)


def test_pde_inversion_eigenvalues_and_variances(inversion, tmp_path):
    path = inversion[1]  # the CLI's own posterior output
    fig, panels = plot.figure(path)
    assert {"history", "eigenvalues", "field:m_variance:m_variance",
            "field:m_prior_variance:m_prior_variance", "field:m_map:m_map"} <= set(panels)
    ax = panels["eigenvalues"]
    assert ax.get_yscale() == "log"
    line = ax.get_lines()[0]
    with h5py.File(path) as f:
        lam = f["arrays/eigenvalues"][()]
        variances = {n: f["fields/%s/%s" % (n, n)][()] for n in ("m_variance", "m_prior_variance")}
    # The example asks for rank 10; Gauss–Newton eigenvalues are positive.
    assert len(lam) == 10 and np.all(lam > 0)
    np.testing.assert_array_equal(line.get_ydata(), np.sort(lam)[::-1])
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, len(lam) + 1))
    # Of the 10 eigenvectors and 2 samples, the first 3 and 2, after the fields.
    names = [k for k in panels if k.startswith("field:")]
    assert names[-5:] == ["field:eigenvector_%d:eigenvector_%d" % (i, i) for i in range(3)] + \
        ["field:sample_%d:sample_%d" % (i, i) for i in range(2)]
    assert "field:eigenvector_3:eigenvector_3" not in panels
    # The prior mean is one value everywhere: said in the title.
    with h5py.File(path) as f:
        mean = f["fields/m_prior_mean/m_prior_mean"][()]
    assert mean.min() == mean.max()
    assert "constant %.6g everywhere" % mean.min() in \
        panels["field:m_prior_mean:m_prior_mean"].get_title().replace("\n", " ")
    # Γ_post = Γ_prior − V D Vᵀ with D ≥ 0: never above the prior's variance.
    assert np.all(variances["m_variance"] <= variances["m_prior_variance"])
    assert variances["m_variance"].mean() < 0.5 * variances["m_prior_variance"].mean()
    for name, data in variances.items():
        im = panels["field:%s:%s" % (name, name)].get_images()[0]
        np.testing.assert_array_equal(np.asarray(im.get_array()), data[data.shape[0] // 2])
    png = str(tmp_path / "inversion.png")
    subprocess.run([CLI, "plot", path, "-o", png, "--dpi", "40"], check=True, env=cli_env(),
                   stdout=subprocess.DEVNULL)
    img = matplotlib.image.imread(png)
    rows = -(-len(panels) // 2)
    assert img.shape[:2] == (round(plot.PANEL_INCHES[1] * rows * 40),
                             round(plot.PANEL_INCHES[0] * 2 * 40))
    rgb = img[:, :, :3]
    assert np.mean(np.any(np.abs(rgb - rgb[0, 0]) > 0.05, axis=2)) > 0.02
    plt.close(fig)


def test_pde_inversion_spectrum_counts_non_positive_values(inversion):
    fig, panels = plot.figure(inversion[2])
    ax = panels["eigenvalues"]
    with h5py.File(inversion[2]) as f:
        lam = f["arrays/eigenvalues"][()]
    positive = np.sort(lam[lam > 0])[::-1]
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), positive)
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), np.arange(1, len(positive) + 1))
    assert "1 ≤ 0 not shown" in ax.get_title()
    plt.close(fig)


@pytest.mark.parametrize("kind", ["run", "sens", "cal", "pde"])
def test_cli_writes_a_png_of_the_documented_size(files, tmp_path, kind):
    png = str(tmp_path / (kind + ".png"))
    dpi = 50
    subprocess.run([CLI, "plot", files[kind], "-o", png, "--dpi", str(dpi)], check=True,
                   env=cli_env(), stdout=subprocess.DEVNULL)
    fig, panels = plot.figure(files[kind], dpi=dpi)
    plt.close(fig)
    columns = 1 if len(panels) == 1 else 2
    rows = -(-len(panels) // columns)
    img = matplotlib.image.imread(png)
    assert img.shape[:2] == (round(plot.PANEL_INCHES[1] * rows * dpi),
                             round(plot.PANEL_INCHES[0] * columns * dpi))
    # Not blank: a good share of the pixels differ from the background.
    rgb = img[:, :, :3]
    background = rgb[0, 0]
    assert np.mean(np.any(np.abs(rgb - background) > 0.05, axis=2)) > 0.02


def test_errors_are_one_line_and_nonzero(tmp_path):
    bad = tmp_path / "not_costate.h5"
    with h5py.File(bad, "w") as f:
        f["x"] = [1.0]
    r = subprocess.run([CLI, "plot", str(bad)], env=cli_env(), capture_output=True, text=True)
    assert r.returncode == 1
    assert "not a costate output file" in r.stderr
    r = subprocess.run([CLI, "plot", str(tmp_path / "missing.h5")], env=cli_env(),
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no such file" in r.stderr


def test_cli_json_says_what_was_drawn(files, tmp_path):
    """`costate plot --json`: one JSON object on stdout naming every panel as
    costate.plot.figure draws it, with its title, axes and artists."""
    import json
    png = str(tmp_path / "sens.png")
    r = subprocess.run([CLI, "plot", files["sens"], "-o", png, "--json"], env=cli_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["status"] == "ok" and j["output"] == png and os.path.isfile(png)
    fig, panels = plot.figure(files["sens"])
    assert [p["name"] for p in j["panels"]] == list(panels)
    for p in j["panels"]:
        ax = panels[p["name"]]
        assert p["title"] == ax.get_title() and p["xlabel"] == ax.get_xlabel()
        assert p["yscale"] == ax.get_yscale()
        assert [ln["label"] for ln in p["lines"]] == [
            ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert p["bars"] == len(ax.patches)
        assert [im["shape"] for im in p["images"]] == [list(im.get_array().shape) for im in ax.get_images()]
    with h5py.File(files["sens"]) as f:
        n = len(f["sensitivity/hessian"][()])
    hessian = next(p for p in j["panels"] if p["name"] == "hessian")
    assert hessian["images"][0]["shape"] == [n, n]
    assert j["title"].startswith("sens.h5")
    plt.close(fig)
    bad = tmp_path / "not.h5"
    bad.write_text("not HDF5")
    r = subprocess.run([CLI, "plot", str(bad), "--json"], env=cli_env(), capture_output=True, text=True)
    assert r.returncode == 1
    e = json.loads(r.stdout)
    assert e["status"] == "error" and "not.h5" in e["message"]


# ---- plots a scientist reads at a glance (issue 36 item 4) and every file kind (item 3) ----

SOURCE = os.environ["COSTATE_SOURCE_DIR"]
# An equation model whose parameter e does not act (0*e): the data cannot
# determine it, so it has no standard error and no correlation.
UNIDENTIFIABLE = """
model:
  states: [x, y]
  equations: {x: "a*x - b*x*y", y: "-c*y + d*x*y + 0*e"}
parameters: {a: 1.5, b: 1.0, c: 3.0, d: 1.0, e: 1.0}
initial_state: {x: 1.0, y: 1.0}
time: {start: 0.0, end: 10.0, output_every: 0.25}
integrator: {method: rk4, dt: 0.01}
calibration:
  parameters: {a: {lower: 0.1, upper: 10}, e: {lower: 0.1, upper: 10}}
  data: {file: %s, noise: {x: 0.1, y: 0.1}}
""" % os.path.join(SOURCE, "data", "synthetic", "lotka_volterra.csv")


@pytest.fixture(scope="module")
def more_files(tmp_path_factory):
    """The other kinds costate writes: an unconverged calibration (4
    iterations), fits with one and all parameters unidentifiable, Robertson
    to 4e7, a PDE run, a stochastic fit."""
    d = tmp_path_factory.mktemp("kinds")
    out = {k: str(d / (k + ".h5")) for k in ("unconverged", "partly", "none", "robertson",
                                               "pde_run", "stochastic")}
    out["table_csv"], out["table_tsv"] = str(d / "lv.csv"), str(d / "robertson.tsv")
    costate("run", os.path.join(EXAMPLES, "lotka_volterra.yaml"), "-o", out["table_csv"])
    costate("run", os.path.join(EXAMPLES, "robertson_stiff.yaml"), "-o", out["table_tsv"])
    cal = os.path.join(EXAMPLES, "lotka_volterra_calibration.yaml")
    r = subprocess.run([CLI, "calibrate", cal, "--set", "calibration.optimizer.max_iterations=4",
                        "-o", out["unconverged"], "-q"], env=cli_env(), stdout=subprocess.DEVNULL)
    assert r.returncode == 2  # not converged: the exit status says so
    yaml = d / "unidentifiable.yaml"
    yaml.write_text(UNIDENTIFIABLE)
    costate("calibrate", str(yaml), "-o", out["partly"])
    costate("calibrate", str(yaml), "--set", "calibration.parameters={e: {lower: 0.1, upper: 10}}",
            "-o", out["none"])
    costate("run", os.path.join(EXAMPLES, "robertson_stiff.yaml"), "-o", out["robertson"])
    costate("run", os.path.join(EXAMPLES, "heat2d_kappa.yaml"), "-o", out["pde_run"])
    r = subprocess.run([CLI, "calibrate", os.path.join(EXAMPLES, "decay_conditions.yaml"),
                        "--optimizer", "adamw", "--epochs", "30", "--batch", "2",
                        "--learning-rate", "0.05", "--seed", "3", "-o", out["stochastic"], "-q"],
                       env=cli_env(), stdout=subprocess.DEVNULL)
    assert r.returncode == 2  # epochs alone, no full-batch finish: not converged, and says so
    return out


def test_history_draws_the_true_gradient_norm(files):
    """The ‖∇J‖ curve is the norm of the gradient the Python objective
    returns at the start (the optimizer's variables: log rates here), not
    TAO's residual (about 10 where ‖∇J‖ is 5e4)."""
    costate_module = pytest.importorskip("costate._costate", reason="the costate extension is not built")
    del costate_module
    import costate
    q = costate.load(os.path.join(EXAMPLES, "lotka_volterra_calibration.yaml"))
    f0, g0 = q.objective(q.fit.start)
    fig, panels = plot.figure(files["cal"])
    hist = {ln.get_label(): ln for ln in panels["history"].get_lines()}
    # Same model, data and start: the first iterate's J and ‖∇J‖ to round-off.
    kSameComputation = 1e-12
    assert hist["objective J"].get_ydata()[0] == pytest.approx(f0, rel=kSameComputation)
    assert hist["‖∇J‖ (fitted variables)"].get_ydata()[0] == pytest.approx(np.linalg.norm(g0),
                                                                         rel=kSameComputation)
    # bqnls's residual at the start is ~11 where ‖∇J‖ ~ 5e4: the two curves
    # are different quantities, which the labels now say.
    assert np.linalg.norm(g0) > 1e3 * hist["TAO residual (not ‖∇J‖)"].get_ydata()[0]
    plt.close(fig)


def test_unconverged_history_is_marked(files, more_files):
    fig, panels = plot.figure(more_files["unconverged"])
    ax = panels["history"]
    with h5py.File(more_files["unconverged"]) as f:
        fh = f["calibration/objective_history"][()]
        termination = f["calibration"].attrs["termination"]
        termination = termination.decode() if isinstance(termination, bytes) else termination
    mark = [ln for ln in ax.get_lines() if ln.get_label() == "last iterate: not converged"]
    assert len(mark) == 1
    np.testing.assert_array_equal(mark[0].get_xdata(), [len(fh) - 1])
    np.testing.assert_array_equal(mark[0].get_ydata(), [fh[-1]])
    assert "NOT CONVERGED (%s)" % termination in ax.get_title()
    assert matplotlib.colors.same_color(ax.title.get_color(), plot.NOT_CONVERGED_COLOUR)
    plt.close(fig)
    fig, panels = plot.figure(files["cal"])  # converged: no mark
    assert not any("not converged" in ln.get_label() for ln in panels["history"].get_lines())
    assert "NOT CONVERGED" not in panels["history"].get_title()
    plt.close(fig)


def integer_ticks(axis):
    ticks = axis.get_majorticklocs()
    lo, hi = axis.get_view_interval()
    shown = [t for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]
    return len(shown) >= 2 and all(float(t).is_integer() for t in shown)


def test_iteration_and_index_axes_have_integer_ticks(more_files, inversion):
    fig, panels = plot.figure(more_files["unconverged"])  # 5 iterations: 0.5 steps by default
    fig.canvas.draw()
    assert integer_ticks(panels["history"].xaxis)
    plt.close(fig)
    fig, panels = plot.figure(inversion[1])
    fig.canvas.draw()
    assert integer_ticks(panels["history"].xaxis) and integer_ticks(panels["eigenvalues"].xaxis)
    plt.close(fig)


def test_series_spanning_decades_get_log_axes(files, more_files):
    fig, panels = plot.figure(more_files["robertson"])
    ax = panels["trajectory"]
    with h5py.File(more_files["robertson"]) as f:
        y, t = f["state"][()], f["time"][()]
    # Robertson: y2 ~ 1e-10 … 3e-5 beside y1, y3 ~ 1 at geometric times 0.4 … 4e7.
    assert y.min() > 0 and y.max() / y.min() > 1e3 ** 2
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    for i, ln in enumerate(ax.get_lines()):
        np.testing.assert_array_equal(ln.get_ydata(), y[:, i])
        np.testing.assert_array_equal(ln.get_xdata(), t)
    plt.close(fig)
    fig, panels = plot.figure(files["run"])  # Lotka–Volterra: 0.2 … 7 on a uniform grid
    assert (panels["trajectory"].get_xscale(), panels["trajectory"].get_yscale()) == ("linear", "linear")
    plt.close(fig)


def test_hessian_heat_map_is_symmetric_log_and_annotated(files):
    fig, panels = plot.figure(files["sens"])
    ax = panels["hessian"]
    im = ax.get_images()[0]
    with h5py.File(files["sens"]) as f:
        H = f["sensitivity/hessian"][()]
    nonzero = np.abs(H[H != 0])
    assert nonzero.max() / nonzero.min() > 10 ** plot.DECADES_FOR_SYMLOG_COLOURS
    assert isinstance(im.norm, matplotlib.colors.SymLogNorm)
    assert im.norm.linthresh == nonzero.min()
    # Every cell of the 4 x 4 matrix carries its value to 2 significant
    # digits ("%.2g": within 5 % of it).
    kTwoDigits = 0.05
    cells = [t for t in ax.texts if t.get_gid() == "cell"]
    assert len(cells) == H.size
    for t in cells:
        j, i = (int(round(v)) for v in t.get_position())
        assert float(t.get_text()) == pytest.approx(H[i, j], rel=kTwoDigits)
    # The smallest entry's colour differs visibly from 0's (on a linear map
    # it would be ~1 % of the way to the end).
    smallest = H.flat[np.argmin(np.abs(H))]
    assert abs(float(im.norm(smallest)) - 0.5) > 0.1
    plt.close(fig)


def test_unidentifiable_parameters_are_explained_not_drawn_empty(more_files):
    fig, panels = plot.figure(more_files["partly"])
    ax = panels["correlation"]
    np.testing.assert_array_equal(np.asarray(ax.get_images()[0].get_array()), [[1.0]])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a"]
    assert "not shown: e" in ax.get_title().replace("\n", " ")
    plt.close(fig)
    fig, panels = plot.figure(more_files["none"])
    ax = panels["correlation"]
    assert ax.get_images() == []
    note = plot.describe(fig, panels)["panels"][list(panels).index("correlation")]["note"]
    assert note.startswith("No correlation: the data do not determine e")
    assert any("do not determine e" in t.get_text().replace("\n", " ") for t in ax.texts)
    plt.close(fig)


@pytest.fixture(scope="module")
def petab_single(tmp_path_factory):
    if not os.path.isfile(PETAB_CASE):
        pytest.skip("PEtab test suite not found at %s (configure with -DCOSTATE_PETAB_DIR)"
                    % PETAB_CASE)
    out = str(tmp_path_factory.mktemp("petab_single") / "fit.h5")
    costate("calibrate", PETAB_CASE, "-o", out)
    return out


def test_petab_single_start_draws_the_fit(petab_single):
    fig, panels = plot.figure(petab_single)
    assert list(panels) == ["fit"]
    with h5py.File(petab_single) as f:
        x, x0 = f["calibration/best_x"][()], f["calibration/initial"][()][0]
    bars = panels["fit"].patches
    np.testing.assert_array_equal([b.get_height() for b in bars], np.concatenate([x0, x]))
    assert [t.get_text() for t in panels["fit"].get_xticklabels()] == ["k1", "k2"]
    plt.close(fig)


KINDS = ["run", "sens", "cal", "pde", "unconverged", "partly", "none", "robertson", "pde_run",
         "stochastic", "inversion_map", "inversion_posterior", "petab_run", "petab_sensitivity",
         "petab_single", "petab_multistart", "table_csv", "table_tsv", "petab_table"]


@pytest.fixture
def any_file(request, files, more_files, inversion):
    kind = request.param
    if kind in files:
        return files[kind]
    if kind in more_files:
        return more_files[kind]
    if kind.startswith("inversion"):
        return inversion[0] if kind == "inversion_map" else inversion[1]
    if kind.startswith("petab"):
        if kind == "petab_single":
            return request.getfixturevalue("petab_single")
        if kind == "petab_multistart":
            return request.getfixturevalue("petab_file")
        run, sens = request.getfixturevalue("petab_run_files")
        if kind == "petab_table":  # the simulation table `costate run` writes beside its HDF5
            return os.path.splitext(run)[0] + ".tsv"
        return run if kind == "petab_run" else sens
    raise KeyError(kind)


@pytest.mark.parametrize("any_file", KINDS, indirect=True)
def test_every_file_kind_draws_without_overlapping_or_clipped_text(any_file, tmp_path):
    """`costate plot --json` on every file kind: what it drew (panels with
    their series, scales and point counts) is the figure's, and no text
    overlaps another text or another panel, or leaves the figure, at the
    default size."""
    import json
    png = str(tmp_path / "out.png")
    r = subprocess.run([CLI, "plot", any_file, "-o", png, "--json"], env=cli_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["overlaps"] == [] and j["clipped"] == []
    fig, panels = plot.figure(any_file)
    assert [p["name"] for p in j["panels"]] == list(panels)
    for p in j["panels"]:
        ax = panels[p["name"]]
        assert (p["xscale"], p["yscale"]) == (ax.get_xscale(), ax.get_yscale())
        drawn = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert [(s["label"], s["points"]) for s in p["lines"]] == \
            [(ln.get_label(), len(ln.get_xdata())) for ln in drawn]
        # A panel draws something or says why not.
        assert p["lines"] or p["images"] or p["bars"] or p["error_bars"] or p["note"], p["name"]
    assert j["size_inches"] == [plot.PANEL_INCHES[0] * (1 if len(panels) == 1 else 2),
                                plot.PANEL_INCHES[1] * -(-len(panels) // (1 if len(panels) == 1 else 2))]
    plt.close(fig)


def test_overlap_check_sees_a_title_running_into_the_panel_above():
    """The checker itself: a two-row figure whose lower title is pushed up
    into the upper panel is reported; the same figure laid out is not."""
    fig, axes = plt.subplots(2, 1, figsize=(6, 6))  # no layout engine to make room
    axes[0].plot([0, 1], [0, 1])
    axes[1].set_title("a title")
    assert plot.text_problems(fig) == {"overlaps": [], "clipped": []}
    axes[1].set_title("a title", y=1.6)  # axes fraction: into the panel above
    problems = plot.text_problems(fig)
    assert ["a title", "the plotting area of axes 0"] in problems["overlaps"]
    axes[1].set_title("a title", y=1.0)
    fig.suptitle("x" * 400)  # wider than the figure
    assert plot.text_problems(fig)["clipped"] == ["x" * 400]
    plt.close(fig)


def test_long_parameter_names_neither_clip_nor_overlap(petab_file, petab_run_files, tmp_path):
    """Twelve long PEtab ids (as in the benchmark models) on the waterfall's
    title and the gradient's bars, whose values span 11 decades of both
    signs: the title wraps inside the figure, the bar labels stand upright
    without touching, every bar has its own decade on the symmetric-log
    axis, whose labels are thinned to SYMLOG_LABELLED_DECADES a side."""
    ids = "".join("k_%s_phosphorylation_rate\n" % c for c in "ABCDEFGHIJKL")
    waterfall, gradient = str(tmp_path / "ms.h5"), str(tmp_path / "sens.h5")
    shutil.copy(petab_file, waterfall)
    shutil.copy(petab_run_files[1], gradient)
    g = np.array([(-1.0) ** k * 10.0 ** -k for k in range(12)])
    with h5py.File(waterfall, "r+") as f:
        f["calibration"].attrs["ids"] = ids
    with h5py.File(gradient, "r+") as f:
        del f["gradient"], f["fim"]
        f["gradient"] = g
        f["gradient"].attrs["ids"] = ids
    for path in (waterfall, gradient):
        fig, panels = plot.figure(path)
        assert plot.text_problems(fig) == {"overlaps": [], "clipped": []}, path
        plt.close(fig)
    fig, panels = plot.figure(waterfall)
    assert "k_L_phosphorylation_rate" not in panels["waterfall"].get_title()  # the first 4, then …
    assert "\n" in panels["waterfall"].get_title()
    plt.close(fig)
    fig, panels = plot.figure(gradient)
    ax = panels["gradient"]
    assert ax.get_yscale() == "symlog"
    assert ax.yaxis.get_transform().linthresh == np.abs(g).min()
    lo, hi = ax.get_ylim()
    assert lo <= g.min() and g.max() <= hi  # negative bars inside the axes too
    assert len(ax.get_yticks()) <= 2 * plot.SYMLOG_LABELLED_DECADES + 1
    np.testing.assert_array_equal([b.get_height() for b in ax.patches], g)
    assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    plt.close(fig)


def test_tables_costate_writes_are_drawn(more_files, petab_run_files, tmp_path):
    """`costate run -o T.csv | T.tsv` and a PEtab run's simulation table:
    the lines are the table's columns."""
    for path, log in ((more_files["table_csv"], False), (more_files["table_tsv"], True)):
        data = np.loadtxt(path, delimiter="," if path.endswith(".csv") else "\t", skiprows=1)
        with open(path) as fh:
            names = fh.readline().strip().replace("\t", ",").split(",")[1:]
        fig, panels = plot.figure(path)
        ax = panels["trajectory"]
        assert [ln.get_label() for ln in ax.get_lines()] == names
        for i, ln in enumerate(ax.get_lines()):
            np.testing.assert_array_equal(ln.get_xdata(), data[:, 0])
            np.testing.assert_array_equal(ln.get_ydata(), data[:, i + 1])
        assert (ax.get_yscale() == "log") == log  # Robertson's y2 ~ 1e-10
        plt.close(fig)
    table = os.path.splitext(petab_run_files[0])[0] + ".tsv"
    with h5py.File(petab_run_files[0]) as f:
        g = f["simulation"]
        t, h, cond = g["time"][()], g["simulation"][()], g["condition"][()]
    fig, panels = plot.figure(table)
    lines = panels["observable obs_a"].get_lines()
    assert [ln.get_label() for ln in lines] == ["c0 simulated", "c1 simulated"]
    for c, ln in enumerate(lines):  # the table's numbers are the HDF5 file's
        rows = np.flatnonzero(cond == c)
        rows = rows[np.argsort(t[rows], kind="stable")]
        np.testing.assert_array_equal(ln.get_xdata(), t[rows])
        np.testing.assert_allclose(ln.get_ydata(), h[rows], rtol=1e-15)
    plt.close(fig)
    bad = tmp_path / "other.csv"
    bad.write_text("a,b\n1,2\n")
    r = subprocess.run([CLI, "plot", str(bad)], env=cli_env(), capture_output=True, text=True)
    assert r.returncode == 1 and "not a table costate writes" in r.stderr and "other.csv" in r.stderr
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("t,x\n0,1\n1\n")
    r = subprocess.run([CLI, "plot", str(ragged)], env=cli_env(), capture_output=True, text=True)
    assert r.returncode == 1 and "line 3 has 1 columns, the header 2" in r.stderr
    ragged.write_text("t,x\n# a comment\n0,1\n1\n")  # '#' lines count in the line number
    r = subprocess.run([CLI, "plot", str(ragged)], env=cli_env(), capture_output=True, text=True)
    assert r.returncode == 1 and "line 4 has 1 columns, the header 2" in r.stderr


def test_tables_carry_provenance_and_read_everywhere(tmp_path):
    """A table costate writes (issue 36, deliver 3): the header, then
    '# costate <version>' (as `costate --version`), '# command: run' (the
    HDF5 attribute 'command') and '# settings: ' — the HDF5 file's /settings
    on one line (YAML flow), noise model included — then the rows. numpy's
    loadtxt(skiprows=1) and genfromtxt(names=True) read it as before, and
    `costate plot` draws it."""
    import yaml
    example = os.path.join(EXAMPLES, "lotka_volterra_equations.yaml")  # data with noise x 0.1, y 0.2
    h5, csv, tsv = (str(tmp_path / ("lv." + e)) for e in ("h5", "csv", "tsv"))
    for out in (h5, csv, tsv):
        costate("run", example, "-o", out)
    version = subprocess.run([CLI, "--version"], env=cli_env(), capture_output=True, text=True,
                             check=True).stdout.strip()
    with h5py.File(h5) as f:
        settings = yaml.safe_load(f["settings"][()].decode())
        t, y = f["time"][()], f["state"][()]
        assert f.attrs["command"] in ("run", b"run")
    assert settings["objective"]["data"]["noise"] == {"x": 0.1, "y": 0.2}
    for path, sep in ((csv, ","), (tsv, "\t")):
        with open(path) as fh:
            lines = fh.read().splitlines()
        assert lines[0] == sep.join(["t", "x", "y"])
        assert lines[1] == "# " + version and version.startswith("costate ")
        assert lines[2] == "# command: run"
        assert lines[3].startswith("# settings: {")
        mine = yaml.safe_load(lines[3][len("# settings: "):])
        # The same settings as /settings, but for the output file's name.
        assert mine.pop("output") == {"file": path} and settings["output"] == {"file": h5}
        assert mine == {k: v for k, v in settings.items() if k != "output"}
        assert mine["integrator"]["method"] == "rk4"
        assert mine["objective"]["data"]["noise"] == {"x": 0.1, "y": 0.2}
        assert not any(ln.startswith("#") for ln in lines[4:])
        # numpy, by the calls a header-then-rows table always took: the same
        # doubles as the HDF5 file (17 significant digits round-trip).
        data = np.loadtxt(path, delimiter=sep, skiprows=1)
        np.testing.assert_array_equal(data[:, 0], t)
        np.testing.assert_array_equal(data[:, 1:], y)
        named = np.genfromtxt(path, delimiter=sep, names=True)
        assert named.dtype.names == ("t", "x", "y")
        np.testing.assert_array_equal(named["y"], y[:, 1])
        # costate plot draws it: its lines are the table's columns.
        fig, panels = plot.figure(path)
        lines_drawn = panels["trajectory"].get_lines()
        assert [ln.get_label() for ln in lines_drawn] == ["x", "y"]
        for i, ln in enumerate(lines_drawn):
            np.testing.assert_array_equal(ln.get_xdata(), t)
            np.testing.assert_array_equal(ln.get_ydata(), y[:, i])
        plt.close(fig)
        png = str(tmp_path / "table.png")
        subprocess.run([CLI, "plot", path, "-o", png, "--dpi", "40"], check=True, env=cli_env(),
                       stdout=subprocess.DEVNULL)
        assert os.path.getsize(png) > 0


# ---- files with conditions (issue 33): every condition's trajectory ----

def test_calibration_with_conditions_draws_every_condition(tmp_path):
    """`costate calibrate` of a file with conditions writes each
    condition's trajectory at the fitted values (/conditions/<c>); the plot
    draws a panel per condition with that condition's observations only, and
    the trajectory passes through the fit's predicted values (the same
    model, fitted values and fixed rk4 steps: equal to round-off)."""
    out = str(tmp_path / "cal.h5")
    costate("calibrate", os.path.join(EXAMPLES, "decay_conditions.yaml"), "-o", out)
    fig, panels = plot.figure(out)
    with h5py.File(out) as f:
        ids = strings(f["conditions/ids"][()])
        names = strings(f["state_names"][()])
        c = f["calibration"]
        rc = np.array(strings(c["residual_conditions"][()]))
        rs = np.array(strings(c["residual_states"][()]))
        rt, obs, pred = c["residual_times"][()], c["observed"][()], c["predicted"][()]
        assert ids == ["dose1", "dose2", "dose4", "dose8", "inhibited"]
        assert set(panels) == {"trajectory:" + i for i in ids} | {"residuals", "history", "correlation"}
        kRoundOff = 1e-12  # the same integration twice (rk4, fixed dt)
        for k, cid in enumerate(ids):
            g = f["conditions/%d" % k]
            assert strings([g.attrs["id"]]) == [cid]
            t, y = g["time"][()], g["state"][()]
            lines = {ln.get_label(): ln for ln in panels["trajectory:" + cid].get_lines()}
            for i, name in enumerate(names):
                np.testing.assert_array_equal(lines[name].get_ydata(), y[:, i])
                sel = (rc == cid) & (rs == name)
                assert sel.sum() == 20  # this condition's values of this state, no other's
                np.testing.assert_array_equal(lines[name + " observed"].get_xdata(), rt[sel])
                np.testing.assert_array_equal(lines[name + " observed"].get_ydata(), obs[sel])
                at = np.searchsorted(t, rt[sel])
                np.testing.assert_array_equal(t[at], rt[sel])
                np.testing.assert_allclose(y[at, i], pred[sel], rtol=kRoundOff, atol=kRoundOff)
        # The inhibited condition runs with k = k_i: its own parameters.
        fitted = dict(zip(strings(c["names"][()]), c["values"][()]))
        assert f["conditions/4/parameters"][0] == fitted["k_i"]
        assert f["conditions/0/parameters"][0] == fitted["k"]
    plt.close(fig)


def test_many_conditions_are_overlaid_in_one_panel(tmp_path):
    """Beyond MAX_CONDITION_PANELS conditions one panel overlays them: a
    line per condition and state, in the state's colour, labelled once."""
    data = os.path.join(EXAMPLES, "decay_conditions")
    rows = "".join("  - {id: c%d, parameters: {dose: %d}, data: {file: %s/dose1.csv, noise: 0.02}}\n"
                   % (c, c + 1, data) for c in range(plot.MAX_CONDITION_PANELS + 1))
    yaml = tmp_path / "many.yaml"
    yaml.write_text("model: {states: [x, y], equations: {x: \"-k*x\", y: \"k*x - m*y\"}}\n"
                    "parameters: {k: 0.5, m: 0.2, dose: 1.0}\ninitial_state: {x: dose, y: 0.0}\n"
                    "time: {start: 0.0, end: 10.0, output_every: 0.5}\n"
                    "integrator: {method: rk4, dt: 0.01}\nconditions:\n" + rows)
    out = str(tmp_path / "many.h5")
    costate("run", str(yaml), "-o", out)
    fig, panels = plot.figure(out)
    assert list(panels) == ["conditions"]
    lines = panels["conditions"].get_lines()
    n = plot.MAX_CONDITION_PANELS + 1
    assert len(lines) == 2 * n
    assert [ln.get_label() for ln in lines if not ln.get_label().startswith("_")] == ["x", "y"]
    with h5py.File(out) as f:
        for c in range(n):
            np.testing.assert_array_equal(lines[c].get_ydata(), f["conditions/%d/state" % c][()][:, 0])
            np.testing.assert_array_equal(lines[n + c].get_ydata(), f["conditions/%d/state" % c][()][:, 1])
    plt.close(fig)
    r = subprocess.run([CLI, "plot", out, "-o", str(tmp_path / "many.png"), "--json"], env=cli_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import json
    j = json.loads(r.stdout)
    assert j["overlaps"] == [] and j["clipped"] == []
