#!/usr/bin/env python3
"""Documentation as tests: every command and code block of the pages given
that a user would run is run, and the numbers it prints are compared with
the page's, to the digits the page shows.

A page's fenced blocks, by kind:
  * commands — ```sh / ```console blocks, and any block whose lines start
    with "$ " (the lines after a "$ " line, up to the next, are its printed
    output, compared in order; "..." lines stand for lines left out);
  * python — ```python blocks, run in order in one interpreter per page
    (a later block sees an earlier block's names);
  * C++ — ```cpp blocks with a main(): compiled by the build
    (tests/docs/CMakeLists.txt extracts them) and run;
  * yaml — parsed (a page's YAML must at least be YAML);
  * displays — blocks without a language and without "$ " lines (printed
    output, grammars): shown, not run.
An HTML comment right above a block's fence steers it:
  <!-- docs: no-run REASON -->   not meant to run (installs, fragments, placeholders)
  <!-- docs: slow -->            run only with --slow (ctest label slow)
  <!-- docs: replace A => B -->  run with the text A replaced by B (placeholders)
  <!-- docs: expect TEXT -->     the block prints TEXT (numbers to the digits shown)
  <!-- docs: exit N -->          the block's commands exit N (e.g. 2: a fit that did not converge)
  <!-- docs: check CODE -->      python run after the block, in its namespace
  <!-- docs: excerpt-of FILE -->  (yaml) every key and value of the block is FILE's
Any other C++ or python block without a main() or a marker fails: a block
is run or says why it is not.

Numbers followed by a time unit (s, ms, seconds) are not compared (they
are timings). Exit status 0 when every block passed; the summary line gives
the counts (blocks run / marked not-run / displays).
"""
import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

MARK = re.compile(r"^<!--\s*docs:\s*(\S+)\s*(.*?)\s*(-->)?\s*$")
NUM = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
TIMING = re.compile(r"^\s*(s|ms|seconds)\b")


class Block:
    def __init__(self, page, line, lang, text, marks):
        self.page, self.line, self.lang, self.text, self.marks = page, line, lang, text, marks

    @property
    def name(self):
        return "%s:%d" % (self.page, self.line)

    def kind(self):
        if "no-run" in self.marks:
            return "not-run"
        lines = self.text.splitlines()
        if self.lang in ("sh", "bash", "shell", "console") or any(l.startswith("$ ") for l in lines):
            return "commands"
        if self.lang == "python":
            return "python"
        if self.lang == "cpp":
            return "cpp" if "int main(" in self.text else "unmarked"
        if self.lang == "yaml":
            return "yaml"
        if self.lang == "":
            return "display"
        return "unmarked"


def parse(page, root):
    """The fenced blocks of `page` with the markers above each."""
    lines = open(os.path.join(root, page), encoding="utf-8").read().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        marks, j = {}, i - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        # Markers above the fence (a multi-line one ends with "-->").
        while j >= 0 and lines[j].rstrip().endswith("-->"):
            k = j
            while k >= 0 and not lines[k].lstrip().startswith("<!--"):
                k -= 1
            text = "\n".join(lines[k:j + 1]).strip()
            mm = re.match(r"^<!--\s*docs:\s*(\S+)\s*(.*?)\s*-->$", text, re.S)
            if not mm:
                break
            key, value = mm.group(1), mm.group(2)
            if key == "replace":
                marks.setdefault("replace", []).append(value)
            else:
                marks[key] = value
            j = k - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        text = "\n".join(lines[i + 1:end])
        for r in marks.get("replace", []):
            a, b = [x.strip() for x in r.split("=>", 1)]
            text = text.replace(a, os.path.expandvars(b))
        blocks.append(Block(page, i + 1, m.group(1), text, marks))
        i = end + 1
    return blocks


def tokens(line):
    """(text with numbers as #, [(number text, is timing)])."""
    nums, out, pos = [], [], 0
    for m in NUM.finditer(line):
        out.append(line[pos:m.start()])
        out.append("#")
        nums.append((m.group(0), bool(TIMING.match(line[m.end():]))))
        pos = m.end()
    out.append(line[pos:])
    return " ".join("".join(out).split()), nums


