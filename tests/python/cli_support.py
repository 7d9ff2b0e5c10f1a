"""What the python tests share: running the costate command line from a
process that may have imported costate (and so started an MPI singleton)."""

import json
import os
import subprocess

CLI = os.environ["COSTATE_CLI"]


def cli_env():
    """The environment without the MPI singleton's variables: the module's
    singleton exports OMPI_*/PMIX_* variables, and a child costate (or
    mpiexec) must not take them for its own job."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMIX_", "OPAL_"))}


def cli_json(*args):
    """`costate ARGS --json -q`, parsed; exit status 0 or 2 (not converged)."""
    r = subprocess.run([CLI, *args, "--json", "-q"], env=cli_env(), capture_output=True, text=True)
    assert r.returncode in (0, 2), r.stderr
    return json.loads(r.stdout)


def cli_error(*args):
    """The message of a `costate ARGS` that fails (exit status 1)."""
    r = subprocess.run([CLI, *args, "-q"], env=cli_env(), capture_output=True, text=True)
    assert r.returncode == 1
    prefix = "costate: error: "
    assert r.stderr.startswith(prefix), r.stderr
    return r.stderr[len(prefix):].strip()
