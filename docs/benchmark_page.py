"""Write the benchmarks page from ``benchmarks/results/*.json`` at build time.

The page opens with the summary table of the README's Performance section, then has
one section per benchmark script, in the order of :data:`ORDER` (what users run first:
sketches, then the solvers, then faults and checks): its docstring's first paragraph,
the command that reproduces it, its figures (at the page's width), and tables read
from its JSON. :data:`TABLES` says which
parts of each JSON file are tabulated; a JSON file it does not name gets a table of its
top-level numbers, so a new benchmark shows up without editing this file.
"""

import ast
import json
import math
import shutil
from pathlib import Path

# JSON stem -> [(caption, dotted path into the JSON, columns or None)]. A path to a list
# of records or a mapping of records gives a table with the listed columns (dotted
# paths inside a record); a mapping of numbers gives a two-column table.
TABLES = {
    "sketch": [("Ratios (medians over interleaved rounds)", "ratios", None),
               ("Goals", "goals", None),
               ("Wall time, median (s)", "seconds", None),
               ("Spectral error relative to the largest eigenvalue",
                "relative_spectral_error", None)],
    "scale": [("Dense rows", "dense", ["rows", "store_gib", "sketch_seconds",
                                       "microseconds_per_row", "peak_worker_memory_mib"]),
              ("Sparse store", "sparse", None), ("Ratios", "ratios", None),
              ("Goals", "goals", None),
              ("Wide rows", "wide", ["features", "rows", "sketch_size", "nnz_per_row",
                                     "seconds", "peak_worker_memory_mib", "restarted"])],
    "sparse_wide": [("Cases", "cases", ["rows", "features", "sketch_size",
                                        "seconds_dasketch", "seconds_projection",
                                        "dasketch_over_projection",
                                        "dasketch_error_over_best",
                                        "svd_compressed_over_dasketch",
                                        "svd_compressed_error_over_best"]),
                    ("Goals", "goals", None)],
    "row_sampling": [("Cases", "cases", ["rows", "features", "sketch_size",
                                         "dasketch_error_over_best"])],
    "drp": [("Runs", "rows", ["task", "regime", "method", "seconds", "relative_error",
                              "passes", "optimality_residual"]),
            ("Speed-ups (peer time / dasketch time)", "speedups", None)],
    "drp_small": [("Ratios: fastest scikit-learn / dasketch, and graphs / eager", "cases",
                   ["n", "d", "tasks.ridge.fastest_peer", "tasks.ridge.peer_over_eager",
                    "tasks.ridge.graphs_over_eager", "tasks.logistic.peer_over_eager",
                    "tasks.logistic.graphs_over_eager"])],
    "regression": [("l2: pwSGD against SGDRegressor", "l2", None),
                   ("l1: pwSGD against linprog (HiGHS)", "l1", None),
                   ("Full accuracy: solvers", "lstsq.solvers", ["seconds", "rel_error"]),
                   ("Full accuracy: speed-ups", "lstsq", None)],
    "online": [("Time per example on a9a (microseconds)", "time_per_example_a9a", None),
               ("a9a, one pass", "a9a.methods", ["test_accuracy", "online_error_rate",
                                                 "us_per_example"]),
               ("Sparse imbalanced data, l = 20", "imbalanced_sparse.l=20",
                ["test_accuracy", "online_error_rate", "us_per_example"])],
    "faults": [("Faults during a job", "rows", ["job", "fault", "at", "finished", "equal",
                                                "seconds", "overhead_s",
                                                "seconds_to_error"])],
    "faults_edges": [("Storage and address faults", "rows",
                      ["job", "fault", "outcome", "seconds_to_error", "one_line", "peer",
                       "peer_seconds", "peer_outcome", "peer_error"])],
    "store_checks": [("Checked against plain reads", "cases",
                      ["chunks", "bytes", "plain_s", "checked_s", "ratio", "opening_s"])],
}
# Sections in the order users meet the features; results not listed follow, by name.
ORDER = ["sketch", "scale", "user_data", "sparse_wide", "row_sampling", "column_reads",
         "drp", "drp_small", "regression", "lstsq_store", "online", "faults",
         "faults_edges", "store_checks", "block_products"]
# Results whose script is not bench_<stem>.py, and results not shown.
SCRIPTS = {"faults_edges": "bench_faults.py"}
SKIPPED_SUFFIXES = ("_quick", "-quick")


