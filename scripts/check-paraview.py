#!/usr/bin/env python3
"""Opens pde::FieldWriter's XDMF output in ParaView and checks what it shows.

A manual check (ParaView is not a CI dependency; on Debian/Ubuntu:
`apt-get install python3-paraview`). Writes the cases with the driver, then
opens every DIR/pv_<dim>d_np<ranks>.xmf (and pv_static_3d_np<ranks>.xmf:
static fields only, no time) with each of ParaView's XDMF readers
and checks, per file and reader:
  - the time steps are the written times (0, 0.25, 0.6; none when static);
  - the dataset is the grid: bounds = the extent, cells = n_x n_y n_z,
    points = (n_x+1)(n_y+1)(n_z+1) (the mesh points are the cell corners);
  - the cell arrays u, v, kappa, grad_a, grad_b exist with one tuple per cell;
  - at every cell, each array equals its formula at the cell's centre as
    ParaView places the cell (so swapped axes, a wrong origin or spacing, or
    node/cell confusion fail).
Prints PASS/FAIL per file and reader; the exit status is 1 if any failed.

  cmake --build BUILD --target pde_output_paraview_driver
  python3 scripts/check-paraview.py --driver BUILD/tests/pde/pde_output_paraview_driver \
      --ranks 1,2 DIR
(without --driver, the files already in DIR are checked). The cases below
must match tests/pde/output_paraview_driver.cpp.
"""
import argparse
import glob
import math
import os
import re
import subprocess
import sys

TIMES = [0.0, 0.25, 0.6]
# cells (x, y, z) and extent per axis; unused axes keep GridSpec's [0, 1].
CASES = {
    1: ((12, 1, 1), ((-1.0, 1.0), (0.0, 1.0), (0.0, 1.0))),
    2: ((12, 7, 1), ((-1.0, 1.0), (0.5, 1.5), (0.0, 1.0))),
    3: ((6, 5, 4), ((-1.0, 1.0), (0.5, 1.5), (2.0, 3.2))),
}
FIELDS = {
    "u": lambda x, y, z, t: x + 10.0 * y + 100.0 * z + 1000.0 * t,
    "v": lambda x, y, z, t: x * y - z + t,
    "kappa": lambda x, y, z, t: 1.0 + x - 2.0 * y + 3.0 * z,
    "grad_a": lambda x, y, z, t: x - y,
    "grad_b": lambda x, y, z, t: y + z,
}
READERS = ["XDMFReader", "Xdmf3ReaderS", "Xdmf3ReaderT"]
# Coordinates pass through 17-digit XML numbers and ParaView's origin +
# i * spacing; values reach ~1400 (u), so 1e-9 absolute + relative is far
# above that rounding (~1e-13) and far below one cell's change in any
# formula (>= 0.1), which a transposition or a half-cell shift would cause.
TOL = 1e-9


def run_driver(driver, ranks, out):
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        cmd = [driver, out] if r == 1 else [
            "mpiexec", "--allow-run-as-root", "--oversubscribe", "-n", str(r), driver, out]
        subprocess.run(cmd, check=True)


def leaves(data):
    """The datasets of a (possibly composite) data object."""
    if data is None:
        return []
    if data.IsA("vtkCompositeDataSet"):
        out = []
        it = data.NewIterator()
        it.InitTraversal()
        while not it.IsDoneWithTraversal():
            out.append(it.GetCurrentDataObject())
            it.GoToNextItem()
        return out
    return [data]


def check_file(xmf, reader_name):
    """Returns a list of problems (empty: pass)."""
    from paraview import simple
    m = re.search(r"pv_(static_)?(\d)d_np(\d+)\.xmf$", xmf)
    static = m.group(1) is not None
    dim = int(m.group(2))
    times = [] if static else TIMES
    fields = {k: f for k, f in FIELDS.items() if not static or k not in ("u", "v")}
    cells, extent = CASES[dim]
    ncells = cells[0] * cells[1] * cells[2]
    npoints = (cells[0] + 1) * (cells[1] + 1) * (cells[2] + 1)
    problems = []
    reader = getattr(simple, reader_name)(FileName=[xmf]) if reader_name != "XDMFReader" else \
        simple.XDMFReader(FileNames=[xmf])
    reader.UpdatePipelineInformation()
    steps = list(reader.TimestepValues) if reader.TimestepValues is not None else []
    if isinstance(reader.TimestepValues, float):
        steps = [reader.TimestepValues]
    if len(steps) != len(times) or any(abs(a - b) > TOL for a, b in zip(steps, times)):
        problems.append(f"time steps {steps}, expected {times}")
    for t in times or [0.0]:
        reader.UpdatePipeline(t)
        data = reader.GetClientSideObject().GetOutputDataObject(0)
        blocks = [b for b in leaves(data) if b is not None and b.GetNumberOfCells() > 0]
        if len(blocks) != 1:
            problems.append(f"t={t}: {len(blocks)} non-empty datasets ({data.GetClassName()}), expected 1")
            continue
        ds = blocks[0]
        if ds.GetNumberOfCells() != ncells or ds.GetNumberOfPoints() != npoints:
            problems.append(f"t={t}: {ds.GetNumberOfCells()} cells / {ds.GetNumberOfPoints()} points, "
                            f"expected {ncells} / {npoints} ({ds.GetClassName()})")
            continue
        b = ds.GetBounds()
        want = [v for ax in extent for v in ax]
        if any(abs(p - q) > TOL for p, q in zip(b, want)):
            problems.append(f"t={t}: bounds {tuple(round(v, 12) for v in b)}, expected {tuple(want)}")
        cd = ds.GetCellData()
        if static and cd.GetArray("u") is not None:
            problems.append("a static-only file shows a frame array 'u'")
        centres = []
        cb = [0.0] * 6
        for c in range(ncells):
            ds.GetCellBounds(c, cb)
            centres.append((0.5 * (cb[0] + cb[1]), 0.5 * (cb[2] + cb[3]), 0.5 * (cb[4] + cb[5])))
        for name, f in fields.items():
            arr = cd.GetArray(name)
            if arr is None:
                names = [cd.GetArrayName(i) for i in range(cd.GetNumberOfArrays())]
                problems.append(f"t={t}: no cell array '{name}' (cell arrays: {names})")
                continue
            if arr.GetNumberOfTuples() != ncells or arr.GetNumberOfComponents() != 1:
                problems.append(f"t={t}: '{name}' has {arr.GetNumberOfTuples()} x "
                                f"{arr.GetNumberOfComponents()} values, expected {ncells} x 1")
                continue
            worst, where = 0.0, None
            for c, (x, y, z) in enumerate(centres):
                expect = f(x, y, z, t)
                err = abs(arr.GetValue(c) - expect) / (1.0 + abs(expect))
                if err > worst:
                    worst, where = err, (c, (x, y, z), arr.GetValue(c), expect)
            if worst > TOL:
                c, xyz, got, expect = where
                problems.append(f"t={t}: '{name}' at cell {c} centre {tuple(round(v, 6) for v in xyz)}: "
                                f"{got!r}, expected {expect!r} (worst relative error {worst:.3g})")
    simple.Delete(reader)
    return problems


