"""costate: adjoint sensitivities of ODE simulations and PEtab problems, from Python.

    import costate
    p = costate.load("data/examples/lotka_volterra_equations.yaml",
                     set={"integrator.rtol": 1e-10})
    sol = p.run()                  # sol.t (n,), sol.y (n, states), sol.names
    s = p.sensitivity()            # s.objective, s.gradient, s.gradient_dict
    c = p.gradcheck()              # c.passed, c.taylor, c.finite_differences
    fit = p.calibrate()            # fit.values, fit.standard_errors, fit.correlation
    f, g = p.objective(p.fit.start)  # for scipy.optimize.minimize(jac=True)
    hv = p.hessp(p.fit.start, v)     # exact H v, for hessp= (Newton-CG, trust-krylov)
    pe = costate.load("problem.yaml")       # a PEtab problem: costate.PetabProblem
    e = pe.evaluate()              # e.llh, e.chi2, e.gradient, e.gradient_dict
    ms = pe.calibrate(starts=20, seed=1)    # ms.best_x, ms.waterfall (arrays)
    sf = pe.fit(optimizer="adamw", epochs=50, batch=8)  # mini-batches over experiments
    f = costate.fit(loss, n_conditions, x0, epochs=20, batch=16)  # loss(c, x) -> (value, gradient)
    pd = costate.load("data/examples/heat2d_kappa.yaml")  # a PDE input: costate.PdeProblem
    r = pd.run()                   # r.t (frames,), r.fields["u"] (frames, ny, nx)
    g = pd.sensitivity()           # g.gradient_fields["kappa"] (ny, nx): dJ/dkappa per cell

See docs/python.md. ``costate.plot`` (pictures of output files) is pure
Python; the rest needs the compiled extension ``costate._costate`` (CMake
option COSTATE_PYTHON). Every computation is the command line's; a bad input
raises ``costate.Error`` with the command line's message (file:line:column).
"""

import json
import os
import sys
import types

try:
    from . import _build
except ImportError:  # a source checkout on PYTHONPATH: nothing recorded
    _build = None


def _other_interpreter():
    """The interpreter costate was built for when it is not this one, else None."""
    if _build is None:
        return None
    here = os.path.realpath(sys.executable)
    same = here in (os.path.realpath(_build.python_executable), _build.python_executable_real)
    if same and os.path.realpath(sys.prefix) == os.path.realpath(_build.python_prefix):
        return None  # (a venv of the same executable has a prefix of its own)
    return _build.python_executable


def _refuse_other_interpreter(error):
    """Raises ImportError naming the interpreter costate was built for when
    this one is another (a pyenv or venv python3 first on PATH) and cannot
    load the extension or NumPy (``error``)."""
    built_for = _other_interpreter()
    if built_for is None:
        return
    raise ImportError(
        "costate was built for %s (Python %s, with NumPy); this is %s (Python %d.%d), "
        "which cannot load it (%s). Run `%s` instead, or rebuild for this interpreter "
        "with cmake -DCOSTATE_PYTHON_EXECUTABLE=%s (it needs NumPy and pybind11)"
        % (built_for, _build.python_version, sys.executable, sys.version_info[0],
           sys.version_info[1], error, built_for, sys.executable)) from error


try:
    from . import _costate
    Error = _costate.Error
except ImportError as _error:  # the plots work without the extension
    _refuse_other_interpreter(_error)
    _costate = None
    _import_error = _error

    class Error(RuntimeError):
        """costate's error (the compiled module is missing: see load())."""

if _costate is not None:
    try:
        import numpy as _numpy  # the extension's arrays (pybind11 imports it on first use)
    except ImportError as _error:
        _refuse_other_interpreter(_error)

__all__ = ["Error", "load", "load_petab", "fit", "Problem", "PetabProblem", "PdeProblem", "Result"]


class Result(types.SimpleNamespace):
    """A result: its fields are attributes (NumPy arrays, numbers, names);
    ``as_dict()`` gives them as a dict."""

    def as_dict(self):
        return dict(vars(self))


