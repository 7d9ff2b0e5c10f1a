"""Pictures of costate's HDF5 output files (matplotlib, headless).

    python3 -m costate.plot OUT.h5 [-o FILE.png] [--dpi N]
    costate plot OUT.h5 [-o FILE.png]

draws what the file holds, one panel per kind, in one figure:

  ODE files (``costate run | sensitivity | calibrate``)
    trajectory    /time, /state: one line per state (names from
                  /state_names); a calibration's observed values
                  (/calibration/observed at residual_times) as markers
    residuals     /calibration/residuals (weighted, sqrt(w)·(y − d)) per
                  state against time
    history       /calibration/objective_history and gradient_norm_history
                  per iteration (log scale)
    gradient      /sensitivity/gradient (and gradient_initial_state) as bars
    hessian       /sensitivity/hessian as a heat map with a colour bar
    correlation   /calibration/correlation as a heat map in [-1, 1]

  PDE field files (root attribute format = "costate-fields-1")
    frame:<c>     the first and the last frame of each state component
    field:<name>  each static field (κ, dJ/dκ, dJ/du0, and an inversion's
                  m_map, m_variance, m_prior_variance, …), then a Laplace
                  posterior's first 3 eigenvector_i and first 2 sample_i
    as images with colour bars (2-D, and the middle z-slice of 3-D) or as
    lines over x (1-D), axes in the grid's coordinates; and for a PDE
    inversion (``costate calibrate`` of a pde: input, /arrays/…)
    history       /arrays/history_objective, history_misfit and
                  history_gradient_norm per iteration (log scale)
    eigenvalues   /arrays/eigenvalues: the spectrum, largest first, on a log
                  scale (values <= 0 cannot be drawn there: counted in the title)

  PEtab multistart files (``costate calibrate problem.yaml --starts N -o``)
    waterfall     /calibration/waterfall: the final objective −(llh + log
                  prior) of every start, sorted, best first (failed starts,
                  +inf, are counted in the title)

``figure(path)`` returns the figure and a dict panel name -> Axes, for
scripts and tests; ``main(argv)`` is the command line. Needs matplotlib and
h5py (Debian: python3-matplotlib, python3-h5py); exits with status 3 and a
message naming the missing package otherwise.
"""

import argparse
import json
import math
import os
import sys

MISSING_PACKAGE_EXIT = 3
PANEL_INCHES = (6.0, 4.0)  # width, height of one panel
# PEtab multistart: starts within this of the best objective reached it
# (petab::CalibrationOptions::best_tolerance's default).
BEST_TOLERANCE = 1e-3


