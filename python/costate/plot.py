"""Pictures of costate's HDF5 output files (matplotlib, headless).

    python3 -m costate.plot OUT.h5 [-o FILE.png] [--dpi N]
    costate plot OUT.h5 [-o FILE.png]

draws what the file holds, one panel per kind, in one figure:

  ODE files (``costate run | sensitivity | calibrate``)
    trajectory    /time, /state: one line per state (names from
                  /state_names); a calibration's observed values
                  (/calibration/observed at residual_times) as markers
    trajectory:<id>  a file with conditions (/conditions: ``run``,
                  ``sensitivity``, ``calibrate`` of a file with a
                  conditions: section): one panel per condition, its
                  trajectory and (calibrate) its observed values
                  (/calibration/residual_conditions == id); more than
                  MAX_CONDITION_PANELS conditions: one panel "conditions",
                  every condition's states in their state's colour
    residuals     /calibration/residuals (weighted, sqrt(w)·(y − d)) per
                  state against time
    history       /calibration/objective_history and
                  objective_gradient_norm_history (‖∇J‖) per iteration (log
                  scale); TAO's residual (gradient_norm_history) only as a
                  curve labelled so; a fit that did not converge is marked
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

  Tables (``costate run FILE.yaml -o T.csv | T.tsv``; the PEtab simulation
  table ``costate run problem.yaml`` writes beside its HDF5)
    trajectory    columns t, then one per state: as the ODE trajectory
    observable    observableId, simulationConditionId, time, simulation:
                  one panel per observable, a line per condition

  PEtab multistart files (``costate calibrate problem.yaml --starts N -o``)
    waterfall     /calibration/waterfall: the final objective −(llh + log
                  prior) of every start, sorted, best first (failed starts,
                  +inf, are counted in the title)

Rules every panel follows (what a scientist reads at a glance): titles
wrapped to their panel (no text overlaps another or leaves the figure:
``text_problems(fig)`` checks with the renderer's bounding boxes);
integer ticks on integer axes (iteration, epoch, index, start); a log axis
when a positive series spans more than DECADES_FOR_LOG decades (symlog for
bars of both signs); heat maps on a symmetric-log colour scale when their
entries span more than DECADES_FOR_SYMLOG_COLOURS decades, with the values
written in the cells up to ANNOTATE_MAX × ANNOTATE_MAX; every history of a
fit that did not converge marked (a red cross at its last iterate, the
reason in the title, red); and a sentence saying why instead of an empty
panel (a correlation of unidentifiable parameters, a spectrum with no
positive eigenvalue, starts that all failed).

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
# A positive series whose largest value exceeds its smallest by more than
# 10^DECADES_FOR_LOG is drawn on a log axis (Robertson: 1e-10 … 1); a
# linear axis would show all but its largest values as zero.
DECADES_FOR_LOG = 3
# A heat map whose nonzero |entries| span more than 10^2 gets a
# symmetric-log colour scale: on a linear one, everything but the largest
# cell looks like 0.
DECADES_FOR_SYMLOG_COLOURS = 2
# A symmetric-log scale (axis or colours) labels at most this many decades
# on each side of 0 (every k-th decade when it spans more): one label per
# decade would not fit a panel's height.
SYMLOG_LABELLED_DECADES = 4
# Heat maps up to this size have their values written in the cells.
ANNOTATE_MAX = 8
# A file with conditions gets a trajectory panel per condition up to this
# many; beyond, one panel overlays them all (a figure of hundreds of
# panels shows nothing).
MAX_CONDITION_PANELS = 6
NOT_CONVERGED_COLOUR = "red"


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

    def observed_of(condition=None):
        """(states, times, values) of the calibration's observations (of
        one condition's when given), or None."""
        if cal is None or len(cal["residual_times"]) == 0:
            return None
        sel = slice(None)
        if condition is not None:
            if "residual_conditions" not in cal:
                return None
            sel = np.array(_strings(cal["residual_conditions"][()])) == condition
        return (np.array(_strings(cal["residual_states"][()]))[sel], cal["residual_times"][()][sel],
                cal["observed"][()][sel])

    at_fit = " at the fitted values" if cal is not None else ""
    if "conditions" in f:
        g = f["conditions"]
        ids = _strings(g["ids"][()])
        if len(ids) <= MAX_CONDITION_PANELS:
            for c, cid in enumerate(ids):
                def condition(ax, c=c, cid=cid):
                    gc = g[str(c)]
                    _draw_trajectory(ax, gc["time"][()], gc["state"][()], names,
                                     "condition %s%s" % (cid, at_fit), observed_of(cid))
                panels.append(_Panel("trajectory:" + cid, condition))
        else:
            def conditions(ax):
                drawn = []
                for i, name in enumerate(names):
                    colour = "C%d" % (i % 10)
                    for c in range(len(ids)):
                        gc = g[str(c)]
                        yc = gc["state"][()]
                        drawn.append(yc[:, i])
                        ax.plot(gc["time"][()], yc[:, i], color=colour, lw=0.6, alpha=0.5,
                                label=name if c == 0 else None)
                _auto_scale(ax, "y", drawn)
                _log_times(ax, t)
                ax.set_xlabel("t")
                ax.set_ylabel("state")
                ax.set_title("%d conditions%s (a line per condition and state)" % (len(ids), at_fit))
                ax.legend(fontsize="small")
            panels.append(_Panel("conditions", conditions))
    else:
        def trajectory(ax):
            title = "trajectory (%s)%s" % (_attr(f, "model", ""), at_fit)
            _draw_trajectory(ax, t, y, names, title, observed_of())

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
            it = np.arange(len(fh))
            _log_series(ax, it, fh, "o-", "objective J", ms=3)
            if "objective_gradient_norm_history" in cal:
                _log_series(ax, it, cal["objective_gradient_norm_history"][()], "s-",
                            "‖∇J‖ (fitted variables)", ms=3)
            _log_series(ax, it, cal["gradient_norm_history"][()], ":", "TAO residual (not ‖∇J‖)",
                        color="0.5")
            ax.set_xlabel("iteration")
            ax.set_ylabel("J, ‖∇J‖")
            _integer_ticks(ax.xaxis)
            termination = _attr(cal, "termination", "")
            ax.set_title("%s: %s" % (_attr(cal, "optimizer", "optimizer"), termination))
            if not int(_attr(cal, "converged", 1)):
                _mark_not_converged(ax, it[-1], fh[-1], termination or "not converged",
                                    _attr(cal, "optimizer", "optimizer"))
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
            _category_ticks(ax, labels)
            _auto_scale(ax, "y", [values], bars=True)
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
        panels.append(_Panel("correlation", lambda ax: _correlation(ax, cal)))
    return panels


