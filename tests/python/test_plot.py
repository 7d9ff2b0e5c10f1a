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
    np.testing.assert_array_equal(hist["|gradient|"].get_ydata(), gh)
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
                           ("|gradient|", "history_gradient_norm")):
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