def cell(value):
    """One table cell: numbers to 4 significant digits, text on one line."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.4g}"
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
        value = value if len(value) <= 60 else value[:57] + "..."
    return str(value).replace("|", "\\|").replace("\n", " ")


def lookup(data, path):
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def table(data, columns):
    """Markdown table lines of a list or mapping of records, or of a flat mapping."""
    if isinstance(data, dict) and columns is None:
        rows = [(k, v) for k, v in data.items() if not isinstance(v, (dict, list))]
        rows += [(f"{k}: {kk}", vv) for k, v in data.items() if isinstance(v, dict)
                 for kk, vv in v.items() if not isinstance(vv, (dict, list))]
        if not rows:
            return []
        return ["| | value |", "|---|---|"] + [f"| {cell(k)} | {cell(v)} |" for k, v in rows]
    records = list(data.items()) if isinstance(data, dict) else list(enumerate(data))
    records = [(k, r) for k, r in records if isinstance(r, dict)]
    if columns is None:
        columns = sorted({c for _, r in records for c, v in r.items()
                          if not isinstance(v, (dict, list))})
    columns = [c for c in columns if any(lookup(r, c) is not None for _, r in records)]
    if not records or not columns:
        return []
    first = [] if isinstance(data, list) else [""]
    head = first + columns
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, record in records:
        values = ([] if isinstance(data, list) else [cell(key)])
        values += [cell(lookup(record, c)) for c in columns]
        lines.append("| " + " | ".join(values) + " |")
    return lines


def summary(script):
    """The first paragraph of a benchmark script's docstring, and its name."""
    if not script.exists():
        return ""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def section(stem, data, results, out):
    script = results.parent / SCRIPTS.get(stem, f"bench_{stem}.py")
    lines = [f"## {stem.replace('_', ' ')}", "", summary(script), "",
             f"Reproduce: `python -m benchmarks.{script.stem}"
             + (" --edges`" if stem == "faults_edges" else "`")
             + f"; results in `benchmarks/results/{stem}.json`.", ""]
    for png in sorted(results.glob(f"{stem}*.png")):
        if png.stem != stem and not png.stem.startswith(f"{stem}_wide"):
            continue
        shutil.copy2(png, out / png.name)
        lines += [f"```{{image}} {png.name}", f":alt: {png.stem}", ":width: 100%",
                  "```", ""]
    for caption, path, columns in TABLES.get(stem, [("Results", "", None)]):
        part = lookup(data, path) if path else data
        rows = table(part, columns) if part is not None else []
        if rows:
            lines += [f"**{caption}**", ""] + rows + [""]
    for key in ("machine", "meta", "config"):
        if key in data:
            lines += [f"Machine and set-up: {cell(data[key])}", ""]
            break
    return lines


def summary_table(readme):
    """The first table of the README's Performance section, with its heading line."""
    text = Path(readme).read_text() if Path(readme).exists() else ""
    performance = text.partition("\n## Performance\n")[2].partition("\n## ")[0]
    rows, started = [], False
    for line in performance.splitlines():
        if line.startswith("|"):
            rows.append(line)
            started = True
        elif started:
            break
    return ["## Summary", "", "One line per benchmark, from the README; the sections "
            "below give each run in full.", "", *rows, ""] if rows else []


def order(paths):
    """Result files in :data:`ORDER`, the others after it by name."""
    rank = {stem: i for i, stem in enumerate(ORDER)}
    return sorted(paths, key=lambda p: (rank.get(p.stem, len(ORDER)), p.stem))


def write(results, out):
    """Write ``out/index.md`` and copy the figures beside it."""
    results, out = Path(results), Path(out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    lines = ["# Benchmarks", "",
             "Each script in `benchmarks/` runs dasketch side by side with its peers in "
             "one process and writes `benchmarks/results/<name>.json` and `<name>.png`; "
             "this page is generated from those files when the site is built. "
             "`python -m benchmarks.<script> --quick` runs a smoke-sized version in "
             "seconds (its results go to `<name>_quick.json`). The numbers were measured "
             "on a 2-core machine shared with other jobs: read ratios rather than "
             "absolute times.", ""]
    lines += summary_table(results.parent.parent / "README.md")
    for path in order(results.glob("*.json")):
        if path.stem.endswith(SKIPPED_SUFFIXES):
            continue
        lines += section(path.stem, json.loads(path.read_text()), results, out)
    (out / "index.md").write_text("\n".join(lines) + "\n")
