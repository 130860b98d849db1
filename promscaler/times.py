"""Durations in Go's `time.ParseDuration` spelling (`30s`, `1m30s`, `300ms`) and RFC 3339 times,
as Kubernetes flags, objects and Prometheus all write them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = [
    "PROMQL_DURATION", "DurationError", "format_duration", "format_time", "go_duration", "micro_time",
    "parse_duration", "parse_time",
]


class DurationError(ValueError):
    """Not a duration or not a time."""


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w|y)")
PROMQL_DURATION = r"(?:\d+(?:ms|[smhdwy]))+|\d+(?:\.\d+)?"
"""A duration as PromQL writes one in a range, subquery or offset (a regex, no groups): `1h30m`, or
seconds (Prometheus 3)."""


def parse_duration(value: str | int | float) -> float:
    """Seconds in a Go/Prometheus duration; plain numbers are seconds."""
    if isinstance(value, bool):
        raise DurationError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise DurationError(f"duration must not be negative: {value!r}")
        return float(value)
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m:
            raise DurationError(f"not a duration: {value!r} (use e.g. 30s, 1m30s, 500ms)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not text:
        raise DurationError("not a duration: ''")
    return total


def format_duration(seconds: float) -> str:
    """Whole-second durations as Prometheus spells them (`1m30s`, `23h30m`, `1d1h`), with `ms`
    below a second, but days the largest unit (`7d`, as seasons are written; Prometheus: `1w`);
    parse_duration reads them back."""
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000)}ms"
    d, rest = divmod(round(seconds), 86400)
    h, rem = divmod(rest, 3600)
    m, sec = divmod(rem, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m or (h and sec) else "") + (f"{sec}s" if sec or not (h or m) else "")
    return (f"{d}d" if d else "") + (out if rest or not d else "")


def go_duration(seconds: float) -> str:
    """Go's `time.Duration.String()` (`3m0s`, `1h0m0s`, `30s`, `500ms`, `0s`), as metav1.Duration
    serializes (metrics.k8s.io `window`)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return f"{sign}{_trim(ns / size)}{unit}"
    whole, frac = divmod(ns, 1_000_000_000)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    text = f"{s}" + (f".{frac:09d}".rstrip("0") if frac else "") + "s"
    if h:
        return f"{sign}{h}h{m}m{text}"
    return f"{sign}{m}m{text}" if m else f"{sign}{text}"


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


def parse_time(value: str | datetime) -> datetime:
    """An aware UTC datetime from RFC 3339 (`2026-01-01T00:09:45Z`)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise DurationError(f"not an RFC 3339 time: {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise DurationError(f"not an RFC 3339 time: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with `Z`, seconds precision, as metav1.Time serializes."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(now: datetime | None = None) -> str:
    """RFC 3339 in UTC with microseconds, as metav1.MicroTime serializes (Lease times, audit
    timestamps); `now` defaults to the current time."""
    return (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seconds(td: timedelta) -> float:
    return td.total_seconds()
