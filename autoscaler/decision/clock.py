"""Time arithmetic that saturates at the ends of the calendar instead of raising.

A pod's `startTime` in year 9999, a `now` in year 1 or a metric window of 10^15 s are values an
API server accepts; Python's datetime raises OverflowError where Go's time.Time goes on. The
decision engine shifts times only through these two functions, so no such value crashes it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["before", "delta", "shift"]

_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)


def delta(seconds: float) -> timedelta:
    """`timedelta(seconds=...)`, saturating at timedelta's range (NaN is 0)."""
    if seconds != seconds:
        return timedelta(0)
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        return timedelta.max if seconds > 0 else timedelta.min


def shift(t: datetime, by: timedelta) -> datetime:
    """`t + by`, saturating at the first and last instants datetime can hold."""
    try:
        return t + by
    except OverflowError:
        return _LAST if by > timedelta(0) else _FIRST


def before(t: datetime, by: timedelta) -> datetime:
    """`t - by`, saturating like `shift`."""
    try:
        return t - by
    except OverflowError:
        return _FIRST if by > timedelta(0) else _LAST