def reverse_triplet(text, name):
    """Reverses the three numbers of the DataItem called `name` (z y x <-> x y z)."""
    return re.sub(r'(<DataItem Name="%s"[^>]*>)([^<]+)(<)' % name,
                  lambda m: m.group(1) + " ".join(reversed(m.group(2).split())) + m.group(3), text)


# Broken variants of a 3-D sidecar that the check must reject (--self-test):
# proves it can fail on each kind of mistake it is meant to catch.
MUTATIONS = {
    "origin and spacing in (x, y, z) order": lambda s: reverse_triplet(reverse_triplet(s, "Origin"), "Spacing"),
    "topology dimensions = cells, not nodes": lambda s: s.replace('Dimensions="5 6 7"', 'Dimensions="4 5 6"'),
    "a frame at a different time": lambda s: s.replace('<Time Value="0.25"/>', '<Time Value="0.3"/>'),
    "u reads v's dataset": lambda s: s.replace("/frames/000001/u<", "/frames/000001/v<"),
    "origin shifted by half a cell (centres as origin)": lambda s: re.sub(
        r'(<DataItem Name="Origin"[^>]*>)[^<]+<', r'\g<1>2.15 0.6 -0.83333333333333337<', s),
}


def self_test(directory, readers):
    """Every mutation of pv_3d_np1.xmf must FAIL with every reader."""
    src = os.path.join(directory, "pv_3d_np1.xmf")
    text = open(src).read()
    ok = True
    for i, (what, mutate) in enumerate(MUTATIONS.items()):
        # Same directory (the sidecar's dataset references are relative); the
        # name keeps the pv_3d_np1 case so check_file knows the grid.
        bad = os.path.join(directory, f"mutant{i}_pv_3d_np1.xmf")
        broken = mutate(text)
        assert broken != text, what
        with open(bad, "w") as f:
            f.write(broken)
        for reader in readers:
            try:
                problems = check_file(bad, reader)
            except Exception as e:
                problems = [f"{type(e).__name__}: {e}"]
            caught = bool(problems)
            ok &= caught
            print(f"{'PASS' if caught else 'FAIL'}  self-test: {what!r} rejected by {reader}"
                  + (f" ({problems[0][:90]})" if caught else " -- NOT DETECTED"))
        os.remove(bad)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="directory with pv_<dim>d_np<ranks>.xmf/.h5 (written by --driver)")
    ap.add_argument("--driver", help="pde_output_paraview_driver: write the files first")
    ap.add_argument("--ranks", default="1,2", help="rank counts to run the driver on (default 1,2)")
    ap.add_argument("--readers", default=",".join(READERS), help="ParaView readers to try")
    ap.add_argument("--self-test", action="store_true",
                    help="also check that broken variants of pv_3d_np1.xmf are rejected")
    args = ap.parse_args()
    if args.driver:
        run_driver(args.driver, [int(r) for r in args.ranks.split(",")], args.dir)
    from paraview import simple  # noqa: F401  (imported late: --help works without ParaView)
    from paraview import servermanager
    version = servermanager.vtkSMProxyManager.GetParaViewSourceVersion()
    print(f"{version}")
    files = sorted(glob.glob(os.path.join(args.dir, "pv_*d_np*.xmf")))
    if not files:
        print(f"FAIL: no pv_*d_np*.xmf in {args.dir}")
        return 1
    failed = 0
    for xmf in files:
        for reader in args.readers.split(","):
            try:
                problems = check_file(xmf, reader)
            except Exception as e:  # a reader that cannot open the file is a failure, not a crash
                problems = [f"{type(e).__name__}: {e}"]
            status = "PASS" if not problems else "FAIL"
            failed += bool(problems)
            print(f"{status}  {os.path.basename(xmf):21s} {reader}")
            for p in problems[:6]:
                print(f"        {p}")
            if len(problems) > 6:
                print(f"        ... {len(problems) - 6} more")
    if args.self_test and not self_test(args.dir, args.readers.split(",")):
        print("FAIL: the self-test let a broken sidecar through")
        failed += 1
    print(f"{'PASS' if not failed else 'FAIL'}: {len(files)} files x {len(args.readers.split(','))} "
          f"readers, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