def _draw_trajectory(ax, t, y, names, title, observed=None):
    """A line per state against t; observations (states, times, values) as
    markers in their state's colour; log axes by the rules above."""
    colours = {}
    drawn = [y]
    for i, name in enumerate(names):
        (line,) = ax.plot(t, y[:, i], label=name)
        colours[name] = line.get_color()
    if observed is not None:
        states, times, values = observed
        drawn.append(values)
        for name in names:
            sel = states == name
            if sel.any():
                ax.plot(times[sel], values[sel], "o", ms=3, color=colours[name], label=name + " observed")
    _auto_scale(ax, "y", drawn)
    _log_times(ax, t)
    ax.set_xlabel("t")
    ax.set_ylabel("state")
    ax.set_title(title)
    ax.legend(fontsize="small")


def _correlation(ax, cal):
    """The correlation of the fitted quantities; those the data do not
    determine (/calibration/unidentifiable) have none: left out and named,
    or a sentence when none is left."""
    import numpy as np
    names = _strings(cal["names"][()])
    corr = np.asarray(cal["correlation"][()], dtype=float)
    bad = np.asarray(cal["unidentifiable"][()], dtype=bool) if "unidentifiable" in cal else \
        np.zeros(len(names), dtype=bool)
    bad |= ~np.isfinite(np.diag(corr))
    title = "correlation of the fitted quantities"
    sv = ", ".join("%.3g" % v for v in cal["singular_values"][()]) if "singular_values" in cal else ""
    if bad.all():
        return _explain(ax, title, "No correlation: the data do not determine %s (singular values of "
                        "the scaled sensitivity matrix: %s)." % (", ".join(names), sv or "none"))
    keep = np.flatnonzero(~bad)
    if bad.any():
        title += " (unidentifiable, not shown: %s)" % ", ".join(n for n, b in zip(names, bad) if b)
    return _matrix(ax, corr[np.ix_(keep, keep)], [names[i] for i in keep], title, limits=(-1.0, 1.0))


