"""Run under mpiexec -n N by test_petab_mpi.py: every rank loads the PEtab
problem, evaluates it and calibrates it from several starts (mpi4py
initialises MPI first; costate then uses MPI_COMM_WORLD). Each rank checks
that its results equal every other rank's (allgather) and the serial
command line's (the JSON files given), bitwise, and exits 1 otherwise.

    mpiexec -n 2 python3 mpi_petab.py problem.yaml sensitivity.json calibrate.json
"""

import json
import sys

from mpi4py import MPI

import costate


def main(yaml, sensitivity_json, calibrate_json):
    world = MPI.COMM_WORLD
    with open(sensitivity_json) as f:
        ref = json.load(f)
    with open(calibrate_json) as f:
        ref_cal = json.load(f)
    p = costate.load(yaml)
    rank, size = costate.mpi_rank_size()
    problems = []
    if (rank, size) != (world.rank, world.size):
        problems.append("costate sees rank %d of %d, mpi4py %d of %d"
                        % (rank, size, world.rank, world.size))
    r = p.evaluate()
    mine = (r.llh, r.chi2, r.gradient.tolist(), r.simulations.tolist())
    if any(other != mine for other in world.allgather(mine)):
        problems.append("evaluate differs between ranks")
    if r.llh != ref["llh"] or r.chi2 != ref["chi2"] or r.gradient_dict != ref["gradient"]:
        problems.append("evaluate: llh %r chi2 %r gradient %r; the CLI's: %r %r %r"
                        % (r.llh, r.chi2, r.gradient_dict, ref["llh"], ref["chi2"], ref["gradient"]))
    c = p.calibrate(starts=4, seed=3)  # the starts dealt over the ranks
    mine = (c.waterfall.tolist(), c.best_x.tolist(), c.ranks)
    if any(other != mine for other in world.allgather(mine)):
        problems.append("calibrate differs between ranks")
    if size > 1 and sorted(set(c.ranks)) != list(range(min(size, 4))):
        problems.append("the starts ran on ranks %r, not dealt over %d" % (c.ranks, size))
    want = [w["objective"] for w in ref_cal["waterfall"]]
    if c.waterfall.tolist() != want or c.best_x_dict != ref_cal["parameters"]:
        problems.append("calibrate: waterfall %r best %r; the CLI's: %r %r"
                        % (c.waterfall.tolist(), c.best_x_dict, want, ref_cal["parameters"]))
    for p_ in problems:
        print("rank %d: %s" % (world.rank, p_), flush=True)
    print("rank %d of %d: %s" % (world.rank, world.size, "FAILED" if problems else "ok"), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
