"""PDE inputs from Python under mpiexec with mpi4py (mpi_pde.py on 2 ranks):
every rank calls run() and sensitivity(), rank 0 receives the arrays, the
others None, and the values agree with the serial command line's to the
tolerance mpi_pde.py names (the decomposition differs, so the Krylov
iterates do). This process does not import costate: it starts the CLI and
mpiexec as plain child processes."""

import os
import subprocess
import sys

import pytest

from cli_support import cli_env

CLI = os.environ["COSTATE_CLI"]
MPIEXEC = os.environ.get("COSTATE_MPIEXEC", "")
MPIEXEC_FLAGS = os.environ.get("COSTATE_MPIEXEC_FLAGS", "").split()
HEAT = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "examples", "heat2d_kappa.yaml")
HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = 2


def have_mpi4py():
    return subprocess.run([sys.executable, "-c", "import mpi4py"]).returncode == 0


@pytest.mark.skipif(not MPIEXEC, reason="no mpiexec (COSTATE_MPIEXEC)")
@pytest.mark.skipif(not have_mpi4py(), reason="mpi4py is missing (apt-get install python3-mpi4py)")
def test_two_ranks_agree_with_the_serial_cli(tmp_path):
    run_h5, sens_h5, sens_json = (str(tmp_path / n) for n in ("run.h5", "sens.h5", "sens.json"))
    for args, out in ((["run", HEAT, "-o", run_h5], None),
                      (["sensitivity", HEAT, "-o", sens_h5, "--json"], sens_json)):
        r = subprocess.run([CLI, *args, "-q"], env=cli_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        if out:
            with open(out, "w") as f:
                f.write(r.stdout)
    r = subprocess.run([MPIEXEC, *MPIEXEC_FLAGS, "-n", str(RANKS), sys.executable,
                        os.path.join(HERE, "mpi_pde.py"), HEAT, run_h5, sens_h5, sens_json],
                       env=cli_env(), capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(RANKS):
        assert "rank %d of %d: ok" % (rank, RANKS) in r.stdout, r.stdout + r.stderr