def _category_ticks(ax, labels):
    """Bar labels on the x axis, turned upright when they would not fit
    side by side."""
    ax.set_xticks(range(len(labels)))
    crowded = len(labels) > 6 or sum(len(n) + 2 for n in labels) > 48
    ax.set_xticklabels(labels, rotation=90 if crowded else 0, fontsize="small" if crowded else None)


def _compact(v):
    """A number in at most ~7 characters for a heat-map cell."""
    if not math.isfinite(v):
        return "n/a"
    text = "%.2g" % v
    return text.replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")


def _matrix(ax, m, labels, title, symmetric=False, limits=None, note=None):
    """A heat map of the square matrix m: symmetric-log colours when its
    entries span decades, values in the cells when it is small, NaN cells
    grey and marked n/a. `note`: the sentence drawn instead when no entry
    is finite."""
    import numpy as np
    from matplotlib import colors
    m = np.asarray(m, dtype=float)
    finite = m[np.isfinite(m)]
    if finite.size == 0:
        return _explain(ax, title, note or "no finite entries to draw")
    norm = None
    if limits is None:
        scale = float(np.max(np.abs(finite)))
        scale = scale if scale > 0 else 1.0
        limits = (-scale, scale) if symmetric or finite.min() < 0 else (0.0, scale)
        nonzero = np.abs(finite[finite != 0])
        if nonzero.size and nonzero.max() / nonzero.min() > 10 ** DECADES_FOR_SYMLOG_COLOURS:
            norm = colors.SymLogNorm(linthresh=_linthresh(nonzero), vmin=limits[0], vmax=limits[1],
                                     base=10)
    cmap = _colour_map("RdBu_r")
    if norm is not None:
        im = ax.imshow(m, cmap=cmap, norm=norm)
    else:
        im = ax.imshow(m, cmap=cmap, vmin=limits[0], vmax=limits[1])
    n = len(labels)
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels, rotation=90 if n > 4 or max(map(len, labels), default=0) > 8 else 0)
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels)
    ax.set_xlabel("parameter")
    ax.set_ylabel("parameter")
    ax.set_title(title + (" (symmetric-log colours)" if norm is not None else ""))
    cb = ax.figure.colorbar(im, ax=ax)
    if norm is not None:
        cb.set_ticks([v for v in _symlog_ticks(norm.linthresh, max(abs(limits[0]), abs(limits[1])))
                      if limits[0] <= v <= limits[1]])
    if m.shape[0] <= ANNOTATE_MAX and m.shape[1] <= ANNOTATE_MAX:
        size = 9 if max(m.shape) <= 4 else 7 if max(m.shape) <= 6 else 6
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                v = m[i, j]
                shade = im.norm(v) if math.isfinite(v) else 0.5
                dark = math.isfinite(v) and abs(float(shade) - 0.5) > 0.3
                ax.text(j, i, _compact(v), ha="center", va="center", fontsize=size,
                        color="white" if dark else "black", gid="cell")
    return im


def _colour_map(name):
    import matplotlib
    cmap = matplotlib.colormaps[name].copy()
    cmap.set_bad("0.8")  # NaN cells: grey
    return cmap


def _explain(ax, title, message):
    """A sentence saying why a panel has nothing to draw, in place of an
    empty one (describe() reports it as the panel's note)."""
    import textwrap
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, textwrap.fill(message, 48), ha="center", va="center",
            transform=ax.transAxes, gid="note")
    ax._costate_note = message
    return None