def _setting(value):
    """A --set value: YAML text of a Python value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, default=_json_default)


def _overrides(settings):
    if settings is None:
        return []
    if isinstance(settings, dict):
        return ["%s=%s" % (k, _setting(v)) for k, v in settings.items()]
    return [str(s) for s in settings]


def _json_default(x):
    if hasattr(x, "tolist"):  # NumPy arrays and scalars
        return x.tolist()
    raise TypeError("costate.load: cannot write %r (%s) as YAML" % (x, type(x).__name__))


def load(source, set=None):
    """A problem from an input file (a path) or a dict with the same keys
    (equations as strings included): a Problem (ODE inputs), a PdeProblem
    (inputs with a ``pde:`` section) or a PetabProblem (a PEtab YAML
    file). ``set`` overrides settings like the command line's ``--set``:
    ``{"integrator.rtol": 1e-10}`` or ``["integrator.rtol=1e-10"]``. A dict
    is read as YAML text named ``<dict>`` in errors; its relative data files
    are found from the working directory. Raises costate.Error on bad input."""
    if _costate is None:
        raise ImportError("costate's compiled module costate._costate is not available (%s); "
                          "build with -DCOSTATE_PYTHON=ON (docs/python.md)" % _import_error)
    sets = _overrides(set)
    if isinstance(source, dict):
        text = json.dumps(source, indent=2, default=_json_default)
        if "pde" in source:
            return PdeProblem(_costate.load_pde_text(text, "<dict>", sets))
        return Problem(_costate.load_text(text, "<dict>", sets), ("text", text, sets))
    path = os.fspath(source)
    if _costate.is_pde_input(path):
        return PdeProblem(_costate.load_pde_file(path, sets))
    if _costate.is_petab(path):
        if sets:
            raise Error("%s: set= is not supported for PEtab problems (got '%s'); their "
                        "settings come from the tables" % (path, sets[0]))
        return PetabProblem(_costate.load_petab(path))
    return Problem(_costate.load_file(path, sets), ("file", path, sets))


def load_petab(path):
    """A PEtab problem (format version 1) from its YAML file: what
    ``costate.load`` returns for such a file."""
    if _costate is None:
        raise ImportError("costate's compiled module costate._costate is not available (%s); "
                          "build with -DCOSTATE_PYTHON=ON (docs/python.md)" % _import_error)
    return PetabProblem(_costate.load_petab(os.fspath(path)))


def mpi_rank_size():
    """(rank, size) in MPI_COMM_WORLD ((0, 1) before MPI is initialised)."""
    return tuple(_costate.mpi_rank_size())


class Problem:
    """An input file's problem (what ``costate.load`` returns)."""

    def __init__(self, core, origin):
        self._core = core
        self._origin = origin  # how to reload it with more --set overrides

    def _with(self, more):
        kind, source, sets = self._origin
        sets = sets + more
        if kind == "text":
            return Problem(_costate.load_text(source, "<dict>", sets), (kind, source, sets))
        return Problem(_costate.load_file(source, sets), (kind, source, sets))

    # -- what the file says
    input_path = property(lambda self: self._core.input_path)
    model = property(lambda self: self._core.model)
    description = property(lambda self: self._core.description)
    state_names = property(lambda self: list(self._core.state_names))
    #: A DAE's algebraic unknowns (model.algebraic), by name; [] for an ODE.
    algebraic_states = property(lambda self: list(self._core.algebraic_states))
    parameter_names = property(lambda self: list(self._core.parameter_names))
    settings = property(lambda self: self._core.settings, doc="the resolved settings (YAML)")

    @property
    def parameters(self):
        """name -> value of the model's parameters."""
        return dict(zip(self._core.parameter_names, self._core.parameters.tolist()))

    @property
    def initial_state(self):
        """name -> y(t0)."""
        return dict(zip(self._core.state_names, self._core.initial_state.tolist()))

    def __repr__(self):
        return "<costate.Problem %s: model %s, states %s, parameters %s>" % (
            self.input_path, self.model, ", ".join(self.state_names),
            ", ".join(self.parameter_names))

    # -- computations (the GIL is released while they run)
    def run(self, output=None):
        """Integrates; returns t (n,), y (n, states; one column per state, C
        order), names, summary (dict), and for an SBML model symbol_names and
        symbols (n, symbols: every SBML symbol at each output time, as
        ``run --json``'s final_symbols and the HDF5 file's /symbols).
        ``output``: also write the HDF5 file ``costate run -o`` writes."""
        d = self._core.run(output or "")
        return Result(**d)

    def sensitivity(self, method=None, hessian=False, output=None):
        """J and its gradient (the file's sensitivity.method, or ``method``:
        discrete_adjoint, forward, continuous_adjoint, cvodes_forward,
        cvodes_adjoint). Returns objective, names (the wrt parameters),
        gradient, state_names, gradient_initial_state (arrays), the dicts
        gradient_dict and gradient_initial_state_dict, and with
        ``hessian=True`` the Hessian (names × names) over the wrt parameters.
        A file with ``conditions:``: J = Σ_c J_c and the summed gradient (and
        Hessian), as ``costate sensitivity``; conditions (their ids) and
        condition_objectives (J_c, in order) — empty for a file without them.
        ``output``: also write the HDF5 file ``costate sensitivity -o`` writes."""
        p = self if method is None else self._with(["sensitivity.method=" + method])
        d = p._core.sensitivity(bool(hessian), output or "")
        d["gradient_dict"] = dict(zip(d["names"], d["gradient"].tolist()))
        d["gradient_initial_state_dict"] = dict(zip(d["state_names"],
                                                    d["gradient_initial_state"].tolist()))
        return Result(**d)

    def gradcheck(self):
        """``costate gradcheck``: Taylor test and central differences; passed,
        objective, names, x, gradient, taylor (dict), finite_differences (dict).
        A file with ``conditions:`` checks J = Σ_c J_c and its summed
        gradient, each condition on its own frozen steps."""
        return Result(**self._core.gradcheck())

    def calibrate(self, output=None):
        """``costate calibrate`` (PETSc TAO): names, values, standard_errors,
        covariance, correlation, singular_values, unidentifiable, objective,
        converged, objective_history, gradient_norm_history, residuals, …"""
        d = self._core.calibrate(output or "")
        d["values_dict"] = dict(zip(d["names"], d["values"].tolist()))
        return Result(**d)

    # -- the calibration's objective, for your own optimiser
    @property
    def fit(self):
        """The calibration's fitted quantities: names, log (per quantity),
        start, lower, upper — in the optimiser's coordinates q (q = log v for
        log-transformed quantities); ``bounds`` as scipy wants them."""
        d = self._core.fit()
        d["bounds"] = [(None if lo == float("-inf") else lo, None if hi == float("inf") else hi)
                       for lo, hi in zip(d["lower"].tolist(), d["upper"].tolist())]
        return Result(**d)

    def objective(self, x):
        """(J(q), ∇J(q)) of the calibration section at q (a float64 array of
        len(fit.names)): ``scipy.optimize.minimize(p.objective, p.fit.start,
        jac=True, bounds=p.fit.bounds)``. ValueError for an array of the wrong
        length or type."""
        return self._core.objective(x)

    def hessp(self, x, v):
        """H(q) v: the exact Hessian of the same J(q) that ``objective``
        returns, applied to v (one second-order adjoint sweep; the file's
        sensitivity.method must be discrete_adjoint or cvodes_adjoint):
        ``scipy.optimize.minimize(p.objective, p.fit.start, jac=True,
        hessp=p.hessp, method="trust-krylov")``. ValueError for arrays of the
        wrong length or type."""
        return self._core.hessp(x, v)

    def values(self, x):
        """The natural values v(q) of the fitted quantities."""
        return self._core.values(x)


