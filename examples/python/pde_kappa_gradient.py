"""A PDE κ-gradient image: dJ/dκ of a 2-D heat equation by costate's discrete adjoint.

    u_t = ∇·(κ ∇u) + q0 exp(-|x - c|²/(2·0.1²)),   J = ½ ∫ (u(T) - d)² dx

(data/examples/heat2d_kappa.yaml: 24 × 24 cells, κ(x, y) a parameter field,
binomial checkpointing). ``sensitivity()`` returns dJ/dκ as a NumPy array
shaped like the grid, (ny, nx) with x the last index, so ``imshow(...,
origin="lower", extent=...)`` puts x across and y up. The figure shows κ
and dJ/dκ side by side, each with a colour bar, and is saved as PNG (the
first argument, default pde_kappa_gradient.png).

Sample runs:
    PYTHONPATH=build/python /usr/bin/python3 examples/python/pde_kappa_gradient.py
    mpiexec -n 2 env PYTHONPATH=build/python /usr/bin/python3 examples/python/pde_kappa_gradient.py
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import costate  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "data", "examples", "heat2d_kappa.yaml")
out = sys.argv[1] if len(sys.argv) > 1 else "pde_kappa_gradient.png"

p = costate.load(path)
s = p.sensitivity()
if costate.mpi_rank_size()[0] != 0:  # under mpiexec: rank 0 holds the arrays
    sys.exit(0)
kappa, grad = s.parameter_fields["kappa"], s.gradient_fields["kappa"]
x, y, h = s.coordinates["x"], s.coordinates["y"], s.spacing
extent = [x[0] - h[0] / 2, x[-1] + h[0] / 2, y[0] - h[1] / 2, y[-1] + h[1] / 2]

fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, a, title, label, cmap in ((axes[0], kappa, "conductivity κ(x, y)", "κ", "viridis"),
                                  (axes[1], grad, "dJ/dκ (per cell)", "dJ/dκ", "RdBu_r")):
    lim = np.max(np.abs(a)) if cmap == "RdBu_r" else None
    im = ax.imshow(a, origin="lower", extent=extent, cmap=cmap,
                   vmin=-lim if lim else None, vmax=lim)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label=label)
fig.suptitle("J = %.8g, dJ/dq0 = %.6g (discrete adjoint, %s)"
             % (s.objective, s.gradient_dict["q0"], s.checkpointing))
fig.tight_layout()
fig.savefig(out)

i, j = np.unravel_index(np.argmax(np.abs(grad)), grad.shape)
print("J = %.12g" % s.objective)
print("dJ/dq0 = %.12g" % s.gradient_dict["q0"])
print("|dJ/dkappa| is largest at x = %.4f, y = %.4f: %.6g" % (x[j], y[i], grad[i, j]))
print("wrote", out)