def _integer_ticks(axis):
    """Ticks only at integers (iterations, epochs, indices); call after
    drawing the data. Under two units of data (a fit that stopped at
    iteration 0) the locator would still pick fractions: the integers
    themselves, with half a unit of margin."""
    from matplotlib.ticker import MaxNLocator
    lo, hi = axis.get_data_interval()
    if math.isfinite(lo) and math.isfinite(hi) and hi - lo < 2:
        axis.set_ticks(list(range(math.ceil(lo), math.floor(hi) + 1)))
        axis.set_view_interval(lo - 0.5, hi + 0.5, ignore=True)
    else:
        axis.set_major_locator(MaxNLocator(integer=True))


def _log_series(ax, x, y, style, label, **kwargs):
    """y against x on a log y axis; values ≤ 0 cannot be drawn there and
    are counted in the label instead of vanishing silently."""
    import numpy as np
    x, y = np.asarray(x), np.asarray(y, dtype=float)
    keep = ~(y <= 0)
    if not keep.all():
        label += " (%d ≤ 0 not drawn)" % int((~keep).sum())
    ax.set_yscale("log")
    return ax.plot(x[keep], y[keep], style, label=label, **kwargs)


def _linthresh(magnitudes):
    """The linear band of a symmetric-log scale: up to the smallest nonzero
    magnitude, so every value has its own decade."""
    return float(magnitudes.min())


def _symlog_ticks(linthresh, largest):
    """0 and ±10^k from the linear band's edge up to the largest magnitude,
    at most SYMLOG_LABELLED_DECADES of them a side (the default locator
    labels every decade, and inside the linear band too, where they crowd)."""
    lo, hi = math.ceil(math.log10(linthresh)), math.floor(math.log10(largest))
    step = max(1, math.ceil((hi - lo + 1) / SYMLOG_LABELLED_DECADES))
    powers = [10.0 ** k for k in range(hi, lo - 1, -step)]
    return sorted([-v for v in powers] + [0.0] + powers)


def _spans_decades(values, decades):
    import numpy as np
    v = np.abs(values[np.isfinite(values) & (values != 0)])
    return v.size > 0 and v.max() / v.min() > 10 ** decades


def _auto_scale(ax, which, series, bars=False):
    """A log axis when the values (a list of arrays) are positive and span
    more than DECADES_FOR_LOG decades; symlog when some are 0 (or, for
    bars, of both signs: each bar is its own value, so no curve crosses
    the linear band). Returns the scale chosen."""
    import numpy as np
    arrays = [np.ravel(np.asarray(a, dtype=float)) for a in series]
    v = np.concatenate(arrays) if arrays else np.zeros(0)
    v = v[np.isfinite(v)]
    scale, kwargs = "linear", {}
    if _spans_decades(v, DECADES_FOR_LOG):
        nonzero = np.abs(v[v != 0])
        if (v > 0).all():
            scale = "log"
        elif (v >= 0).all() or bars:
            scale, kwargs = "symlog", {"linthresh": _linthresh(nonzero)}
    if scale != "linear":
        (ax.set_yscale if which == "y" else ax.set_xscale)(scale, **kwargs)
    if scale == "symlog":
        # matplotlib's autoscaling on symlog stops at the bars' sticky 0 and
        # leaves negative bars outside: the limits are set here, a factor
        # of 2 (0.3 decade) beyond the extreme values.
        lo, hi = min(0.0, 2.0 * float(v.min())), max(0.0, 2.0 * float(v.max()))
        (ax.set_ylim if which == "y" else ax.set_xlim)(lo, hi)
        ticks = [t for t in _symlog_ticks(kwargs["linthresh"], float(np.abs(v).max())) if lo <= t <= hi]
        (ax.set_yticks if which == "y" else ax.set_xticks)(ticks)
    return scale


def _log_times(ax, t):
    """Time on a log axis when the output times are geometric (Robertson:
    0.4, 4, …, 4e7), never for a uniform grid, however long."""
    import numpy as np
    t = np.asarray(t, dtype=float)
    pos = t[t > 0]
    if pos.size < 3 or not _spans_decades(pos, DECADES_FOR_LOG):
        return
    dlog, dlin = np.diff(np.log(pos)), np.diff(pos)
    if np.std(dlog) / max(np.mean(dlog), 1e-300) < np.std(dlin) / max(np.mean(dlin), 1e-300):
        if (t > 0).all():
            ax.set_xscale("log")
        else:
            ax.set_xscale("symlog", linthresh=_linthresh(pos))


