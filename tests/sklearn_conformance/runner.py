"""Run one conformance suite in a subprocess and summarise it.

A subprocess keeps the replaced scikit-learn names out of the calling
interpreter. The library's own ``conftest.py`` (scikit-learn's ``global_random_seed``,
``global_dtype`` and its skips) applies, as in its own test runs.

``python -m tests.sklearn_conformance.runner [SUITE ...]`` prints the table of
README.md's "scikit-learn conformance" section and every failure.
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.sklearn_conformance.suites import SUITES

REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass
class SuiteResult:
    name: str
    records: dict  # nodeid -> {"outcome", "reason", "reached"}
    output: str

    def count(self, outcome=None, reached=None):
        return sum(1 for r in self.records.values()
                   if (outcome is None or r["outcome"] == outcome)
                   and (reached is None or r["reached"] == reached))

    def failures(self):
        return {node.split("::", 1)[-1]: r["reason"] for node, r in self.records.items()
                if r["outcome"] == "failed"}

    def reasons(self, outcome):
        return Counter(r["reason"] for r in self.records.values() if r["outcome"] == outcome)

    def ours(self, kind):
        """The reasons of the suite's own exceptions of ``kind``."""
        return {reason for _, k, reason in SUITES[self.name].exceptions if k == kind}

    def xfailed_by_us(self):
        ours = self.ours("xfail")
        return sum(n for reason, n in self.reasons("xfailed").items() if reason in ours)

    def pass_rate(self):
        """Passed among the tests that reached dasketch, leaving out those that
        scikit-learn's own test stops short with ``pytest.xfail`` (its solver's
        known problem); None when none reached."""
        theirs = self.count("xfailed", reached=True) - self.xfailed_by_us()
        judged = self.count(reached=True) - theirs
        return self.count("passed", reached=True) / judged if judged else None

    def row(self):
        skipped, xfailed = self.reasons("skipped"), self.reasons("xfailed")
        skipped_by_us = sum(n for reason, n in skipped.items() if reason in self.ours("skip"))
        xfailed_by_us = self.xfailed_by_us()
        reached, passed, rate = (self.count(reached=True), self.count("passed", reached=True),
                                 self.pass_rate())
        rate = "-" if rate is None else f"{100 * rate:.1f} %"
        return (f"| {SUITES[self.name].title} | {len(self.records)} | "
                f"{reached} | {self.count('passed')} ({passed}) | {rate} | "
                f"{self.count('failed')} | {xfailed_by_us} | "
                f"{sum(xfailed.values()) - xfailed_by_us} | {skipped_by_us} | "
                f"{sum(skipped.values()) - skipped_by_us} |")


HEADER = ("| suite | tests | reaching dasketch | passed (reaching dasketch) | pass rate "
          "| failed | documented differences (strict xfail) | xfailed by scikit-learn "
          "| skipped by suites.py | skipped by scikit-learn |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def run_suite(name, *pytest_args, timeout=1800):
    """Run suite ``name`` of :data:`SUITES` on the installed library."""
    test_file, root = SUITES[name].location()
    if test_file is None:
        raise FileNotFoundError(f"suite {name}: {root}")
    with tempfile.TemporaryDirectory() as tmp:
        ini, report = Path(tmp, "pytest.ini"), Path(tmp, "report.json")
        ini.write_text("[pytest]\n")  # not the repository's options (doctests, markers)
        command = [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(root),
                   "-q", "-p", "no:cacheprovider",
                   "-p", "tests.sklearn_conformance.plugin", "--conformance-suite", name,
                   "--conformance-report", str(report), test_file, *pytest_args]
        # one BLAS thread: the suites' matrices are small, and threads waiting
        # on each other cost more than they save when the cores are shared; and
        # scikit-learn's float32 tests, which its conftest skips by default
        env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "SKLEARN_RUN_FLOAT32_TESTS": "1", **os.environ}
        done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True,
                              timeout=timeout, env=env)
        if not report.exists():
            raise RuntimeError(f"suite {name} did not run:\n{done.stdout}\n{done.stderr}")
        return SuiteResult(name, json.loads(report.read_text()), done.stdout + done.stderr)


def main(names):
    results, seconds = [], []
    for name in names or SUITES:
        if SUITES[name].location()[0] is None:
            print(f"{name}: not run: {SUITES[name].location()[1]}")
            continue
        start = time.perf_counter()
        results.append(run_suite(name))
        seconds.append(time.perf_counter() - start)
    for library in sorted({SUITES[r.name].library for r in results}):
        print(library, importlib.import_module(library).__version__)
    print(f"\n{HEADER}")
    for result in results:
        print(result.row())
    for result, took in zip(results, seconds):
        print(f"{result.name}: {took:.0f} s")
    for result in results:
        for outcome in ("xfailed", "skipped"):
            for reason, n in result.reasons(outcome).items():
                print(f"{result.name}: {n} {outcome}: {reason}")
        for test, reason in result.failures().items():
            print(f"{result.name}: FAILED {test}: {reason}")


if __name__ == "__main__":
    main(sys.argv[1:])
