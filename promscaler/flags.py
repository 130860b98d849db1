"""argparse value types for Kubernetes-style flags (`--sync-period=15s`, `--leader-elect=false`,
`--header KEY=VALUE`, comma lists), shared by the adapter's and the autoscaler's command lines.
Each raises `argparse.ArgumentTypeError`, which argparse turns into a one-line usage error."""

from __future__ import annotations

import argparse

from promscaler.times import DurationError, parse_duration

__all__ = ["boolean", "csv", "duration", "key_value", "non_negative_float", "non_negative_int", "positive_int"]


def duration(text: str) -> float:
    """Seconds from a Go duration (`30s`, `1m30s`)."""
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def boolean(text: str) -> bool:
    """Go's flag booleans: true/false, 1/0, t/f, yes/no."""
    value = text.strip().lower()
    if value in ("true", "1", "yes", "t"):
        return True
    if value in ("false", "0", "no", "f"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r} (use true or false)")


def _int_at_least(text: str, minimum: int, words: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{words}: {text!r}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "must be at least 1")


def non_negative_int(text: str) -> int:
    """A count or level that may be 0, as klog's `-v`."""
    return _int_at_least(text, 0, "must not be negative")


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def csv(text: str) -> tuple[str, ...]:
    """A comma-separated list, as `--tls-cipher-suites` and `--requestheader-allowed-names` take."""
    return tuple(p.strip() for p in text.split(",") if p.strip())