def _mark_not_converged(ax, x, y, reason, what):
    """A red cross at a history's last iterate (None: no point), and the
    title "WHAT: NOT CONVERGED (REASON)" in red."""
    if x is not None:
        ax.plot([x], [y], "X", ms=10, color=NOT_CONVERGED_COLOUR, zorder=5,
                label="last iterate: not converged")
    ax.set_title("%s: NOT CONVERGED (%s)" % (what, reason), color=NOT_CONVERGED_COLOUR)
    ax._costate_not_converged = reason


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
        finite = data[np.isfinite(data)]
        if finite.size and finite.min() == finite.max():
            # A uniform colour would say nothing: the title gives the value.
            title += " (constant %.6g everywhere)" % finite.min()
        if dim == 1:
            x = origin[0] + spacing[0] * (np.arange(cells[0]) + 0.5)
            ax.plot(x, data[0, 0, :])
            _auto_scale(ax, "y", [data[0, 0, :]])
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
                                      ("history_gradient_norm", "‖∇J‖", "s-")):
                if key in arrays:
                    _log_series(ax, it, arrays[key][()], style, label, ms=3)
            ax.set_xlabel("iteration")
            ax.set_ylabel("objective, misfit, ‖∇J‖")
            _integer_ticks(ax.xaxis)
            ax.set_title("inversion history (inexact Newton–CG)")
            status = str(_attr(f, "fit_status", ""))
            if status and status != "converged":
                _mark_not_converged(ax, it[-1], arrays["history_objective"][-1],
                                    str(_attr(f, "convergence", status)), "inversion history")
            ax.legend(fontsize="small")

        panels.append(_Panel("history", history))
    if "eigenvalues" in arrays:
        def eigenvalues(ax):
            lam = np.asarray(arrays["eigenvalues"][()], dtype=float)
            order = np.argsort(-lam, kind="stable")
            lam = lam[order]
            k = np.arange(1, len(lam) + 1)
            shown = lam > 0
            title = "eigenvalue spectrum (%d)" % len(lam)
            if not shown.any():
                return _explain(ax, title, "No positive eigenvalue among the %d computed: the data "
                                "inform no direction beyond the prior." % len(lam))
            ax.semilogy(k[shown], lam[shown], "o-", ms=3, label="eigenvalue")
            ax.axhline(1.0, color="black", lw=0.8, ls="--", label="1 (data = prior)")
            ax.set_xlabel("index k (largest first)")
            ax.set_ylabel("eigenvalue λ_k")
            _integer_ticks(ax.xaxis)
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
        title = "waterfall: %d starts, %d parameters (%s)" % (
            len(w), len(ids), ", ".join(ids[:4]) + (", …" if len(ids) > 4 else ""))
        if not finite.any():
            return _explain(ax, title, "Every one of the %d starts failed (no finite final "
                            "objective): nothing to rank." % len(w))
        # Per start (file order) → the waterfall's order (sorted objective).
        converged = np.ones(len(w), dtype=bool)
        if "converged" in c and "objective" in c and len(c["converged"]) == len(w):
            order = np.argsort(np.asarray(c["objective"][()], dtype=float), kind="stable")
            converged = np.asarray(c["converged"][()], dtype=float)[order] > 0
        ax.plot(k[finite], w[finite], "o-", ms=4, label="start")
        late = finite & ~converged
        if late.any():
            ax.plot(k[late], w[late], "X", ms=9, color=NOT_CONVERGED_COLOUR,
                    label="start not converged")
        best = w[finite].min()
        ax.axhline(best, color="black", lw=0.8, ls="--", label="best %.8g" % best)
        # Starts that all reach the best (within PEtab's 1e-3, the CLI's
        # best_tolerance) would otherwise be drawn on a 1e-11 axis offset.
        ax.ticklabel_format(axis="y", useOffset=False)
        if w[finite].max() - best < BEST_TOLERANCE:
            ax.set_ylim(best - BEST_TOLERANCE, best + 2 * BEST_TOLERANCE)
        ax.set_xlabel("start, sorted by final objective")
        ax.set_ylabel("final objective  −(llh + log prior)")
        _integer_ticks(ax.xaxis)
        if (~finite).any():
            title += ", %d failed" % int((~finite).sum())
        if late.any():
            title += ", %d not converged" % int(late.sum())
        ax.set_title(title)
        if late[finite].all():
            _mark_not_converged(ax, None, None, "no start converged", title)
        ax.legend(fontsize="small")

    def single(ax):
        x = np.asarray(c["best_x"][()], dtype=float)
        x0 = np.asarray(c["initial"][()], dtype=float).reshape(-1, len(x))[0]
        k = np.arange(len(x))
        ax.bar(k - 0.2, x0, width=0.4, color="0.7", label="start")
        ax.bar(k + 0.2, x, width=0.4, color="C0", label="fitted")
        _category_ticks(ax, ids)
        _auto_scale(ax, "y", [x, x0], bars=True)
        ax.axhline(0.0, color="black", lw=0.6)
        ax.set_ylabel("parameter (on its PEtab scale)")
        status = str(_attr(c, "convergence", _attr(c, "fit_status", "")))
        ax.set_title("PEtab fit: objective %.8g, %s" % (float(c["waterfall"][0]), status))
        if str(_attr(c, "fit_status", "converged")) != "converged":
            _mark_not_converged(ax, None, None, status,
                                "PEtab fit: objective %.8g" % float(c["waterfall"][0]))
        ax.legend(fontsize="small")

    if len(c["waterfall"]) == 1 and "best_x" in c and "initial" in c:
        return [_Panel("fit", single)]
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
        # "epochs" and "early_stopping" end a stochastic fit as asked; an
        # interrupted fit or a failed rescue did not finish.
        if termination in ("interrupted", "rescue_failed") and len(train):
            _mark_not_converged(ax, epochs[-1], train[-1], termination,
                                "%s: %d epochs" % (method, len(train)))
        ax.legend(fontsize="small")

    def rate(ax):
        lr = np.asarray(g["learning_rate"][()], dtype=float)
        ax.plot(epochs, lr, "o-", ms=3, label="learning rate")
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
        _category_ticks(ax, ids)
        _auto_scale(ax, "y", [change], bars=True)
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
                _auto_scale(ax, "y", [m[obs == k], h[obs == k]])
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
            _category_ticks(ax, ids)
            _auto_scale(ax, "y", [v], bars=True)
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


