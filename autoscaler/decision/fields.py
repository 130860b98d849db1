"""Field validators for a HorizontalAutoscaler spec, shared by spec.py, controls.py and schedules.py,
and by the readers of API objects (autoscaler/objects.py) and scenario files (simulate/scenario.py).

One set of parsers: the same bad value gets the same one-line error, starting with the path of
the field, whether it sits in an HPA field or in one of the controls (docs/controls.md). Each
validator returns the value typed or raises `SpecError`; none knows which field it checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from promscaler.quantity import QuantityError, parse_quantity, to_milli
from promscaler.times import DurationError, parse_duration

from .replicas import MAX_INT32, MAX_INT64  # the API's int32 counts and int64 milli-values

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "SpecError",
    "at_least_zero",
    "duration",
    "either",
    "integer",
    "items",
    "milli",
    "obj",
    "one_of",
    "quantity",
    "string",
]

_Number = TypeVar("_Number", int, Decimal)
_MAX_SECONDS = (2**63 - 1) / 1e9  # Go's largest time.Duration


class SpecError(ValueError):
    """An invalid spec; the message starts with the field path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


def _absent(value: Any, path: str, required: bool = True) -> bool:
    """Whether an optional field is not set; a required one that is not set is the error."""
    if value is not None:
        return False
    if required:
        raise SpecError(path, "required")
    return True


def obj(value: Any, path: str, required: bool = True) -> Mapping[str, Any] | None:
    if _absent(value, path, required):
        return None
    if not isinstance(value, Mapping):
        raise SpecError(path, "must be an object")
    return value


def items(value: Any, path: str) -> list[Any]:
    """A list field; absent is empty (each caller says what an empty list means)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(path, "must be a list")
    return value


def string(value: Any, path: str, required: bool = True) -> str | None:
    """A string; the empty string counts as absent, as the API server's `required` does."""
    if _absent(None if value == "" else value, path, required):
        return None
    if not isinstance(value, str):
        raise SpecError(path, "must be a string")
    return value


def integer(value: Any, path: str, minimum: int | None = None, maximum: int = MAX_INT32) -> int:
    """A required int32 (or `maximum`); a float with an integral value (JSON's 3.0) is accepted."""
    _absent(value, path)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SpecError(path, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise SpecError(path, f"must be greater than or equal to {minimum}")
    if value > maximum:
        raise SpecError(path, f"must be less than or equal to {maximum}")
    return value


def either(choices: Sequence[str]) -> str:
    """`A`, `A or B`, `A, B or C`: the choices as an error message lists them."""
    return choices[0] if len(choices) == 1 else f"{', '.join(choices[:-1])} or {choices[-1]}"


def one_of(value: Any, path: str, choices: Sequence[str], qualifier: str = "", default: str | None = None) -> str:
    """A string among `choices` (required unless there is a `default`); `qualifier` says why only
    these (e.g. " for a Pods metric")."""
    text = string(value, path, required=default is None) or default
    if text not in choices:
        raise SpecError(path, f"must be {either(choices)}{qualifier}, got {text!r}")
    assert text is not None
    return text


def quantity(value: Any, path: str) -> Decimal:
    """A required Kubernetes quantity (`500m`, `2Gi`, a number), exactly."""
    _absent(value, path)
    try:
        return parse_quantity(value)
    except QuantityError:
        raise SpecError(path, f"not a quantity: {value!r}") from None


def duration(value: Any, path: str) -> float:
    """A required duration (`30s`, `1m30s`, a number of seconds) in seconds, within Go's time.Duration."""
    _absent(value, path)
    try:
        seconds = parse_duration(value)
    except DurationError:
        raise SpecError(path, f"not a duration: {value!r}") from None
    if not 0 <= seconds <= _MAX_SECONDS:
        raise SpecError(path, f"out of range: {value!r}")
    return seconds


def at_least_zero(number: _Number, path: str) -> _Number:
    if number < 0:
        raise SpecError(path, "must be greater than or equal to 0")
    return number


def milli(value: Any, path: str, *, positive: bool = True) -> int:
    """A quantity in milli-units, rounded up as apimachinery's `MilliValue()`, within int64:
    positive for a target, at least 0 for a threshold."""
    m = to_milli(quantity(value, path))
    if positive and m <= 0:
        raise SpecError(path, "must be positive")
    at_least_zero(m, path)
    if m > MAX_INT64:
        raise SpecError(path, f"out of range: {value!r} (at most {MAX_INT64 // 1000} as a whole number)")
    return m
