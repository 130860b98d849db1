"""Kubernetes resource quantities (`500m`, `1.5k`, `2Gi`).

Parsing is the official client's (`kubernetes.utils.quantity`); this module adds what the
client lacks: milli-unit integers (the HPA's arithmetic) and the canonical spelling
apimachinery prints, so values round-trip through `kubectl` unchanged.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal, InvalidOperation

__all__ = ["QuantityError", "parse_quantity", "to_milli", "format_quantity", "format_milli"]

_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def _client_parse(text: str) -> Decimal:
    # Imported on first use: the `kubernetes` package costs ~120 ms to import, and the adapter
    # serves (and starts) without parsing a quantity.
    from kubernetes.utils.quantity import parse_quantity  # noqa: PLC0415

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
        if whole < 1024:
            return f"{sign}{whole}"
    # DecimalSI: mantissa integer, exponent a multiple of 3, trailing zero groups folded.
    mantissa, exponent = milli, -3
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    return f"{sign}{mantissa}{_DECIMAL_SUFFIXES[exponent]}"


def format_quantity(value: Decimal | int | float, binary: bool = False) -> str:
    """Canonical apimachinery spelling: `1500m`, `2k`, `1536Mi`.

    Values are rounded up to milli precision first, as adapters serve them
    (`resource.NewMilliQuantity`). `binary` picks BinarySI when the value is a whole
    multiple of 1024 (memory), falling back to DecimalSI as apimachinery does.
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
    """ceil(value * 1000), exactly; a float counts as the decimal its repr() shows."""
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return int((exact * 1000).to_integral_value(rounding=ROUND_CEILING))


def _float_milli(value: float) -> int:
    """`_decimal_milli` for a float, without Decimal in the common cases (adapters format one
    value per served item). Whole numbers are exact; otherwise `ceil(value * 1000.0)` is right
    whenever `value * 1000.0` is farther from an integer than its rounding error; the rare rest
    is read off repr()'s digits, or goes to Decimal."""
    if not -9e15 < value < 9e15:
        return _decimal_milli(value)
    m = value * 1000.0
    floor = math.floor(m)
    eps = abs(m) * 1e-15 + 1e-12
    if eps < m - floor < 1.0 - eps:
        return floor + 1
    whole = int(value)
    if whole == value:
        return whole * 1000
    r = repr(value)
    if "e" in r:
        return _decimal_milli(value)
    negative = r[0] == "-"
    integral, _, frac = (r[1:] if negative else r).partition(".")
    milli = int(integral) * 1000 + int(frac[:3].ljust(3, "0"))
    if negative:
        return -milli  # rounding up (towards +inf) drops the extra digits of a negative value
    return milli + 1 if frac[3:].strip("0") else milli
