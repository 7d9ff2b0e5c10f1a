"""`cmake --install` puts the package in PREFIX/COSTATE_PYTHON_INSTALL_DIR (for
/usr and /usr/local on Debian's sys.path), and the installed module (its
RPATH relative to itself) imports and runs from there, without the build
tree on the path."""

import os
import subprocess
import sys


def test_installed_module_imports_and_runs(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", os.environ["COSTATE_BINARY_DIR"], "--prefix", str(prefix)],
                   check=True, stdout=subprocess.DEVNULL)
    site = prefix / os.environ["COSTATE_PYTHON_INSTALL_DIR"]
    assert (site / "costate" / "plot.py").is_file()
    example = os.path.join(os.environ["COSTATE_SOURCE_DIR"], "data", "examples", "lorenz.yaml")
    code = ("import costate, sys; assert costate.__file__.startswith(sys.argv[1]), costate.__file__; "
            "s = costate.load(sys.argv[2]).run(); print(s.y.shape)")
    # Only the prefix's package directory on the path (not build/python).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "OPAL_"))}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code, str(site), example], env=env,
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("(")