# ---- tables (`costate run … -o traj.csv | .tsv`, a PEtab run's simulation table) ----

PETAB_SIMULATION_COLUMNS = ("observableId", "simulationConditionId", "time", "simulation")


def _table_panels(path):
    """`costate run FILE.yaml -o T.csv` (columns t, then one per state) or
    the PEtab simulation table `costate run problem.yaml` writes beside its
    HDF5 (observableId, simulationConditionId, time, simulation)."""
    import csv
    import numpy as np
    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            # '#' lines (the provenance costate writes after the header:
            # version, command, settings) are not data; line numbers count them.
            numbered = [(k + 1, r) for k, r in enumerate(csv.reader(fh, delimiter=delimiter))
                        if r and not r[0].startswith("#")]
    except UnicodeDecodeError as e:
        raise ValueError("%s: not a text table (%s)" % (path, e))
    if len(numbered) < 2:
        raise ValueError("%s: a table without rows (a header and at least one line expected)" % path)
    header, body = numbered[0][1], [r for _, r in numbered[1:]]

    def numbers(column_rows, what):
        try:
            return np.array(column_rows, dtype=float)
        except ValueError as e:
            raise ValueError("%s: %s: %s" % (path, what, e))

    if header[0] == "t" and len(header) > 1:
        bad = [(line, r) for line, r in numbered[1:] if len(r) != len(header)]
        if bad:
            raise ValueError("%s: line %d has %d columns, the header %d" % (
                path, bad[0][0], len(bad[0][1]), len(header)))
        data = numbers(body, "columns t, %s" % ", ".join(header[1:]))
        title = "trajectory (%s)" % os.path.basename(path)
        return [_Panel("trajectory", lambda ax: _draw_trajectory(ax, data[:, 0], data[:, 1:], header[1:], title))]
    if all(c in header for c in PETAB_SIMULATION_COLUMNS):
        col = {c: header.index(c) for c in PETAB_SIMULATION_COLUMNS}
        obs = [r[col["observableId"]] for r in body]
        cond = [r[col["simulationConditionId"]] for r in body]
        t = numbers([r[col["time"]] for r in body], "column time")
        h = numbers([r[col["simulation"]] for r in body], "column simulation")
        panels = []
        for k in list(dict.fromkeys(obs))[:SHOWN_OBSERVABLES]:
            def draw(ax, k=k):
                rows_k = [i for i, o in enumerate(obs) if o == k]
                for c in dict.fromkeys(cond[i] for i in rows_k):
                    sel = np.array([i for i in rows_k if cond[i] == c])
                    sel = sel[np.argsort(t[sel], kind="stable")]
                    ax.plot(t[sel], h[sel], "o-", ms=3, label="%s simulated" % c)
                _auto_scale(ax, "y", [h[rows_k]])
                ax.set_xlabel("time")
                ax.set_ylabel(k)
                ax.set_title("observable %s" % k)
                ax.legend(fontsize="small")
            panels.append(_Panel("observable " + k, draw))
        return panels
    raise ValueError("%s: not a table costate writes (a first column t, or the PEtab simulation "
                     "table's columns %s; this one has %s)" % (path, ", ".join(PETAB_SIMULATION_COLUMNS),
                                                                ", ".join(header[:6])))


