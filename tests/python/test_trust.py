"""Issue 35 through the Python module: deep nesting raises, never crashes.

An expression nested 10^5 levels deep (parentheses, unary minus signs) used to
overflow the parser's stack and take the interpreter with it; the parser now
refuses nesting past its bound with costate.Error, naming the nesting.
"""
import os
import subprocess
import sys

import pytest

import costate

DEPTH = 100_000  # the depth: 10^5 levels


def model_with(expression):
    return {"model": {"states": ["x"], "equations": {"x": expression}},
            "parameters": {"k": 1.0}, "initial_state": {"x": 1.0},
            "time": {"start": 0.0, "end": 1.0}}


@pytest.mark.parametrize("expression", [
    "(" * DEPTH + "-k*x" + ")" * DEPTH,
    "-" * DEPTH + "k*x",
    "sin(" * DEPTH + "x" + ")" * DEPTH,
], ids=["parentheses", "unary_minus", "calls"])
def test_deep_nesting_raises_a_python_exception(expression):
    with pytest.raises(costate.Error, match="nesting deeper than"):
        costate.load(model_with(expression)).run()


def test_deep_nesting_leaves_the_interpreter_alive():
    # In a child interpreter, so that a crash (SIGSEGV) shows as its exit
    # status instead of ending this test run.
    code = ("import costate\n"
            "d = {'model': {'states': ['x'], 'equations': {'x': '(' * %d + 'x' + ')' * %d}},"
            " 'initial_state': {'x': 1.0}, 'time': {'start': 0.0, 'end': 1.0}}\n"
            "try:\n"
            "    costate.load(d).run()\n"
            "except costate.Error as e:\n"
            "    print('refused:', str(e))\n" % (DEPTH, DEPTH))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "refused:" in r.stdout and "nesting deeper than" in r.stdout