class PetabProblem:
    """A PEtab problem (``costate.load("problem.yaml")``): the estimated
    parameters θ on their scales (``ids``, ``nominal``, ``lower``,
    ``upper``, ``scales``), ``evaluate`` and ``calibrate`` — the command
    line's ``costate sensitivity|calibrate problem.yaml``. Under mpiexec
    every rank calls each method and gets the whole result (experiments, or
    with several starts the starts, are dealt over the ranks)."""

    def __init__(self, core):
        self._core = core

    file = property(lambda self: self._core.file)
    ids = property(lambda self: list(self._core.ids))
    nominal = property(lambda self: self._core.nominal, doc="θ of the nominal values (on the scales)")
    lower = property(lambda self: self._core.lower)
    upper = property(lambda self: self._core.upper)
    scales = property(lambda self: list(self._core.scales))
    n_measurements = property(lambda self: self._core.n_measurements)
    n_experiments = property(lambda self: self._core.n_experiments)
    report = property(lambda self: self._core.report)

    @property
    def bounds(self):
        """[(lower, upper)] on the scales, as scipy wants them."""
        return list(zip(self.lower.tolist(), self.upper.tolist()))

    def __repr__(self):
        return "<costate.PetabProblem %s: %d estimated parameters, %d measurements>" % (
            self.file, len(self.ids), self.n_measurements)

    def evaluate(self, theta=None, gradient=True, fim=False):
        """llh, chi2, log_prior, gradient (d llh / d θ; None without
        ``gradient``) and gradient_dict, log_prior_gradient, simulations and
        sigmas (one per measurement) at θ (default: the nominal values);
        with ``fim``, the Fisher information of −llh on the parameters'
        scales (``fim``, ids × ids, as ``costate sensitivity``'s; needs a
        CVODES integrator, the default)."""
        d = self._core.evaluate(theta, bool(gradient), bool(fim))
        d["gradient_dict"] = (None if d["gradient"] is None
                              else dict(zip(d["ids"], d["gradient"].tolist())))
        return Result(**d)

    def objective(self, x):
        """(−(llh + log prior), its gradient) at θ = x: what ``calibrate``
        minimises, for ``scipy.optimize.minimize(jac=True, bounds=p.bounds)``."""
        return self._core.objective(x)

    def fit(self, theta=None, callback=None, **options):
        """``costate calibrate problem.yaml --optimizer adamw …``: a
        mini-batch stochastic fit over the experiments from θ (default: the
        nominal values), with the options of ``costate.fit`` (optimizer,
        epochs, batch, learning_rate, validation_split, seed, …). Returns
        what ``costate.fit`` returns, plus ids, initial and llh (over every
        experiment, at x)."""
        d = self._core.fit(theta, callback, options)
        d["x_dict"] = dict(zip(d["ids"], d["x"].tolist()))
        return Result(**d)

    def calibrate(self, starts=0, seed=0, output=None, sampling="lhs"):
        """``costate calibrate problem.yaml --starts N --seed S --sampling
        lhs|uniform``: starts = 0 fits from the nominal values, N >= 1 from N
        points of a Latin hypercube (``sampling="lhs"``, the default) or N
        uniform draws in the bounds (on the scales). Returns ids, best_x, best_x_dict, best_llh,
        best_objective, best_index, converged, at_best, the waterfall
        (final objectives sorted, best first; waterfall_starts: their start
        indices) and per start (draw order) objectives, llhs, initial and x
        (starts × parameters), iterations, evaluations, start_converged,
        failed, termination, ranks, seconds. ``output``: the HDF5 file of
        ``-o`` (written by rank 0)."""
        d = self._core.calibrate(int(starts), int(seed), output or "", str(sampling))
        d["best_x_dict"] = dict(zip(d["ids"], d["best_x"].tolist()))
        return Result(**d)