def close(shown, got):
    """`got` equals `shown` to the digits `shown` has."""
    if not re.search(r"[.eE]", shown):
        return float(shown) == float(got)
    mant, _, exp = shown.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    unit = 10.0 ** (-decimals + (int(exp) if exp else 0))
    return abs(float(got) - float(shown)) <= 0.5 * unit * (1 + 1e-9) + 1e-300


def line_matches(expected, actual):
    te, ne = tokens(expected)
    ta, na = tokens(actual)
    if te != ta or len(ne) != len(na):
        return False
    return all(timing or close(s, g) for (s, timing), (g, _) in zip(ne, na))


def compare(expected_lines, output):
    """Each expected line found in `output`, in order; the first one missing."""
    actual = output.splitlines()
    pos = 0
    for e in expected_lines:
        if e.strip() in ("", "...", "…") or e.strip().startswith("..."):
            continue
        while pos < len(actual) and not line_matches(e, actual[pos]):
            pos += 1
        if pos == len(actual):
            return e
        pos += 1
    return None


def subset(part, whole, where=""):
    """The first place where YAML `part` is not in `whole` (None: it is)."""
    if isinstance(part, dict):
        if not isinstance(whole, dict):
            return where or "(top)"
        for k, v in part.items():
            if k not in whole:
                return "%s%s (missing)" % (where + "." if where else "", k)
            bad = subset(v, whole[k], "%s%s" % (where + "." if where else "", k))
            if bad:
                return bad
        return None
    return None if part == whole else "%s: %r in the page, %r in the file" % (where, part, whole)


def shell_commands(block):
    """[(command, expected output lines)] of a command block."""
    lines = block.text.splitlines()
    prompted = any(l.startswith("$ ") for l in lines)
    out, i = [], 0
    while i < len(lines):
        l = lines[i]
        if prompted and not l.startswith("$ "):
            i += 1
            continue
        cmd = l[2:] if prompted else l
        while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd.rstrip()[:-1] + " " + lines[i]
        i += 1
        expected = []
        while prompted and i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        if cmd.strip() and not cmd.strip().startswith("#"):
            out.append((cmd, expected))
    return out


PY_DRIVER = r'''
import contextlib, io, json, sys, traceback
ns = {"__name__": "__main__"}
for block in json.load(sys.stdin):
    out = io.StringIO()
    ok, err = True, ""
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block["code"], block["name"], "exec"), ns)
            if block.get("check"):
                exec(compile(block["check"], block["name"] + " (check)", "exec"), ns)
    except BaseException:
        ok, err = False, traceback.format_exc()
    sys.__stdout__.write(json.dumps({"name": block["name"], "ok": ok, "out": out.getvalue(), "err": err}) + "\n")
    sys.__stdout__.flush()
'''