def _require():
    """Imports matplotlib (Agg) and h5py, or exits naming the package."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except ImportError as e:
        sys.stderr.write("costate plot: matplotlib is missing (%s); install it: "
                         "apt-get install python3-matplotlib\n" % e)
        sys.exit(MISSING_PACKAGE_EXIT)
    try:
        import h5py  # noqa: F401
    except ImportError as e:
        sys.stderr.write("costate plot: h5py is missing (%s); install it: "
                         "apt-get install python3-h5py\n" % e)
        sys.exit(MISSING_PACKAGE_EXIT)


def _strings(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def _attr(obj, name, default=None):
    if name not in obj.attrs:
        return default
    v = obj.attrs[name]
    return v.decode() if isinstance(v, bytes) else v


class _Panel:
    """A panel to draw: a name and a function drawing it on an Axes."""

    def __init__(self, name, draw):
        self.name = name
        self.draw = draw


# ---- ODE files ---------------------------------------------------------------

def _ode_panels(f):
    import numpy as np
    panels = []
    names = _strings(f["state_names"][()])
    t = f["time"][()]
    y = f["state"][()]
    cal = f["calibration"] if "calibration" in f else None

    def trajectory(ax):
        colours = {}
        for i, name in enumerate(names):
            (line,) = ax.plot(t, y[:, i], label=name)
            colours[name] = line.get_color()
        if cal is not None and len(cal["residual_times"]) > 0:
            st = np.array(_strings(cal["residual_states"][()]))
            rt, obs = cal["residual_times"][()], cal["observed"][()]
            for name in names:
                sel = st == name
                if sel.any():
                    ax.plot(rt[sel], obs[sel], "o", ms=3, color=colours[name],
                            label=name + " observed")
        ax.set_xlabel("t")
        ax.set_ylabel("state")
        title = "trajectory (%s)" % _attr(f, "model", "")
        if cal is not None:
            title += " at the fitted values"
        ax.set_title(title)
        ax.legend(fontsize="small")

    panels.append(_Panel("trajectory", trajectory))

    if cal is not None and len(cal["residuals"]) > 0:
        def residuals(ax):
            st = np.array(_strings(cal["residual_states"][()]))
            rt, r = cal["residual_times"][()], cal["residuals"][()]
            for name in names:
                sel = st == name
                if sel.any():
                    ax.plot(rt[sel], r[sel], "o", ms=3, label=name)
            ax.axhline(0.0, color="black", lw=0.8)
            ax.set_xlabel("t")
            ax.set_ylabel("weighted residual  sqrt(w)·(y − d)")
            ax.set_title("residuals (RSS %.6g over %d values)"
                         % (_attr(cal, "rss", float("nan")), len(r)))
            ax.legend(fontsize="small")

        panels.append(_Panel("residuals", residuals))

    if cal is not None and len(cal["objective_history"]) > 0:
        def history(ax):
            fh = cal["objective_history"][()]
            gh = cal["gradient_norm_history"][()]
            it = np.arange(len(fh))
            ax.semilogy(it, fh, "o-", ms=3, label="objective J")
            ax.semilogy(it, gh, "s-", ms=3, label="|gradient|")
            ax.set_xlabel("iteration")
            ax.set_ylabel("J, |gradient|")
            ax.set_title("%s: %s" % (_attr(cal, "optimizer", "optimizer"),
                                     _attr(cal, "termination", "")))
            ax.legend(fontsize="small")

        panels.append(_Panel("history", history))

    if "sensitivity" in f:
        s = f["sensitivity"]

        def gradient(ax):
            labels = _strings(s["gradient"].attrs.get("names", []))
            values = list(s["gradient"][()])
            if "gradient_initial_state" in s:
                labels += [n + "(t0)" for n in _strings(s["gradient_initial_state"].attrs["names"])]
                values += list(s["gradient_initial_state"][()])
            x = np.arange(len(values))
            ax.bar(x, values, color=["C0" if "(t0)" not in n else "C1" for n in labels])
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=45 if len(labels) > 6 else 0)
            ax.axhline(0.0, color="black", lw=0.8)
            ax.set_xlabel("parameter / initial state")
            ax.set_ylabel("dJ/dp")
            method = str(_attr(s, "method", "")).split("(")[0]  # "discrete_adjoint(binomial(…))"
            ax.set_title("gradient of J = %.8g (%s)" % (_attr(s, "objective", float("nan")), method))

        panels.append(_Panel("gradient", gradient))
        if "hessian" in s:
            panels.append(_Panel("hessian", lambda ax: _matrix(
                ax, s["hessian"][()], _strings(s["hessian"].attrs["names"]),
                "Hessian d²J/dp²", symmetric=True)))

    if cal is not None and len(cal["correlation"]) > 0 and cal["correlation"].shape[0] > 0:
        panels.append(_Panel("correlation", lambda ax: _matrix(
            ax, cal["correlation"][()], _strings(cal["names"][()]),
            "correlation of the fitted quantities", limits=(-1.0, 1.0))))
    return panels


def _matrix(ax, m, labels, title, symmetric=False, limits=None):
    import numpy as np
    if limits is None:
        scale = float(np.nanmax(np.abs(m))) if m.size else 1.0
        scale = scale if scale > 0 else 1.0
        limits = (-scale, scale) if symmetric or np.nanmin(m) < 0 else (0.0, scale)
    im = ax.imshow(m, cmap="RdBu_r", vmin=limits[0], vmax=limits[1])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45 if len(labels) > 4 else 0)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_xlabel("parameter")
    ax.set_ylabel("parameter")
    ax.set_title(title)
    ax.figure.colorbar(im, ax=ax)


# ---- PDE field files ----------------------------------------------------------

def _pde_panels(f):
    import numpy as np
    dim = int(_attr(f, "dim", 1))
    cells = [int(c) for c in np.atleast_1d(_attr(f, "cells", [1, 1, 1]))]
    origin = [float(c) for c in np.atleast_1d(_attr(f, "origin", [0.0, 0.0, 0.0]))]
    spacing = [float(c) for c in np.atleast_1d(_attr(f, "spacing", [1.0, 1.0, 1.0]))]
    axis = ["x", "y", "z"]

    def draw(ax, data, title, label):
        # data is (n_z, n_y, n_x)
        if dim == 1:
            x = origin[0] + spacing[0] * (np.arange(cells[0]) + 0.5)
            ax.plot(x, data[0, 0, :])
            ax.set_xlabel(axis[0])
            ax.set_ylabel(label)
        else:
            plane = data[data.shape[0] // 2, :, :]
            extent = [origin[0], origin[0] + spacing[0] * cells[0],
                      origin[1], origin[1] + spacing[1] * cells[1]]
            im = ax.imshow(plane, origin="lower", extent=extent, aspect="equal", cmap="viridis")
            ax.set_xlabel(axis[0])
            ax.set_ylabel(axis[1])
            cb = ax.figure.colorbar(im, ax=ax)
            cb.set_label(label)
            if dim == 3:
                title += " (z-slice %d of %d)" % (data.shape[0] // 2, data.shape[0])
        ax.set_title(title)

    panels = []
    arrays = f["arrays"] if "arrays" in f else {}
    if "history_objective" in arrays:
        def history(ax):
            it = (arrays["history_iteration"][()] if "history_iteration" in arrays
                  else np.arange(len(arrays["history_objective"])))
            for key, label, style in (("history_objective", "objective", "o-"),
                                      ("history_misfit", "misfit", "^-"),
                                      ("history_gradient_norm", "|gradient|", "s-")):
                if key in arrays:
                    ax.semilogy(it, arrays[key][()], style, ms=3, label=label)
            ax.set_xlabel("iteration")
            ax.set_ylabel("objective, misfit, |gradient|")
            ax.set_title("inversion history")
            ax.legend(fontsize="small")

        panels.append(_Panel("history", history))
    if "eigenvalues" in arrays:
        def eigenvalues(ax):
            lam = np.asarray(arrays["eigenvalues"][()], dtype=float)
            order = np.argsort(-lam, kind="stable")
            lam = lam[order]
            k = np.arange(1, len(lam) + 1)
            shown = lam > 0
            ax.semilogy(k[shown], lam[shown], "o-", ms=3, label="eigenvalue")
            ax.axhline(1.0, color="black", lw=0.8, ls="--", label="1 (data = prior)")
            ax.set_xlabel("index k (largest first)")
            ax.set_ylabel("eigenvalue λ_k")
            title = "eigenvalue spectrum (%d)" % len(lam)
            if (~shown).any():
                title += ", %d ≤ 0 not shown" % int((~shown).sum())
            ax.set_title(title)
            ax.legend(fontsize="small")

        panels.append(_Panel("eigenvalues", eigenvalues))
    if "frames" in f:
        frames = sorted(f["frames"].keys())
        shown = [frames[0]] + ([frames[-1]] if len(frames) > 1 else [])
        for key in shown:
            g = f["frames"][key]
            for comp in g.keys():
                panels.append(_Panel(
                    "frame:%s:%s" % (comp, key),
                    lambda ax, g=g, comp=comp: draw(
                        ax, g[comp][()], "%s at t = %.6g" % (comp, float(_attr(g, "time", 0.0))),
                        comp)))
    if "fields" in f:
        for name in _field_order(f["fields"].keys()):
            for comp in f["fields"][name].keys():
                label = comp if comp == name else "%s %s" % (name, comp)
                panels.append(_Panel(
                    "field:%s:%s" % (name, comp),
                    lambda ax, d=f["fields"][name][comp], label=label: draw(
                        ax, d[()], label, label)))
    return panels


# A Laplace posterior writes one eigenvector_i and sample_i per mode and
# sample: the figure shows the first few, after the fields proper.
SHOWN_EIGENVECTORS = 3
SHOWN_SAMPLES = 2


def _field_order(names):
    """Fields in file order, then the first SHOWN_EIGENVECTORS eigenvector_i
    and SHOWN_SAMPLES sample_i by index (the rest are in the file only)."""
    import re
    plain, series = [], {"eigenvector": [], "sample": []}
    for n in names:
        m = re.fullmatch(r"(eigenvector|sample)_(\d+)", n)
        if m:
            series[m.group(1)].append((int(m.group(2)), n))
        else:
            plain.append(n)
    shown = {"eigenvector": SHOWN_EIGENVECTORS, "sample": SHOWN_SAMPLES}
    return plain + [n for kind in ("eigenvector", "sample")
                    for _, n in sorted(series[kind])[:shown[kind]]]


# ---- PEtab multistart files -----------------------------------------------------

def _petab_panels(f):
    import numpy as np
    c = f["calibration"]
    ids = [s for s in str(_attr(c, "ids", "")).split("\n") if s]

    def waterfall(ax):
        w = np.asarray(c["waterfall"][()], dtype=float)
        finite = np.isfinite(w)
        k = np.arange(1, len(w) + 1)
        ax.plot(k[finite], w[finite], "o-", ms=4, label="start")
        best = w[finite].min() if finite.any() else float("nan")
        ax.axhline(best, color="black", lw=0.8, ls="--", label="best %.8g" % best)
        # Starts that all reach the best (within PEtab's 1e-3, the CLI's
        # best_tolerance) would otherwise be drawn on a 1e-11 axis offset.
        ax.ticklabel_format(axis="y", useOffset=False)
        if finite.any() and w[finite].max() - best < BEST_TOLERANCE:
            ax.set_ylim(best - BEST_TOLERANCE, best + 2 * BEST_TOLERANCE)
        ax.set_xlabel("start, sorted by final objective")
        ax.set_ylabel("final objective  −(llh + log prior)")
        title = "waterfall: %d starts, %d parameters (%s)" % (
            len(w), len(ids), ", ".join(ids[:4]) + (", …" if len(ids) > 4 else ""))
        if (~finite).any():
            title += ", %d failed" % int((~finite).sum())
        ax.set_title(title)
        ax.legend(fontsize="small")

    return [_Panel("waterfall", waterfall)]


# ---- stochastic fits (/stochastic: costate calibrate --optimizer adamw …) --------

def _stochastic_panels(f):
    """The training curves of a mini-batch fit: the training loss per epoch
    with its standard error over the epoch's batches, the validation loss
    (and the epoch whose parameters were kept), the learning rate, and the
    fitted parameters against their starting values."""
    import numpy as np
    g = f["stochastic"]
    ids = [s for s in str(_attr(g, "ids", "")).split("\n") if s]
    method = str(_attr(g, "method", "?"))
    termination = str(_attr(g, "termination", "?"))
    train = np.asarray(g["train_loss"][()], dtype=float)
    stderr = np.asarray(g["train_loss_stderr"][()], dtype=float)
    valid = np.asarray(g["validation_loss"][()], dtype=float)
    epochs = np.arange(1, len(train) + 1)
    sims = np.asarray(g["epoch_simulations"][()], dtype=float)

    def curves(ax):
        ax.errorbar(epochs, train, yerr=stderr, fmt="o-", ms=3, capsize=2,
                    label="training loss (± standard error over batches)")
        if np.isfinite(valid).any():
            ax.plot(epochs, valid, "s-", ms=3, label="validation loss")
            best = int(np.nanargmin(np.where(np.isfinite(valid), valid, np.nan)))
            ax.axvline(epochs[best], color="black", lw=0.8, ls="--",
                       label="kept: epoch %d" % epochs[best])
        ax.set_xlabel("epoch")
        ax.set_ylabel("mean loss per condition")
        ax.xaxis.get_major_locator().set_params(integer=True)
        finite = np.concatenate([train[np.isfinite(train)], valid[np.isfinite(valid)]])
        if finite.size and finite.min() > 0 and finite.max() / finite.min() > 100:
            ax.set_yscale("log")
        ax.set_title("%s: %d epochs, %d simulations (%s)" % (
            method, len(train), int(sims[-1]) if len(sims) else 0, termination))
        ax.legend(fontsize="small")

    def rate(ax):
        lr = np.asarray(g["learning_rate"][()], dtype=float)
        ax.plot(epochs, lr, "o-", ms=3)
        ax.ticklabel_format(axis="y", useOffset=False)
        if len(lr) and lr.max() == lr.min():  # constant: no axis magnified around it
            ax.set_ylim(0.0, 1.25 * lr.max())
        ax.set_xlabel("epoch")
        ax.set_ylabel("learning rate (the epoch's last step)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title("learning-rate schedule")

    def parameters(ax):
        change = np.asarray(g["x"][()], dtype=float) - np.asarray(g["initial"][()], dtype=float)
        k = np.arange(len(change))
        ax.bar(k, change)
        ax.axhline(0.0, color="black", lw=0.6)
        ax.set_xticks(k)
        ax.set_xticklabels(ids, rotation=60 if len(ids) > 4 else 0, ha="right" if len(ids) > 4 else "center",
                           fontsize="small")
        ax.set_ylabel("fitted − start (on its scale)")
        ax.set_title("what the fit moved")

    return [_Panel("training", curves), _Panel("learning rate", rate), _Panel("parameters", parameters)]

# ---- PEtab run and sensitivity files (/simulation, /gradient, /fim) ------------

SHOWN_OBSERVABLES = 6  # panels of observables drawn (the rest are in the file)


def _petab_simulation_panels(f):
    """`costate run problem.yaml` (and `sensitivity -o`): per observable, the
    measurements (σ as error bars) and the simulation against time, one
    colour per condition; then the gradient and the Fisher information when
    the file has them."""
    import numpy as np
    panels = []
    if "simulation" in f:
        g = f["simulation"]
        obs_ids = [s for s in str(_attr(g, "observable_ids", "")).split("\n") if s]
        cond_ids = [s for s in str(_attr(g, "condition_ids", "")).split("\n") if s]
        t = g["time"][()]
        m = g["measurement"][()]
        h = g["simulation"][()]
        sigma = g["sigma"][()]
        obs = g["observable"][()].astype(int)
        cond = g["condition"][()].astype(int)

        def observable_panel(k):
            def draw(ax):
                colours = matplotlib_colours()
                for c in sorted(set(cond[obs == k].tolist())):
                    rows = np.flatnonzero((obs == k) & (cond == c))
                    rows = rows[np.argsort(t[rows], kind="stable")]
                    name = cond_ids[c] if 0 <= c < len(cond_ids) else "condition %d" % c
                    colour = colours[c % len(colours)]
                    ax.errorbar(t[rows], m[rows], yerr=sigma[rows], fmt="o", ms=4, color=colour,
                                label="%s measured (±σ)" % name)
                    ax.plot(t[rows], h[rows], "-", color=colour, label="%s simulated (at the measured times)" % name)
                ax.set_xlabel("time")
                ax.set_ylabel(obs_ids[k] if 0 <= k < len(obs_ids) else "observable %d" % k)
                ax.set_title("observable %s" % (obs_ids[k] if 0 <= k < len(obs_ids) else k))
                ax.legend(fontsize="small")
            return draw

        for k in sorted(set(obs.tolist()))[:SHOWN_OBSERVABLES]:
            name = obs_ids[k] if 0 <= k < len(obs_ids) else str(k)
            panels.append(_Panel("observable " + name, observable_panel(k)))
    if "gradient" in f:
        ids = [s for s in str(_attr(f["gradient"], "ids", "")).split("\n") if s]

        def gradient(ax):
            v = f["gradient"][()]
            ax.bar(range(len(v)), v)
            ax.set_xticks(range(len(v)))
            ax.set_xticklabels(ids, rotation=45 if len(ids) > 4 else 0, ha="right" if len(ids) > 4 else "center")
            ax.set_ylabel("d llh / d θ (on its scale)")
            ax.set_title("gradient of llh")
            ax.axhline(0.0, color="black", lw=0.6)
        panels.append(_Panel("gradient", gradient))
    if "fim" in f:
        ids = [s for s in str(_attr(f["fim"], "ids", "")).split("\n") if s]
        panels.append(_Panel("fisher information", lambda ax: _matrix(
            ax, f["fim"][()], ids, "Fisher information", symmetric=True)))
    return panels


def matplotlib_colours():
    import matplotlib.pyplot as plt
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


# ---- the figure ----------------------------------------------------------------

def figure(path, dpi=100):
    """The figure of `path` and a dict panel name -> Axes. Raises ValueError
    for a file that is not costate output or holds nothing to draw."""
    _require()
    import h5py
    import matplotlib.pyplot as plt
    with h5py.File(path, "r") as f:
        if _attr(f, "format") == "costate-fields-1":
            panels = _pde_panels(f)
        elif "time" in f and "state" in f and "state_names" in f:
            panels = _ode_panels(f)
        elif "calibration" in f and "waterfall" in f["calibration"]:
            panels = _petab_panels(f)
        elif "stochastic" in f and "train_loss" in f["stochastic"]:
            panels = _stochastic_panels(f)
        elif "simulation" in f or ("llh" in f and "gradient" in f):
            panels = _petab_simulation_panels(f)
        else:
            raise ValueError("%s: not a costate output file (neither /time, /state, "
                             "/state_names, /calibration/waterfall, /stochastic, /simulation nor format = "
                             "costate-fields-1)" % path)
        if not panels:
            raise ValueError("%s: nothing to draw (no frames, fields or trajectories)" % path)
        columns = 1 if len(panels) == 1 else 2
        rows = math.ceil(len(panels) / columns)
        fig, axes = plt.subplots(rows, columns, squeeze=False, dpi=dpi,
                                 figsize=(PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows))
        out = {}
        for k, panel in enumerate(panels):
            ax = axes[k // columns][k % columns]
            panel.draw(ax)
            out[panel.name] = ax
        for k in range(len(panels), rows * columns):
            axes[k // columns][k % columns].set_visible(False)
        status = _attr(f, "status", "")
        fig.suptitle("%s  (%s%s)" % (os.path.basename(path),
                                     _attr(f, "command", "fields" if "format" in f.attrs
                                           else "stochastic fit" if "stochastic" in f
                                           else "PEtab calibration" if "calibration" in f
                                           else "PEtab " + os.path.basename(str(_attr(f, "problem", "problem")))),
                                     "" if status in ("complete", "") else ", status " + str(status)))
        fig.tight_layout()
    return fig, out


def describe(fig, panels):
    """What a figure drew, as plain data (`costate plot --json`): per panel
    its title, axis labels and scales, the lines (label, points), images
    (shape, colour limits) and bars, in the order drawn."""
    out = []
    for name, ax in panels.items():
        lines = [{"label": ln.get_label(), "points": len(ln.get_xdata())}
                 for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        images = [{"shape": list(im.get_array().shape), "limits": [float(v) for v in im.get_clim()]}
                  for im in ax.get_images()]
        legend = ax.get_legend()
        out.append({"name": name, "title": ax.get_title(), "xlabel": ax.get_xlabel(),
                    "ylabel": ax.get_ylabel(), "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
                    "lines": lines, "images": images, "bars": len(ax.patches),
                    "error_bars": len(ax.containers) - sum(1 for c in ax.containers
                                                           if type(c).__name__ == "BarContainer"),
                    "legend": [t.get_text() for t in legend.get_texts()] if legend else []})
    w, h = fig.get_size_inches()
    sup = getattr(fig, "_suptitle", None)  # Figure.get_suptitle() is matplotlib ≥ 3.8
    title = sup.get_text() if sup is not None else ""
    return {"title": title, "size_inches": [float(w), float(h)], "dpi": float(fig.dpi), "panels": out}


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="costate plot", description="draw what a costate HDF5 output file holds")
    parser.add_argument("file", help="HDF5 output of costate run/sensitivity/calibrate (ODE, PEtab "
                        "multistart, PDE inversion) or a PDE run")
    parser.add_argument("-o", "--output", help="image file (default: FILE with extension .png)")
    parser.add_argument("--dpi", type=int, default=100, help="resolution (default 100)")
    parser.add_argument("--json", action="store_true",
                        help="print what was drawn (panels, titles, axes, lines, images) as one "
                             "JSON object on stdout")
    args = parser.parse_args(argv)

    def fail(message):
        sys.stderr.write("costate plot: %s\n" % message)
        if args.json:
            print(json.dumps({"status": "error", "message": message}))
        return 1

    if not os.path.isfile(args.file):
        return fail("%s: no such file" % args.file)
    out = args.output or os.path.splitext(args.file)[0] + ".png"
    try:
        fig, panels = figure(args.file, dpi=args.dpi)
    except (ValueError, OSError, KeyError) as e:
        # h5py's "Unable to open file (file signature not found)" names no file.
        return fail(str(e) if args.file in str(e) else "%s: %s" % (args.file, e))
    fig.savefig(out)
    if args.json:
        print(json.dumps(dict({"status": "ok", "file": args.file, "output": out},
                              **describe(fig, panels))))
    else:
        print("wrote %s (%s)" % (out, ", ".join(panels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
