#!/usr/bin/python3
"""Synthetic sensor data for data/examples/heat2d_inversion.yaml.

Runs `costate run` on the example (its pde.parameter_fields.kappa is the
truth), reads u at the final frame from the HDF5 output, interpolates it
bilinearly between cell centres at a 7 x 7 lattice of sensors (the rule of
pde::Observations: along an axis, a point between the boundary and the first
centre takes that centre's value), adds Gaussian noise of standard deviation
SIGMA (numpy's default_rng with a fixed seed) and writes
heat2d_inversion_sensors.csv next to the example (x,y,t,value,sigma).

Usage: /usr/bin/python3 make_heat2d_inversion_sensors.py [path/to/costate]
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

SENSORS_PER_AXIS = 7
SIGMA = 0.005
SEED = 20261201

here = os.path.dirname(os.path.abspath(__file__))
example = os.path.join(here, "heat2d_inversion.yaml")
costate = sys.argv[1] if len(sys.argv) > 1 else "costate"

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "truth.h5")
    subprocess.run([costate, "run", example, "-o", out, "-q"], check=True, stdout=subprocess.DEVNULL)
    with h5py.File(out, "r") as f:
        frames = sorted(f["frames"].keys())
        last = f["frames"][frames[-1]]
        t_end = float(last.attrs["time"])
        u = np.array(last["u"])[0]  # (n_y, n_x)
        origin = np.array(f.attrs["origin"])
        spacing = np.array(f.attrs["spacing"])

ny, nx = u.shape


def axis(x, a, h, n):
    """Cells and weights of the linear interpolation along one axis."""
    s = (x - a) / h - 0.5
    i0 = int(np.floor(s))
    f = s - i0
    if i0 < 0:
        return (0, 0), (1.0, 0.0)
    if i0 + 1 > n - 1:
        return (n - 1, n - 1), (1.0, 0.0)
    return (i0, i0 + 1), (1.0 - f, f)


rng = np.random.default_rng(SEED)
rows = []
for b in range(SENSORS_PER_AXIS):
    for a in range(SENSORS_PER_AXIS):
        x = (a + 0.5) / SENSORS_PER_AXIS
        y = (b + 0.5) / SENSORS_PER_AXIS
        (i0, i1), (wi0, wi1) = axis(x, origin[0], spacing[0], nx)
        (j0, j1), (wj0, wj1) = axis(y, origin[1], spacing[1], ny)
        value = (wj0 * (wi0 * u[j0, i0] + wi1 * u[j0, i1]) + wj1 * (wi0 * u[j1, i0] + wi1 * u[j1, i1]))
        rows.append((x, y, t_end, value + SIGMA * rng.standard_normal(), SIGMA))

path = os.path.join(here, "heat2d_inversion_sensors.csv")
with open(path, "w") as f:
    f.write("# Synthetic sensors of u at t = %.6g for heat2d_inversion.yaml (make_heat2d_inversion_sensors.py:\n"
            "# the example's kappa, a %d x %d lattice, Gaussian noise sigma = %g, seed %d)\n"
            % (t_end, SENSORS_PER_AXIS, SENSORS_PER_AXIS, SIGMA, SEED))
    f.write("x,y,t,value,sigma\n")
    for r in rows:
        f.write("%.17g,%.17g,%.17g,%.17g,%.17g\n" % r)
print("wrote %s (%d sensors)" % (path, len(rows)))