class Runner:
    def __init__(self, args):
        self.args = args
        self.failures = []
        self.counts = {"run": 0, "not-run": 0, "display": 0, "slow (skipped)": 0}
        self.work = tempfile.mkdtemp(prefix="costate_docs_")
        for entry in os.listdir(args.root):  # the checkout, read-only by links
            if entry not in (".git", "build") and not entry.startswith("build"):
                os.symlink(os.path.join(args.root, entry), os.path.join(self.work, entry))
        # `build/...` in a page: the build tree this test runs from.
        os.symlink(os.path.dirname(args.bin), os.path.join(self.work, "build"))
        bindir = os.path.join(self.work, ".bin")
        os.mkdir(bindir)
        os.symlink(args.python, os.path.join(bindir, "python3"))
        self.env = dict(os.environ, PATH=os.pathsep.join([args.bin, bindir, os.environ.get("PATH", "")]),
                        PYTHONPATH=args.pythonpath, MPLBACKEND="Agg")

    def fail(self, block, message):
        self.failures.append("%s: %s" % (block.name, message))
        print("FAIL %s: %s" % (block.name, message), flush=True)

    def run_commands(self, block):
        for cmd, expected in shell_commands(block):
            start = time.time()
            # stdout and stderr as a terminal shows them (the settings echo is on stderr)
            r = subprocess.run(cmd, shell=True, cwd=self.work, env=self.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=self.args.timeout)
            if r.returncode != int(block.marks.get("exit", "0")):
                return self.fail(block, "`%s` exited %d:\n%s" % (cmd, r.returncode, r.stdout[-2000:]))
            missing = compare(expected, r.stdout)
            if missing is not None:
                return self.fail(block, "`%s` did not print\n    %s\n  it printed:\n%s" % (cmd, missing, r.stdout[-3000:]))
            print("ok   %s: %s (%.1f s)" % (block.name, cmd, time.time() - start), flush=True)

    def run_python(self, blocks):
        payload = [{"name": b.name, "code": b.text, "check": b.marks.get("check", "")} for b in blocks]
        r = subprocess.run([self.args.python, "-c", PY_DRIVER], input=json.dumps(payload), cwd=self.work,
                           env=self.env, capture_output=True, text=True, timeout=self.args.timeout)
        done = {}
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                done[d["name"]] = d
        for b in blocks:
            d = done.get(b.name)
            if d is None:
                self.fail(b, "not reached (the interpreter stopped):\n" + r.stderr[-2000:])
            elif not d["ok"]:
                self.fail(b, "raised:\n" + d["err"])
            elif "expect" in b.marks and compare(b.marks["expect"].splitlines(), d["out"]) is not None:
                self.fail(b, "did not print\n    %s\n  it printed:\n%s" % (b.marks["expect"], d["out"]))
            else:
                print("ok   %s: python" % b.name, flush=True)

    def run_cpp(self, block):
        exe = os.path.join(self.args.cpp_dir, re.sub(r"\W", "_", block.name))
        if not os.path.exists(exe):
            return self.fail(block, "not compiled: %s missing (reconfigure the build)" % exe)
        r = subprocess.run([exe], cwd=self.work, env=self.env, capture_output=True, text=True,
                           timeout=self.args.timeout)
        if r.returncode != 0:
            return self.fail(block, "exited %d:\n%s" % (r.returncode, r.stderr[-2000:]))
        if "expect" in block.marks and compare(block.marks["expect"].splitlines(), r.stdout) is not None:
            return self.fail(block, "did not print\n    %s\n  it printed:\n%s" % (block.marks["expect"], r.stdout))
        print("ok   %s: C++" % block.name, flush=True)

    def run_page(self, page):
        python = []
        for b in parse(page, self.args.root):
            kind = b.kind()
            if kind in ("not-run", "display"):
                self.counts[kind] += 1
                continue
            if kind == "unmarked":
                self.fail(b, "a ```%s block neither runs nor says why not (<!-- docs: no-run REASON -->)" % b.lang)
                continue
            if "slow" in b.marks and not self.args.slow:
                self.counts["slow (skipped)"] += 1
                continue
            if self.args.slow and "slow" not in b.marks and not self.args.all:
                continue
            self.counts["run"] += 1
            try:
                if kind == "commands":
                    self.run_commands(b)
                elif kind == "python":
                    python.append(b)
                elif kind == "cpp":
                    self.run_cpp(b)
                elif kind == "yaml":
                    import yaml
                    shown = yaml.safe_load(b.text)
                    if "excerpt-of" in b.marks:
                        with open(os.path.join(self.args.root, b.marks["excerpt-of"]), encoding="utf-8") as f:
                            bad = subset(shown, yaml.safe_load(f))
                        if bad:
                            self.fail(b, "not an excerpt of %s: %s" % (b.marks["excerpt-of"], bad))
            except Exception as e:  # a timeout, a YAML error
                self.fail(b, "%s: %s" % (type(e).__name__, e))
        if python:
            self.run_python(python)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--pythonpath", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--cpp-dir", default="")
    ap.add_argument("--slow", action="store_true", help="run the blocks marked slow (only those)")
    ap.add_argument("--all", action="store_true", help="with --slow: every block")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()
    for a in ("root", "bin", "pythonpath", "cpp_dir"):
        if getattr(args, a):
            setattr(args, a, os.path.abspath(getattr(args, a)))
    start = time.time()
    runner = Runner(args)
    try:
        for page in args.pages:
            runner.run_page(page)
    finally:
        shutil.rmtree(runner.work, ignore_errors=True)
    c = runner.counts
    print("docs: %d blocks run, %d marked not-run, %d displays, %d slow skipped; %d failed; %.0f s"
          % (c["run"], c["not-run"], c["display"], c["slow (skipped)"], len(runner.failures), time.time() - start))
    for f in runner.failures:
        print("FAILED " + f.splitlines()[0])
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
