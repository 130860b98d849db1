"""Kubernetes resource quantities (`500m`, `1.5k`, `2Gi`).

Parsing is the official client's (`kubernetes.utils.quantity`); this module adds what the
client lacks: milli-unit integers (the HPA's arithmetic) and the canonical spelling
apimachinery prints, so values round-trip through `kubectl` unchanged.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_DOWN, Decimal, InvalidOperation

__all__ = ["QuantityError", "format_milli", "format_quantity", "parse_quantity", "to_milli"]

_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def _client_parse(text: str) -> Decimal:
    # Imported on first use: the `kubernetes` package costs ~120 ms to import, and the adapter
    # serves (and starts) without parsing a quantity.
    from kubernetes.utils.quantity import parse_quantity

    return Decimal(parse_quantity(text))


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse a quantity string or number into an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"not a quantity: {value!r}")
        return Decimal(repr(value))
    if isinstance(value, (int, Decimal)):
        return Decimal(value)
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    text = value.strip()
    if not text or text != value:
        raise QuantityError(f"not a quantity: {value!r}")
    try:
        parsed = _client_parse(text)
    except (ValueError, InvalidOperation, TypeError) as exc:
        raise QuantityError(f"not a quantity: {value!r}") from exc
    if not parsed.is_finite():
        raise QuantityError(f"not a quantity: {value!r}")
    return Decimal(parsed)


def to_milli(value: str | int | float | Decimal) -> int:
    """Milli-units as an integer, rounded up like apimachinery's `MilliValue()`."""
    scaled = parse_quantity(value) * 1000
    return int(scaled.to_integral_value(rounding=ROUND_CEILING))


def format_milli(milli: int, binary: bool = False) -> str:
    """Canonical spelling of a milli-unit integer (integer arithmetic only: the hot path)."""
    if milli == 0:
        return "0"
    sign = "-" if milli < 0 else ""
    milli = abs(milli)
    if binary and milli % 1000 == 0:
        whole = milli // 1000
        for shift, suffix in _BINARY_SUFFIXES:
            if whole % (1 << shift) == 0:
                return f"{sign}{whole >> shift}{suffix}"
        return f"{sign}{whole}"  # apimachinery keeps BinarySI whole numbers in plain digits (`1000000`, never `1M`)
    # DecimalSI: mantissa integer, exponent a multiple of 3, trailing zero groups folded.
    mantissa, exponent = milli, -3
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    return f"{sign}{mantissa}{_DECIMAL_SUFFIXES[exponent]}"


def format_quantity(value: Decimal | int | float, binary: bool = False) -> str:
    """Canonical apimachinery spelling of a served metric value: `1500m`, `2k`, `1536Mi`.

    Values are truncated towards zero to milli-units, as prometheus-adapter serves them
    (`resource.NewMilliQuantity(int64(v*1000))`), once floating-point noise is removed: a float
    counts as its 15 significant digits (all a double holds for sure), so `2.4999999999999996`
    is 2.5 (`2500m`), 12/7 is `1714m` and 0.0004 is `0`. Reading a quantity (`to_milli`) rounds
    up instead, as apimachinery's `MilliValue()` does. `binary` picks BinarySI when the value is
    a whole multiple of 1024 (memory), falling back to DecimalSI as apimachinery does.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"not a finite quantity: {value!r}")
        milli = _float_milli(value)
        if milli % 1000 and not binary:  # the usual rate: nothing to fold (and 1,000 of them per answer)
            return f"{milli}m"
        return format_milli(milli, binary)
    return format_milli(_decimal_milli(value), binary)


def _decimal_milli(value: Decimal | int | float) -> int:
    """trunc(value * 1000), exactly; a float counts as its 15 significant digits (noise removed)."""
    exact = Decimal(f"{value:.15g}") if isinstance(value, float) else Decimal(value)
    return int((exact * 1000).to_integral_value(rounding=ROUND_DOWN))


def _float_milli(value: float) -> int:
    """`_decimal_milli` for a float, without Decimal in the common cases (adapters format one
    value per served item). Rounding to 15 digits moves a value by less than 1e-14 of itself, so
    when `value * 1000.0` is farther than 1e-13 of itself from every integer, its truncation is
    the answer; the rare rest (whole numbers, noise next to one) goes to Decimal."""
    m = value * 1000.0
    if not -9e15 < m < 9e15:
        return _decimal_milli(value)
    whole = int(m)  # towards zero
    nearest = round(m)
    if abs(m - nearest) > abs(m) * 1e-13 or (m == nearest and -1e14 < m < 1e14):  # (a whole m of <= 14 digits
        return whole  # is the 15-digit value itself)
    return _decimal_milli(value)
