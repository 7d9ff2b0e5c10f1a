"""`import costate` from an interpreter other than the one it was built for:
a venv of the build's own executable without its site-packages (so without
NumPy) stands for the pyenv or venv python3 a user may have first on PATH.
The import fails with a message naming the interpreter to use; from the
build's interpreter it succeeds."""
import os
import subprocess
import sys
import tempfile

import pytest

import costate


def _build_record():
    from costate import _build
    return _build


def test_the_build_records_its_interpreter():
    b = _build_record()
    assert os.path.realpath(sys.executable) == b.python_executable_real
    assert b.python_version == "%d.%d" % sys.version_info[:2]
    assert os.path.realpath(sys.prefix) == os.path.realpath(b.python_prefix)
    assert costate._costate is not None, "the extension loads in the interpreter it was built for"


def test_another_interpreter_is_told_which_one_to_use():
    with tempfile.TemporaryDirectory() as d:
        venv = os.path.join(d, "other")
        made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                              capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip("cannot make a venv here: " + made.stderr.strip())
        other = os.path.join(venv, "bin", "python")
        probe = subprocess.run([other, "-c", "import numpy"], capture_output=True)
        if probe.returncode == 0:
            pytest.skip("the venv sees NumPy (a user site?): not another interpreter's view")
        r = subprocess.run([other, "-c", "import costate"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(costate.__file__))))
        assert r.returncode != 0, r.stdout
        built_for = _build_record().python_executable
        assert "costate was built for " + built_for in r.stderr, r.stderr
        assert "Run `%s` instead" % built_for in r.stderr, r.stderr
        assert "-DCOSTATE_PYTHON_EXECUTABLE=" + other in r.stderr, r.stderr
