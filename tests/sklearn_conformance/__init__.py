"""scikit-learn's own test files run against dasketch's estimators.

:mod:`.suites` lists, for every scikit-learn test file run, which scikit-learn
names it replaces by which shim (:mod:`.shims`) and the tests it skips or expects
to fail, each with its reason. :mod:`.plugin` is the pytest plugin that applies a
suite (it replaces the names before the test file is imported) and writes a JSON
report; :mod:`.runner` runs one suite in a subprocess and formats the table of
results (``python -m tests.sklearn_conformance.runner`` prints it for README.md).
"""
