"""Products of a dense block of rows with thin matrices: plain ``@`` against the transposed layout.

:mod:`dasketch.kernels.block_products` multiplies a block ``B`` (``rows x d``,
float64, C order) by a thin matrix in the transposed layout: ``rows_times``
computes ``B @ P`` as ``(P^T B^T)^T``, ``rows_transpose_times`` computes
``B^T @ U`` as ``(U^T B)^T``, and ``rows_forward_backward`` computes the
Hessian product ``B^T (w * (B P))`` in panels of rows (about ``PANEL_BYTES``)
that stay in cache between the forward and the backward product. This script
times, on one BLAS thread (threadpoolctl) and in interleaved rounds (best of
``--repeat``), for thin widths ``j`` in (1, 2, 3, 4, 8, 81):

* forward: ``B @ P`` against ``rows_times(B, P)``;
* backward: ``B.T @ U`` against ``rows_transpose_times(B, U)``;
* forward-then-backward: ``@`` both ways, ``rows_times`` then
  ``rows_transpose_times`` (the transposed layout, whole block) and
  ``rows_forward_backward`` (the transposed layout in panels);

with one ``B.sum()`` (a read of the block) as the unit, on blocks of
1,024 x 12,000 and 300 x 40,000 (about 94 MiB each). It reports each time,
the ratio plain / dasketch, and the largest relative difference of the
results (equal to rounding), and writes ``results/block_products.json`` and
``.png``.

Run: ``python -m benchmarks.bench_block_products [--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from dasketch.kernels import block_products
from dasketch.kernels.block_products import (
    rows_forward_backward,
    rows_times,
    rows_transpose_times,
)

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_block_products.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    machine_facts,
    relative_error,
    side_by_side,
    sizes_and_repeats,
    write_results,
)

WIDTHS = (1, 2, 3, 4, 8, 81)
FULL_BLOCKS = ((1024, 12000), (300, 40000))
QUICK_BLOCKS = ((128, 12000), (64, 40000))  # the same widths: the same panels
# plain run, dasketch run, ratio name: plain / dasketch
RATIOS = {"forward": ("B @ P", "rows_times"),
          "backward": ("B.T @ U", "rows_transpose_times"),
          "forward-backward, transposed": ("@ both ways", "transposed, whole block"),
          "forward-backward, panels": ("@ both ways", "rows_forward_backward")}


def panel_rows(block):
    """Rows per panel ``rows_forward_backward`` takes, 0 when it multiplies the
    block whole (a panel of fewer than ``MIN_PANEL_ROWS`` rows, or the whole block)."""
    n, d = block.shape
    panel = block_products.PANEL_BYTES // (block.dtype.itemsize * d)
    return panel if block_products.MIN_PANEL_ROWS <= panel < n else 0


def width_case(B, weights, j, repeat, rng):
    """Times of the products with ``j`` columns, plain and transposed."""
    n, d = B.shape
    P = rng.standard_normal((d, j))
    U = rng.standard_normal((n, j))

    def rowwise(F, rows):
        return weights[rows, None] * F

    def plain_hessian():
        return B.T @ (weights[:, None] * (B @ P))

    def transposed_hessian():
        return rows_transpose_times(B, rowwise(rows_times(B, P), slice(0, n)))

    runs = {"B @ P": lambda: B @ P, "rows_times": lambda: rows_times(B, P),
            "B.T @ U": lambda: B.T @ U, "rows_transpose_times": lambda: rows_transpose_times(B, U),
            "@ both ways": plain_hessian, "transposed, whole block": transposed_hessian,
            "rows_forward_backward": lambda: rows_forward_backward(B, P, rowwise)[2]}
    timings, results = side_by_side(runs, repeat)
    seconds = {name: t["wall"] for name, t in timings.items()}
    ratios = {case: seconds[plain] / seconds[ours] for case, (plain, ours) in RATIOS.items()}
    differences = {case: relative_error(results[ours], results[plain])
                   for case, (plain, ours) in RATIOS.items()}
    return {"j": j, "seconds": seconds, "plain_over_dasketch": ratios,
            "relative_difference": differences}


def block_case(n, d, repeat, seed=0):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n, d))
    weights = rng.uniform(0.5, 2.0, n)
    read, _ = side_by_side({"B.sum()": B.sum}, repeat)
    read_s = read["B.sum()"]["wall"]
    widths = [width_case(B, weights, j, repeat, rng) for j in WIDTHS]
    for row in widths:
        row["over_read"] = {name: s / read_s for name, s in row["seconds"].items()}
    return {"shape": [n, d], "mib": B.nbytes / 2 ** 20, "panel_rows": panel_rows(B),
            "read_s": read_s, "widths": widths}


def main(argv=None):
    args, blocks = sizes_and_repeats(__doc__, "smaller blocks, fewer repeats, seconds",
                                     FULL_BLOCKS, QUICK_BLOCKS, argv)
    with threadpool_limits(limits=1):
        cases = [block_case(n, d, args.repeat) for n, d in blocks]
        blas = [{key: info.get(key) for key in ("internal_api", "version", "architecture",
                                                 "num_threads")}
                for info in threadpool_info() if info.get("user_api") == "blas"]
    for case in cases:
        n, d = case["shape"]
        print(f"{n} x {d} ({case['mib']:.0f} MiB), panels of {case['panel_rows']} rows "
              f"(0: whole block), B.sum() {case['read_s'] * 1e3:.1f} ms; plain / dasketch:")
        print(f"{'j':>4s}" + "".join(f"{name:>30s}" for name in RATIOS))
        for row in case["widths"]:
            print(f"{row['j']:4d}" + "".join(f"{row['plain_over_dasketch'][name]:30.2f}"
                                             for name in RATIOS))
    report = {"machine": dict(machine_facts(), blas=blas), "repeat": args.repeat,
              "blas_threads": 1, "panel_bytes": block_products.PANEL_BYTES,
              "min_panel_rows": block_products.MIN_PANEL_ROWS,
              "ratios": {name: f"{plain} / {ours}" for name, (plain, ours) in RATIOS.items()},
              "cases": cases}
    write_results("block_products", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    cases = report["cases"]
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 3.8), sharey=True)
    for ax, case in zip(np.atleast_1d(axes), cases):
        widths = [row["j"] for row in case["widths"]]
        x = np.arange(len(widths))
        step = 0.8 / len(RATIOS)
        for i, name in enumerate(RATIOS):
            ax.bar(x + (i - (len(RATIOS) - 1) / 2) * step,
                   [row["plain_over_dasketch"][name] for row in case["widths"]],
                   step, label=name)
        ax.axhline(1.0, color="grey", ls=":")
        ax.set_xticks(x, [str(j) for j in widths])
        ax.set_xlabel("columns j of the thin matrix")
        n, d = case["shape"]
        panels = f"panels of {case['panel_rows']} rows" if case["panel_rows"] else "no panels"
        ax.set_title(f"{n} x {d} float64 ({panels}), B.sum() {case['read_s'] * 1e3:.0f} ms",
                     fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel(f"plain @ / dasketch (time), best of {report['repeat']}")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