def fit(loss, n_conditions=None, x0=None, lower=None, upper=None, callback=None, **options):
    """Mini-batch stochastic minimisation of Σ_c loss(c, x) over
    ``n_conditions`` conditions — costate's ``ggml_opt_fit`` for
    simulations (``optimize::fit``; docs/calibration.md).

    ``fit(problem, callback=None, **options)`` with an input file (a path or
    what ``costate.load`` returns) fits its calibration section by
    mini-batches over its ``conditions:`` — ``costate calibrate FILE
    --optimizer adamw …`` (the same library call, the same bits): the
    file's calibration.optimizer settings, the keywords over them. Returns
    what is listed below plus names, initial (the start on the optimiser's
    scale, log for log-transformed quantities), values (natural values
    at x) and values_dict, conditions, standard_errors (of values, when a
    full-batch finish — finish_iterations — converged; else None).

    ``loss(c, x)``
    returns ``(value, gradient)`` for condition ``c`` (a failed simulation:
    a non-finite value or ``costate.Error``, rescued by halving the step;
    when max_rescues halvings fail, restarted — back to the last accepted x,
    moments reset, the batch skipped, the learning rate halved — up to
    max_restarts times).
    ``lower``/``upper`` bound x (projected steps). ``callback(epoch)`` is
    called after each epoch with its dict. Options (keywords): optimizer
    ("adamw", "adam", "sgd"), epochs, batch, batch_growth, physical_batch, learning_rate,
    schedule ("constant", "step", "cosine"), step_epochs, gamma,
    min_learning_rate, warmup_steps, beta1, beta2, epsilon, weight_decay,
    momentum, clip_norm, validation_split, patience, seed, max_rescues,
    max_restarts, finish_iterations, finish_gatol, average_epochs. Returns x, objective (over every
    condition), termination, epochs (train_loss ± train_loss_stderr,
    validation_loss, learning_rate, simulations per epoch), steps,
    simulations, rescues, restarts, training and validation (condition
    indices)."""
    if _costate is None:
        raise ImportError("costate's compiled module costate._costate is not available (%s); "
                          "build with -DCOSTATE_PYTHON=ON (docs/python.md)" % _import_error)
    if isinstance(loss, (str, os.PathLike, Problem)):
        if n_conditions is not None or x0 is not None or lower is not None or upper is not None:
            raise TypeError("fit(problem, ...): an input file brings its conditions, start and bounds "
                            "(its calibration section); pass only callback= and the options")
        problem = loss if isinstance(loss, Problem) else load(loss)
        if not isinstance(problem, Problem):
            raise TypeError("fit(%r): a stochastic fit over conditions needs an ODE input file "
                            "(a PEtab problem: costate.load(...).fit(...))" % (loss,))
        d = problem._core.fit_conditions(callback, options)
        d["values_dict"] = dict(zip(d["names"], d["values"].tolist()))
        return Result(**d)
    if n_conditions is None or x0 is None:
        raise TypeError("fit(loss, n_conditions, x0, ...): a Python loss needs n_conditions and x0")
    return Result(**_costate.fit(loss, int(n_conditions), x0, lower, upper, callback, options))