# ---- the figure ----------------------------------------------------------------

def figure(path, dpi=100):
    """The figure of `path` and a dict panel name -> Axes. Raises ValueError
    for a file that is not costate output or holds nothing to draw."""
    _require()
    import h5py
    if path.lower().endswith((".csv", ".tsv")):
        return _lay_out(_table_panels(path), dpi, "%s  (table)" % os.path.basename(path))
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
        status = _attr(f, "status", "")
        title = "%s  (%s%s)" % (os.path.basename(path),
                                _attr(f, "command", "fields" if "format" in f.attrs
                                      else "stochastic fit" if "stochastic" in f
                                      else "PEtab calibration" if "calibration" in f
                                      else "PEtab " + os.path.basename(str(_attr(f, "problem", "problem")))),
                                "" if status in ("complete", "") else ", status " + str(status))
        return _lay_out(panels, dpi, title)


def _lay_out(panels, dpi, title):
    """Draws the panels two to a row (one alone) under `title`."""
    import matplotlib.pyplot as plt
    columns = 1 if len(panels) == 1 else 2
    rows = math.ceil(len(panels) / columns)
    # Constrained layout keeps titles, labels and colour bars apart.
    fig, axes = plt.subplots(rows, columns, squeeze=False, dpi=dpi, layout="constrained",
                             figsize=(PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows))
    out = {}
    for k, panel in enumerate(panels):
        ax = axes[k // columns][k % columns]
        panel.draw(ax)
        out[panel.name] = ax
    for k in range(len(panels), rows * columns):
        axes[k // columns][k % columns].set_visible(False)
    fig.suptitle(title)
    _fit_titles(fig, columns)
    return fig, out


def _fit_titles(fig, columns):
    """Wraps every title (and the figure's) onto as many lines as it needs
    to stay inside its axes (the figure's width): at the default
    size no title runs into its neighbour's or off the figure."""
    import textwrap
    fig.canvas.draw()  # the constrained layout places the axes
    renderer = fig.canvas.get_renderer()
    cell = fig.bbox.width / columns
    jobs = []
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        jobs.append((sup, 0.96 * fig.bbox.width))
    for ax in fig.axes:
        if not ax.get_visible() or not ax.title.get_text():
            continue
        # Within the axes' own width: wider, a centred title runs over the
        # top y tick label (and, wider still, into the next column).
        box = ax.get_window_extent(renderer)
        centre = 0.5 * (box.x0 + box.x1)
        left = math.floor(centre / cell) * cell
        jobs.append((ax.title, min(box.width, 0.94 * 2 * min(centre - left, left + cell - centre))))
    changed = False
    for text, allowed in jobs:
        one_line = " ".join(text.get_text().split())
        text.set_text(one_line)
        width = text.get_window_extent(renderer).width
        if width <= allowed:
            continue
        chars = max(12, int(len(one_line) * allowed / width))
        for _ in range(8):
            text.set_text(textwrap.fill(one_line, chars))
            if text.get_window_extent(renderer).width <= allowed or chars <= 12:
                break
            chars = max(12, int(chars * 0.9))
        changed = True
    if changed:
        fig.canvas.draw()


def _drawn_texts(fig, renderer):
    """(owner, Text) of every non-empty text the figure draws: the figure's
    title, every visible axes' titles, axis labels, offset texts, the tick
    labels inside the view, texts and legends."""
    out = []
    sup = getattr(fig, "_suptitle", None)
    for t in fig.texts + ([sup] if sup is not None and sup not in fig.texts else []):
        out.append(("figure", t))
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        owner = "axes %d" % k
        for t in (ax.title, ax._left_title, ax._right_title):
            out.append((owner + " title", t))
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                if not axis.get_visible():
                    continue
                out.append((owner + " label", axis.label))
                out.append((owner + " offset", axis.get_offset_text()))
                for tick in axis._update_ticks():
                    for label in (tick.label1, tick.label2):
                        if label.get_visible():
                            out.append((owner + " tick", label))
        for t in ax.texts:
            out.append((owner + " text", t))
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            for t in legend.get_texts():
                out.append((owner + " legend", t))
    return [(o, t) for o, t in out if t.get_visible() and t.get_text().strip()]


def text_problems(fig):
    """Texts that overlap another text or another panel's plotting area, or
    leave the figure, measured on the renderer's bounding boxes: {"overlaps": [[a, b], …], "clipped": [a,
    …]} (empty lists: every text reads)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [(o, t, t.get_window_extent(renderer)) for o, t in _drawn_texts(fig, renderer)]
    frame = fig.bbox
    slack = 0.5  # pixels: antialiasing, not a collision
    overlaps, clipped = [], []
    # A text inside another panel's plotting area (a title running into the
    # panel above) overlaps that panel.
    areas = [("axes %d" % k, ax) for k, ax in enumerate(fig.axes) if ax.get_visible()]
    for owner, a, ba in texts:
        for name, ax in areas:
            if owner.startswith(name + " "):
                continue
            bb = ax.bbox
            if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > slack and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > slack:
                overlaps.append([a.get_text(), "the plotting area of %s" % (ax.get_title() or name)])
    for i, (_, a, ba) in enumerate(texts):
        if (ba.x0 < frame.x0 - slack or ba.y0 < frame.y0 - slack or ba.x1 > frame.x1 + slack
                or ba.y1 > frame.y1 + slack):
            clipped.append(a.get_text())
        for _, b, bb in texts[i + 1:]:
            if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > slack and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > slack:
                overlaps.append([a.get_text(), b.get_text()])
    return {"overlaps": overlaps, "clipped": clipped}


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
                    "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                    "cell_values": sum(1 for t in ax.texts if t.get_gid() == "cell"),
                    "note": getattr(ax, "_costate_note", None),
                    "not_converged": getattr(ax, "_costate_not_converged", None)})
    w, h = fig.get_size_inches()
    sup = getattr(fig, "_suptitle", None)  # Figure.get_suptitle() is matplotlib ≥ 3.8
    title = sup.get_text() if sup is not None else ""
    return dict({"title": title, "size_inches": [float(w), float(h)], "dpi": float(fig.dpi),
                 "panels": out}, **text_problems(fig))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="costate plot", description="draw what a costate output file holds")
    parser.add_argument("file", help="HDF5 output of costate run/sensitivity/calibrate (ODE, PDE, "
                        "PEtab, stochastic fits, inversions) or a .csv/.tsv table costate run wrote")
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
