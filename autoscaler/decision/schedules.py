"""`spec.schedules`: cron windows in an IANA time zone that raise the replica floor while open.

Pure: the instant is an argument (the controller passes its clock, `simulate` the scenario's
`now`, `backtest` each replayed step), so a test never waits for a real window.

Cron arithmetic is cronsim's (the expressions of Debian cron, 5 or 6 fields) over `zoneinfo`
local times, which fixes what daylight-saving changes do (docs/controls.md):
- a start or end in the hour skipped in spring (02:30 on 2026-03-29 in Europe/Berlin) fires at
  the first instant after the gap (03:00 CEST);
- a start or end with a fixed hour inside the hour repeated in autumn (02:30 on 2026-10-25)
  fires once, at its first occurrence (02:30 CEST); `*` hours fire in both;
- `duration` is elapsed time: a 10h window opened at 08:00 closes ten real hours later, which is
  19:00 or 17:00 on the clock on a day the clocks change in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from promscaler.times import DurationError, parse_duration

from . import fields
from .clock import shift
from .fields import SpecError

__all__ = ["Schedule", "Window", "active_window", "floor_window", "parse_schedules"]

_SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Schedule:
    """One window rule: opens at each `start` tick, closes at the next `end` tick or `duration` later."""

    name: str
    start: str
    min_replicas: int
    time_zone: str = "UTC"
    end: str | None = None
    duration: float | None = None   # seconds
    zone: ZoneInfo = field(init=False, repr=False, compare=False)
    # The last answer of active_window, with the instants between which it holds (a window's state
    # changes only when it opens or closes): cron arithmetic once per change, not once per sync.
    memo: list[tuple[datetime, datetime, Window | None]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "zone", ZoneInfo(self.time_zone))
        object.__setattr__(self, "memo", [])


@dataclass(frozen=True, slots=True)
class Window:
    """An open window: which rule, since when and until when (aware datetimes in the rule's zone)."""

    schedule: Schedule
    opened: datetime
    closes: datetime


def _closes(schedule: Schedule, opened: datetime) -> datetime:
    if schedule.duration is not None:
        return shift(opened.astimezone(UTC), timedelta(seconds=schedule.duration)).astimezone(schedule.zone)
    assert schedule.end is not None
    try:
        return next(CronSim(schedule.end, opened))
    except StopIteration:  # an end that never comes (e.g. 30 February): open from then on
        return datetime.max.replace(tzinfo=UTC)


def _latest_start(schedule: Schedule, now: datetime) -> datetime | None:
    """The last `start` tick at or before `now`.

    cronsim steps backwards on the wall clock, which in the repeated autumn hour can land a day
    early or after `now`; stepping forwards is exact (it knows each instant's fold). So: a
    backward step for a candidate at or before `now`, then forward steps while they are still at
    or before `now` (usually none). Comparisons are with `now` in UTC: absolute instants."""
    # cronsim's ticks are strictly before its instant: one second after `now` (whole seconds) makes
    # a start at exactly `now` count. UTC arithmetic, then the zone, so no wall-clock step is skipped.
    after = (now.astimezone(UTC).replace(microsecond=0) + _SECOND).astimezone(schedule.zone)
    try:
        back = CronSim(schedule.start, after, reverse=True)
        opened = next(back)
        while opened > now:
            opened = next(back)
    except StopIteration:
        return None
    for tick in CronSim(schedule.start, opened):
        if tick > now:
            break
        opened = tick
    return opened


def active_window(schedule: Schedule, now: datetime) -> Window | None:
    """The window of `schedule` open at `now` (start <= now < end), or None.

    Only the latest start at or before `now` matters: an earlier start of the same rule closes
    no later than it (same duration, or the first `end` tick after an earlier instant)."""
    memo = schedule.memo
    if memo and memo[0][0] <= now < memo[0][1]:
        return memo[0][2]
    opened = _latest_start(schedule, now)
    window = None
    if opened is not None:
        closes = _closes(schedule, opened)
        if now < closes:
            window = Window(schedule, opened, closes)
    if window is not None:
        memo[:] = [(window.opened, window.closes, window)]
    else:  # closed until the next start
        memo[:] = [(now, _next_start(schedule, now), None)]
    return window


def _next_start(schedule: Schedule, now: datetime) -> datetime:
    try:
        return next(CronSim(schedule.start, now.astimezone(schedule.zone)))
    except StopIteration:
        return datetime.max.replace(tzinfo=UTC)


def floor_window(schedules: Sequence[Schedule], now: datetime) -> Window | None:
    """The open window with the highest floor (overlapping windows: the highest wins; on a tie the
    first in spec order)."""
    best: Window | None = None
    for schedule in schedules:
        window = active_window(schedule, now)
        if window is not None and (best is None or schedule.min_replicas > best.schedule.min_replicas):
            best = window
    return best


def _cron(value: Any, path: str) -> str:
    """A cron expression cronsim reads (Debian cron's: 5 fields, or 6 with seconds first)."""
    text = fields.string(value, path)
    assert text is not None
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError) as exc:
        raise SpecError(path, f"not a cron expression: {text!r} ({exc})") from None
    return text


def _duration(value: Any, path: str) -> float:
    """`duration`: elapsed seconds (`90m`, `10h`), positive."""
    try:
        seconds = parse_duration(str(value))
    except DurationError:
        raise SpecError(path, f"not a duration: {value!r} (e.g. 10h, 90m)") from None
    if seconds <= 0:
        raise SpecError(path, "must be positive")
    return seconds


def _time_zone(value: Any, path: str) -> str:
    """An IANA zone `zoneinfo` knows; UTC when not set."""
    zone = fields.string(value, path, required=False) or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise SpecError(path, f"unknown IANA time zone: {zone!r}") from None
    return zone


def _parse_schedule(raw: Any, path: str, max_replicas: int) -> Schedule:
    item = fields.obj(raw, path)
    assert item is not None
    name = fields.string(item.get("name"), f"{path}.name")
    assert name is not None
    start = _cron(item.get("start"), f"{path}.start")
    raw_end, raw_duration = item.get("end"), item.get("duration")
    if (raw_end is None) == (raw_duration is None):
        raise SpecError(path, "exactly one of end or duration must be set")
    end = None if raw_end is None else _cron(raw_end, f"{path}.end")
    duration = None if raw_duration is None else _duration(raw_duration, f"{path}.duration")
    zone = _time_zone(item.get("timeZone"), f"{path}.timeZone")
    floor = fields.integer(item.get("minReplicas"), f"{path}.minReplicas", minimum=0)
    if floor > max_replicas:
        raise SpecError(f"{path}.minReplicas", f"must be less than or equal to `maxReplicas` ({max_replicas})")
    return Schedule(name, start, floor, zone, end, duration)


def parse_schedules(raw: Any, path: str, max_replicas: int) -> tuple[Schedule, ...]:
    """`spec.schedules` -> Schedules, with the field path of the first problem; names are unique
    (a window is reported by its name)."""
    out: list[Schedule] = []
    for i, item in enumerate(fields.items(raw, path)):
        schedule = _parse_schedule(item, f"{path}[{i}]", max_replicas)
        if any(s.name == schedule.name for s in out):
            raise SpecError(f"{path}[{i}].name", f"duplicate schedule name {schedule.name!r}")
        out.append(schedule)
    return tuple(out)
