"""Run numpydoc's validation on every public name of dasketch and print the failures.

Usage: ``python docs/validate_docstrings.py [--all-checks]``. The names are those of
``dasketch.__all__`` and ``dasketch.linear_model.__all__``, and the public methods and
properties of the classes among them. By default the checks ``docs/conf.py`` leaves
out (``NUMPYDOC_EXCLUDED_CHECKS``) are not reported; ``--all-checks`` reports them
too. The last lines count the failures by check code. Exit status: 1 when any
reported check fails, 0 otherwise.
"""

import argparse
import collections
import importlib
import inspect
import sys
from pathlib import Path

from numpydoc.validate import validate

sys.path.insert(0, str(Path(__file__).resolve().parent))
MODULES = ("dasketch", "dasketch.linear_model")


def excluded_checks():
    """The check codes docs/conf.py does not require (read without running conf.py)."""
    import ast

    tree = ast.parse((Path(__file__).resolve().parent / "conf.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "NUMPYDOC_EXCLUDED_CHECKS" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise LookupError("NUMPYDOC_EXCLUDED_CHECKS is not assigned in docs/conf.py")


def public_names():
    """Import paths of every public function, class, and public method or property
    defined on those classes (inherited ones are documented where they are defined)."""
    names = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            path = f"{module_name}.{name}"
            names.append(path)
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") or not (callable(value) or isinstance(
                            value, property)):
                        continue
                    names.append(f"{path}.{member}")
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all-checks", action="store_true",
                        help="also report the checks docs/conf.py leaves out")
    args = parser.parse_args(argv)
    skip = set() if args.all_checks else excluded_checks()
    counts = collections.Counter()
    failing = 0
    for name in public_names():
        errors = [(code, message) for code, message in validate(name)["errors"]
                  if code not in skip]
        if errors:
            failing += 1
        for code, message in errors:
            counts[code] += 1
            print(f"{name}: {code} {message}")
    print(f"\n{sum(counts.values())} failures in {failing} of {len(public_names())} names"
          + ("" if args.all_checks else f" (checks left out: {', '.join(sorted(skip))})"))
    for code, count in sorted(counts.items()):
        print(f"  {code}: {count}")
    return 1 if counts else 0


if __name__ == "__main__":
    sys.exit(main())
