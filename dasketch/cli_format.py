"""How the command line writes numbers: sizes in binary units (MiB, GiB) throughout,
and three significant digits however small a value is, so that a short run reads
``0.417 MiB/s`` and ``3.2e-05%`` rather than ``0 MB/s`` and ``0.0000%``.

Examples
--------
>>> number(1234567.8), number(0.04173), number(2.5e-7)
('1,234,568', '0.0417', '2.5e-07')
>>> size(1_024_000_000), size(3 * 2**20), rate(5 * 2**20, 2.0), percent(3.2e-7)
('0.954 GiB', '3 MiB', '2.5 MiB/s', '3.2e-05%')
"""

import math

MIB, GIB = 2 ** 20, 2 ** 30


def number(value):
    """``value`` with three significant digits (whole numbers from 100 up, grouped)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def size(nbytes):
    """A size in GiB from half a GiB up, else in MiB."""
    return f"{number(nbytes / GIB)} GiB" if nbytes >= GIB / 2 else f"{number(nbytes / MIB)} MiB"


def rate(nbytes, seconds):
    """Bytes per second, in MiB/s."""
    return f"{number(nbytes / MIB / seconds)} MiB/s" if seconds > 0 else "- MiB/s"


def percent(fraction):
    """A fraction as a percentage."""
    return f"{number(100 * fraction)}%"


def times_power_of_two(value, exponent):
    """``value * 2**exponent`` written as ``%.6g`` would, also beyond float64's range."""
    if not exponent or value == 0:
        return f"{value:.6g}"
    decimal = math.log10(value) + exponent * math.log10(2.0)
    power = math.floor(decimal)
    mantissa = 10.0 ** (decimal - power)
    if mantissa >= 9.999995:  # rounds up to 10 at six digits
        mantissa, power = 1.0, power + 1
    return f"{mantissa:.6g}e{power:+03d}"
