"""A PEtab problem from Python under mpiexec with mpi4py (mpi_petab.py on
2 ranks): every rank calls evaluate() and calibrate(starts=4) and gets the
same result, equal bitwise to the serial command line's (petab::evaluate's
sums are rank-count independent to the bit; each start is fitted serially
on its rank). This process does not import costate: it starts the CLI and
mpiexec as plain child processes."""

import json
import os
import subprocess
import sys

import pytest

from cli_support import cli_env

CLI = os.environ["COSTATE_CLI"]
MPIEXEC = os.environ.get("COSTATE_MPIEXEC", "")
MPIEXEC_FLAGS = os.environ.get("COSTATE_MPIEXEC_FLAGS", "").split()
CASE = os.path.join(os.environ.get("COSTATE_PETAB_DIR", ""), "test-suite-v1", "0002", "_0002.yaml")
HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = 2


def have_mpi4py():
    return subprocess.run([sys.executable, "-c", "import mpi4py"]).returncode == 0


@pytest.mark.skipif(not os.path.isfile(CASE),
                    reason="PEtab test suite not found at %s (configure with -DCOSTATE_PETAB_DIR)" % CASE)
@pytest.mark.skipif(not MPIEXEC, reason="no mpiexec (COSTATE_MPIEXEC)")
@pytest.mark.skipif(not have_mpi4py(), reason="mpi4py is missing (apt-get install python3-mpi4py)")
def test_every_rank_gets_the_serial_result(tmp_path):
    refs = []
    for name, args in (("sensitivity", ["sensitivity", CASE]),
                       ("calibrate", ["calibrate", CASE, "--starts", "4", "--seed", "3"])):
        r = subprocess.run([CLI, *args, "--json", "-q"], env=cli_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        path = tmp_path / (name + ".json")
        path.write_text(r.stdout)
        json.loads(r.stdout)
        refs.append(str(path))
    r = subprocess.run([MPIEXEC, *MPIEXEC_FLAGS, "-n", str(RANKS), sys.executable,
                        os.path.join(HERE, "mpi_petab.py"), CASE, *refs],
                       env=cli_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(RANKS):
        assert "rank %d of %d: ok" % (rank, RANKS) in r.stdout, r.stdout + r.stderr
