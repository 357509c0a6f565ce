"""pytest plugin applying one suite of :mod:`.suites`.

Run as ``pytest -p tests.sklearn_conformance.plugin --conformance-suite NAME
--conformance-report FILE <test file>``: the suite's names are
replaced by their shims before the test file is imported, its exceptions are
applied as skip / strict xfail marks, and FILE receives one JSON record per test:
its outcome, its reason, and whether it fitted a shim.
"""

import importlib
import json
import re

import pytest

from tests.sklearn_conformance import shims
from tests.sklearn_conformance.suites import SUITES


def pytest_addoption(parser):
    parser.addoption("--conformance-suite", choices=sorted(SUITES))
    parser.addoption("--conformance-report")


def pytest_configure(config):
    name = config.getoption("conformance_suite")
    if name is not None:
        config.pluginmanager.register(Conformance(SUITES[name],
                                                  config.getoption("conformance_report")))


class Conformance:
    """Replaces the suite's names at once, marks its exceptions, records outcomes."""

    def __init__(self, suite, report_path):
        stand_ins = importlib.import_module(suite.shims)
        for target, shim in suite.replace.items():
            module, name = target.rsplit(".", 1)
            setattr(importlib.import_module(module), name, getattr(stand_ins, shim))
        self.suite, self.report_path, self.records = suite, report_path, {}

    def pytest_collection_modifyitems(self, items):
        for item in items:
            for pattern, kind, reason in self.suite.exceptions:
                if re.search(pattern, item.name):
                    item.add_marker(pytest.mark.skip(reason=reason) if kind == "skip" else
                                    pytest.mark.xfail(reason=reason, strict=True))
                    break

    def pytest_runtest_setup(self, item):
        shims.FITS.clear()

    def pytest_runtest_logreport(self, report):
        record = self.records.setdefault(report.nodeid, {"outcome": "passed", "reason": "",
                                                         "reached": False})
        if report.when == "call":
            record["reached"] = bool(shims.FITS)
        if report.skipped and hasattr(report, "wasxfail"):
            record.update(outcome="xfailed", reason=report.wasxfail, reached=bool(shims.FITS))
        elif report.skipped:
            record.update(outcome="skipped",
                          reason=str(report.longrepr[-1]).removeprefix("Skipped: "))
        elif report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            reason = crash.message if crash is not None else str(report.longrepr)
            record.update(outcome="failed", reason=reason.strip().splitlines()[0][:300])

    def pytest_sessionfinish(self, session):
        if self.report_path:
            with open(self.report_path, "w") as out:
                json.dump(self.records, out, indent=1)
