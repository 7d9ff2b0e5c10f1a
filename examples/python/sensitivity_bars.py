"""A sensitivity bar chart: dJ/dp of Lotka–Volterra by costate's discrete adjoint.

    x' = a x - b x y,   y' = -c y + d x y,   x(0) = 1, y(0) = 1

J (data/examples/lotka_volterra_equations.yaml) is a terminal term, an
integral term and a least-squares misfit against observations; its gradient
with respect to a, b, c, d and the initial state comes from one adjoint sweep
(binomial checkpointing). The bars are drawn with matplotlib and saved as
PNG (the first argument, default sensitivity_bars.png).

Sample runs:
    PYTHONPATH=build/python /usr/bin/python3 examples/python/sensitivity_bars.py
    PYTHONPATH=build/python /usr/bin/python3 examples/python/sensitivity_bars.py out.png
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import costate  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "data", "examples", "lotka_volterra_equations.yaml")
out = sys.argv[1] if len(sys.argv) > 1 else "sensitivity_bars.png"

s = costate.load(path).sensitivity()
labels = s.names + [n + "(t0)" for n in s.state_names]
values = list(s.gradient) + list(s.gradient_initial_state)

fig, ax = plt.subplots(figsize=(6, 4))
ax.bar(labels, values, color=["C0"] * len(s.names) + ["C1"] * len(s.state_names))
ax.axhline(0.0, color="black", lw=0.8)
ax.set_xlabel("parameter / initial state")
ax.set_ylabel("dJ/dp")
ax.set_title("J = %.8g, gradient by %s" % (s.objective, s.method))
fig.tight_layout()
fig.savefig(out)

for name, v in zip(labels, values):
    print("  dJ/d%-8s %20.12g" % (name, v))
print("wrote", out)
