"""``dasketch info``: describe a saved sketch file."""

from __future__ import annotations

from dasketch.cli_format import percent, times_power_of_two
from dasketch.cli_parser import FILE


def run_info(args):
    import dasketch

    sketch = dasketch.load_sketch(args.file, name=FILE)
    scaled, e = sketch.scaled(), sketch.scale_exponent
    s = scaled.singular_values()[:args.top]
    top = s[0] ** 2 + scaled.alpha if s.size else scaled.alpha
    lines = [
        f"file:          {args.file}",
        f"method:        {sketch.method}",
        f"sketch_size:   {sketch.sketch_size}",
        f"rows:          {sketch.n_rows}",
        f"features:      {sketch.n_features}",
        f"centered:      {sketch.centered}",
        f"alpha0:        {sketch.alpha0:.6g}",
        f"shrinkage:     {times_power_of_two(scaled.shrinkage, 2 * e)}",
        f"alpha:         {times_power_of_two(scaled.alpha, 2 * e)}",
        f"error_bound:   {times_power_of_two(scaled.error_bound, 2 * e)}"
        + (f"  ({percent(scaled.error_bound / top)} of the top eigenvalue estimate)"
           if top else ""),
        "top singular values: " + " ".join(times_power_of_two(v, e) for v in s),
    ]
    if e:
        lines.insert(7, f"scale:         the rows were sketched divided by 2**{e}")
    print("\n".join(lines))
    return 0
