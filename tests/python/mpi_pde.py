"""Run under mpiexec -n N by test_pde_mpi.py: every rank loads the PDE input
and calls run() and sensitivity() (mpi4py initialises MPI first; costate
then uses MPI_COMM_WORLD). Rank 0 receives the grid arrays and the other
ranks None; the values must agree with the serial command line's (the HDF5
files and JSON given) to RANK_AGREEMENT: the decomposition changes the
block preconditioner and so the Krylov iterates, and the sums' order.

    mpiexec -n 2 python3 mpi_pde.py input.yaml run.h5 sensitivity.h5 sensitivity.json
"""

import json
import sys

import h5py
import numpy as np
from mpi4py import MPI

import costate

# The KSP solves are converged to rtol 1e-12 (ThetaOptions' default; the
# example sets no ksp_rtol) and the block preconditioner differs between 1
# and 2 ranks: measured 2-rank against serial, ≤ 1.1e-14 of each array's
# largest magnitude (dJ/du0; frames 2.2e-16, dJ/dκ 8.2e-15, J 9.7e-16).
# 1e-12 (the CLI's rank-agreement bound, tests/cli/cli_test.cpp) leaves two
# orders of magnitude and fails any wrong or misplaced cell (the fields vary
# by O(1) of their maximum over the grid).
RANK_AGREEMENT = 1e-12


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and np.all(
        np.abs(got - want) <= RANK_AGREEMENT * np.max(np.abs(want)))


def main(path, run_h5, sens_h5, sens_json):
    world = MPI.COMM_WORLD
    problems = []
    p = costate.load(path)
    r = p.run()
    s = p.sensitivity()
    if r.summary["ranks"] != world.size:
        problems.append("run on %d ranks, not %d" % (r.summary["ranks"], world.size))
    mine = (r.objective, r.t.tolist(), s.objective, s.gradient.tolist())
    if any(other != mine for other in world.allgather(mine)):
        problems.append("the numbers differ between ranks")
    with open(sens_json) as f:
        ref = json.load(f)
    if not close(s.objective, ref["objective"]) or not close(s.gradient, list(ref["gradient"].values())):
        problems.append("sensitivity: J %r dJ/dq %r; serial CLI %r %r"
                        % (s.objective, s.gradient_dict, ref["objective"], ref["gradient"]))
    arrays = [r.fields["u"], r.parameter_fields["kappa"], s.gradient_fields["kappa"],
              s.gradient_initial_state["u"]]
    if world.rank == 0:
        with h5py.File(run_h5) as f:
            want = np.array([f["frames"][k]["u"][0] for k in sorted(f["frames"])])
            if not close(r.fields["u"], want):
                problems.append("run: the frames differ from the serial CLI's")
            if not np.array_equal(r.parameter_fields["kappa"], f["fields/kappa/kappa"][0]):
                problems.append("run: kappa differs from the serial CLI's")  # evaluated cellwise: exact
        with h5py.File(sens_h5) as f:
            if not close(s.gradient_fields["kappa"], f["fields/dJ_dkappa/dJ_dkappa"][0]):
                problems.append("sensitivity: dJ/dkappa differs from the serial CLI's")
            if not close(s.gradient_initial_state["u"], f["fields/dJ_du0/dJ_du0"][0]):
                problems.append("sensitivity: dJ/du0 differs from the serial CLI's")
        if any(a is None or a.shape[-2:] != (24, 24) for a in arrays):
            problems.append("rank 0 did not receive the (24, 24) arrays")
    elif any(a is not None for a in arrays):
        problems.append("rank %d received arrays; expected None" % world.rank)
    for m in problems:
        print("rank %d: %s" % (world.rank, m), flush=True)
    print("rank %d of %d: %s" % (world.rank, world.size, "FAILED" if problems else "ok"), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