class PdeProblem:
    """A PDE input (a ``pde:`` section; what ``costate.load`` returns for
    one): ``run`` and ``sensitivity`` are ``costate run|sensitivity`` on it
    (the same computation, io::pde_run). Grid arrays are float64, C order,
    shaped like the grid with **x the last (fastest) index**: (nx,) in 1-D,
    (ny, nx) in 2-D, (nz, ny, nx) in 3-D — ``a[j, i]`` is the cell centred at
    (x[i], y[j]) with the centres ``coordinates["x"]``, ``["y"]``, ``["z"]``
    (x_i = a + (i + 1/2) h). Frames add a leading time index. Under mpiexec
    (mpi4py) every rank calls each method; rank 0 receives the grid arrays,
    the other ranks get None in their place (numbers and ``t``: every rank)."""

    def __init__(self, core):
        self._core = core

    input_path = property(lambda self: self._core.input_path)
    description = property(lambda self: self._core.description)
    dim = property(lambda self: self._core.dim)
    cells = property(lambda self: list(self._core.cells), doc="[nx, ny, nz] up to dim")
    field_names = property(lambda self: list(self._core.field_names))
    parameter_names = property(lambda self: list(self._core.parameter_names))
    parameter_field_names = property(lambda self: list(self._core.parameter_field_names))
    has_objective = property(lambda self: self._core.has_objective)
    settings = property(lambda self: self._core.settings, doc="the resolved settings (YAML)")

    @property
    def parameters(self):
        """name -> value of the scalar parameters."""
        return dict(zip(self.parameter_names, self._core.parameters.tolist()))

    def __repr__(self):
        return "<costate.PdeProblem %s: %d-D, cells %s, fields %s, parameter fields %s>" % (
            self.input_path, self.dim, "x".join(str(n) for n in self.cells),
            ", ".join(self.field_names), ", ".join(self.parameter_field_names) or "none")

    def run(self, output=None):
        """Integrates. Returns t (frame times: t0, every output.every steps,
        the end), fields (name -> (frames, *grid) array), parameter_fields
        (name -> grid array), coordinates (axis -> cell centres), cells,
        origin, spacing, names, objective (J of the final fields, or None),
        summary (steps, final_time, krylov_iterations, final_integrals,
        final_min, final_max, …). ``output``: also write the HDF5 file
        ``costate run -o`` writes (the input's output.file is not used)."""
        return Result(**self._core.run(output or ""))

    def sensitivity(self, output=None):
        """J and its discrete-adjoint gradient (the file's checkpointing):
        objective, names and gradient (dJ/d<scalar parameter>, an array) and
        gradient_dict, gradient_fields (parameter field -> dJ/d<field> per
        cell, grid array), gradient_initial_state (field -> dJ/du(t0), grid
        array), the parameter fields, the counts (steps, forward_steps,
        recomputed_steps, checkpoints, krylov_iterations,
        adjoint_krylov_iterations). ``output``: also write the HDF5 file of
        ``costate sensitivity -o``."""
        d = self._core.sensitivity(output or "")
        d["gradient_dict"] = dict(zip(d["names"], d["gradient"].tolist()))
        return Result(**d)
