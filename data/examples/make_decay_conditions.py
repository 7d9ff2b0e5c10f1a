#!/usr/bin/python3
"""Synthetic data for data/examples/decay_conditions.yaml.

A dose D of a drug x decays into an effect y that decays in turn,
    x' = -k x,   y' = k x - m y,   x(0) = D, y(0) = 0,
with the closed form x = D e^{-kt}, y = D k (e^{-kt} - e^{-mt}) / (m - k).
Five conditions: doses 1, 2, 4 and 8 at the rate k, and dose 4 under an
inhibitor that slows the first step to k_i. Truth k = 0.5, m = 0.2,
k_i = 0.15. Observations of x and y at t = 0.5, 1, ..., 10 with Gaussian
noise of standard deviation SIGMA (numpy's default_rng, seed SEED), one CSV
per condition in decay_conditions/, and the table of conditions
decay_conditions/conditions.csv (the same conditions as the inline rows of
the example).

Usage: /usr/bin/python3 make_decay_conditions.py
"""
import os

import numpy as np

K, M, K_I = 0.5, 0.2, 0.15
SIGMA = 0.02
SEED = 20261206
CONDITIONS = [("dose1", 1.0, K), ("dose2", 2.0, K), ("dose4", 4.0, K), ("dose8", 8.0, K),
              ("inhibited", 4.0, K_I)]

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decay_conditions")
rng = np.random.default_rng(SEED)
t = np.arange(1, 21) * 0.5
for name, dose, k in CONDITIONS:
    x = dose * np.exp(-k * t)
    y = dose * k * (np.exp(-k * t) - np.exp(-M * t)) / (M - k)
    x = x + SIGMA * rng.standard_normal(t.size)
    y = y + SIGMA * rng.standard_normal(t.size)
    with open(os.path.join(here, name + ".csv"), "w") as f:
        f.write("t,x,y\n")
        for row in zip(t, x, y):
            f.write("%.2f,%.17g,%.17g\n" % row)
with open(os.path.join(here, "conditions.csv"), "w") as f:
    f.write("id,dose,k,data\n")
    for name, dose, k in CONDITIONS:
        f.write("%s,%g,%s,%s.csv\n" % (name, dose, "k_i" if k == K_I else "", name))
