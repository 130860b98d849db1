"""Schedule windows across the 2026 daylight-saving changes in Europe/Berlin.

The expected instants are worked out by hand from the zone's rules (EU summer time: the clocks
go from 02:00 CET (UTC+1) to 03:00 CEST (UTC+2) at 01:00 UTC on the last Sunday of March,
2026-03-29, and back from 03:00 CEST to 02:00 CET at 01:00 UTC on the last Sunday of October,
2026-10-25), not from the code: each case states the local and the UTC reading.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from autoscaler.decision import SpecError, decide, parse_spec
from autoscaler.decision.schedules import Schedule, active_window, floor_window

from .decision_helpers import ext_avg, external, inp

BERLIN = "Europe/Berlin"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def sched(start: str, end: str | None = None, duration: float | None = None, floor: int = 5,
          name: str = "w", zone: str = BERLIN) -> Schedule:
    return Schedule(name, start, floor, zone, end, duration)


def is_open(s: Schedule, at: datetime) -> bool:
    return active_window(s, at) is not None


# --- spring forward: 2026-03-29, 02:00 CET -> 03:00 CEST (01:00 UTC) ------------------------------

def test_start_in_the_skipped_hour_fires_right_after_the_gap() -> None:
    # 02:30 does not exist on 03-29: the window opens at 03:00 CEST = 01:00 UTC and, with a 1h
    # duration, closes at 02:00 UTC (04:00 CEST).
    s = sched("30 2 * * *", duration=3600)
    assert not is_open(s, utc(2026, 3, 29, 0, 59, 59))   # 01:59:59 CET
    assert is_open(s, utc(2026, 3, 29, 1, 0, 0))          # 03:00:00 CEST
    assert is_open(s, utc(2026, 3, 29, 1, 59, 59))
    assert not is_open(s, utc(2026, 3, 29, 2, 0, 0))      # 04:00 CEST
    # the day before, 02:30 CET = 01:30 UTC
    assert not is_open(s, utc(2026, 3, 28, 1, 29, 59))
    assert is_open(s, utc(2026, 3, 28, 1, 30, 0))


def test_business_hours_follow_the_local_clock_across_spring_forward() -> None:
    # 08:00-18:00 local: on Saturday 03-28 (CET) that is 07:00-17:00 UTC, on Sunday 03-29 (CEST)
    # 06:00-16:00 UTC.
    s = sched("0 8 * * *", end="0 18 * * *")
    assert not is_open(s, utc(2026, 3, 28, 6, 30))   # 07:30 CET
    assert is_open(s, utc(2026, 3, 28, 7, 0))         # 08:00 CET
    assert is_open(s, utc(2026, 3, 28, 16, 59, 59))   # 17:59:59 CET
    assert not is_open(s, utc(2026, 3, 28, 17, 0))    # 18:00 CET
    assert is_open(s, utc(2026, 3, 29, 6, 30))        # 08:30 CEST
    assert not is_open(s, utc(2026, 3, 29, 5, 59))    # 07:59 CEST
    assert is_open(s, utc(2026, 3, 29, 15, 59, 59))   # 17:59:59 CEST
    assert not is_open(s, utc(2026, 3, 29, 16, 0))    # 18:00 CEST


def test_duration_is_elapsed_time_across_spring_forward() -> None:
    # Opens 00:00 CET on 03-29 = 23:00 UTC on 03-28; ten elapsed hours later is 09:00 UTC, which
    # the clock on the wall shows as 11:00 CEST.
    s = sched("0 0 * * *", duration=10 * 3600)
    window = active_window(s, utc(2026, 3, 29, 8, 59, 59))
    assert window is not None
    assert window.opened == utc(2026, 3, 28, 23, 0)
    assert window.closes == utc(2026, 3, 29, 9, 0)
    assert (window.closes.hour, window.closes.utcoffset().total_seconds()) == (11, 7200)  # type: ignore[union-attr]
    assert not is_open(s, utc(2026, 3, 29, 9, 0))


# --- fall back: 2026-10-25, 03:00 CEST -> 02:00 CET (01:00 UTC); 02:00-02:59 happens twice ---------

def test_start_in_the_repeated_hour_fires_once() -> None:
    # 02:30 comes twice: 02:30 CEST = 00:30 UTC and 02:30 CET = 01:30 UTC. The window opens at
    # the first only; with 30 minutes it is closed at 01:00 UTC and stays closed at 01:30 UTC.
    s = sched("30 2 * * *", duration=1800)
    assert not is_open(s, utc(2026, 10, 25, 0, 29, 59))
    assert is_open(s, utc(2026, 10, 25, 0, 30))
    assert is_open(s, utc(2026, 10, 25, 0, 59, 59))
    assert not is_open(s, utc(2026, 10, 25, 1, 0))
    assert not is_open(s, utc(2026, 10, 25, 1, 30))     # the second 02:30 (CET)
    assert not is_open(s, utc(2026, 10, 25, 1, 45))


def test_end_in_the_repeated_hour_is_its_first_occurrence() -> None:
    # Opens 01:00 CEST on 10-25 = 23:00 UTC on 10-24; ends at the first 02:30 (CEST) = 00:30 UTC.
    s = sched("0 1 * * *", end="30 2 * * *")
    assert is_open(s, utc(2026, 10, 24, 23, 0))
    assert is_open(s, utc(2026, 10, 25, 0, 29, 59))
    assert not is_open(s, utc(2026, 10, 25, 0, 30))
    assert not is_open(s, utc(2026, 10, 25, 1, 35))     # 02:35 CET, the repeated hour


def test_business_hours_follow_the_local_clock_across_fall_back() -> None:
    # Saturday 10-24 (CEST): 06:00-16:00 UTC; Sunday 10-25 (CET): 07:00-17:00 UTC.
    s = sched("0 8 * * *", end="0 18 * * *")
    assert is_open(s, utc(2026, 10, 24, 6, 0))
    assert not is_open(s, utc(2026, 10, 24, 16, 0))
    assert not is_open(s, utc(2026, 10, 25, 6, 30))    # 07:30 CET
    assert is_open(s, utc(2026, 10, 25, 7, 0))          # 08:00 CET
    assert is_open(s, utc(2026, 10, 25, 16, 30))        # 17:30 CET
    assert not is_open(s, utc(2026, 10, 25, 17, 0))     # 18:00 CET


def test_hourly_start_fires_in_both_repeated_hours() -> None:
    # `0 * * * *` (every hour) with 10 minutes: 02:00 CEST (00:00 UTC) and 02:00 CET (01:00 UTC)
    # both open a window.
    s = sched("0 * * * *", duration=600)
    assert is_open(s, utc(2026, 10, 25, 0, 5))
    assert is_open(s, utc(2026, 10, 25, 1, 5))
    assert not is_open(s, utc(2026, 10, 25, 0, 15))


def test_weekdays_only_and_other_zones() -> None:
    # 2026-03-27 is a Friday, 03-28 a Saturday. 09:00 in America/New_York (EDT since 03-08,
    # UTC-4) is 13:00 UTC.
    s = sched("0 9 * * 1-5", end="0 17 * * 1-5", zone="America/New_York")
    assert is_open(s, utc(2026, 3, 27, 13, 0))
    assert not is_open(s, utc(2026, 3, 27, 12, 59))
    assert not is_open(s, utc(2026, 3, 28, 14, 0))


def test_overlapping_windows_take_the_highest_floor() -> None:
    low, high = sched("0 8 * * *", end="0 18 * * *", floor=4, name="day"), \
        sched("0 12 * * *", duration=3600, floor=9, name="lunch")
    at_noon = floor_window([low, high], utc(2026, 6, 1, 10, 30))     # 12:30 CEST
    assert at_noon is not None and at_noon.schedule.name == "lunch"
    morning = floor_window([low, high], utc(2026, 6, 1, 7, 0))        # 09:00 CEST
    assert morning is not None and morning.schedule.name == "day"
    assert floor_window([low, high], utc(2026, 6, 1, 20, 0)) is None


def _spec(schedules: list[dict], min_r: int = 1, max_r: int = 20) -> object:
    return parse_spec({"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "minReplicas": min_r,
                       "maxReplicas": max_r, "metrics": [ext_avg("1")], "schedules": schedules})


def test_an_open_window_raises_the_floor_in_the_decision() -> None:
    # tests' NOW is 2026-01-01 00:10 UTC = 01:10 CET: a window 01:00-02:00 Berlin is open.
    spec = _spec([{"name": "night-batch", "start": "0 1 * * *", "duration": "1h", "timeZone": BERLIN,
                   "minReplicas": 8}])
    # The metric asks for 2; the floor makes it 8, straight away (below minReplicas).
    d = decide(inp(spec, 3, readings=[external(2000)]))
    assert d.desired_replicas == 8
    assert d.controls is not None and d.controls.window == "night-batch" and d.controls.floor == 8
    assert any("schedule night-batch is open" in line for line in d.explanation)
    # The metric asks for 12: above the floor, the metric wins (legacy scale-up limit 2x -> 12 from 8).
    d = decide(inp(spec, 8, readings=[external(12000)]))
    assert d.desired_replicas == 12


def test_a_closed_window_changes_nothing() -> None:
    spec = _spec([{"name": "later", "start": "0 9 * * *", "end": "0 17 * * *", "timeZone": BERLIN,
                   "minReplicas": 8}])
    d = decide(inp(spec, 3, readings=[external(2000)]))
    # no recommendation recorded before (History(recommendations=())): the metric's 2, as an HPA's
    assert d.desired_replicas == 2
    assert d.controls is not None and d.controls.window is None


@pytest.mark.parametrize(("schedule", "field"), [
    ({"name": "a", "start": "0 8 * *", "end": "0 9 * * *", "minReplicas": 2}, "spec.schedules[0].start"),
    ({"name": "a", "start": "0 8 * * *", "end": "61 9 * * *", "minReplicas": 2}, "spec.schedules[0].end"),
    ({"name": "a", "start": "0 8 * * *", "minReplicas": 2}, "spec.schedules[0]"),
    ({"name": "a", "start": "0 8 * * *", "end": "0 9 * * *", "duration": "1h", "minReplicas": 2},
     "spec.schedules[0]"),
    ({"name": "a", "start": "0 8 * * *", "duration": "soon", "minReplicas": 2}, "spec.schedules[0].duration"),
    ({"name": "a", "start": "0 8 * * *", "duration": "1h", "timeZone": "Mars/Olympus", "minReplicas": 2},
     "spec.schedules[0].timeZone"),
    ({"name": "a", "start": "0 8 * * *", "duration": "1h", "minReplicas": 50}, "spec.schedules[0].minReplicas"),
    ({"start": "0 8 * * *", "duration": "1h", "minReplicas": 2}, "spec.schedules[0].name"),
])
def test_schedule_errors_name_the_field(schedule: dict, field: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "maxReplicas": 20,
                    "metrics": [ext_avg("1")], "schedules": [schedule]}, "spec")
    assert err.value.path == field


ONE_HOUR = {"name": "a", "start": "0 8 * * *", "duration": "1h", "minReplicas": 2}


@pytest.mark.parametrize(("schedules", "message"), [
    ({"name": "a"}, "spec.schedules: must be a list"),
    (["a"], "spec.schedules[0]: must be an object"),
    ([{**ONE_HOUR, "name": 5}], "spec.schedules[0].name: must be a string"),
    ([ONE_HOUR, {**ONE_HOUR, "start": "0 9 * * *"}], "spec.schedules[1].name: duplicate schedule name 'a'"),
    ([{k: v for k, v in ONE_HOUR.items() if k != "start"}], "spec.schedules[0].start: required"),
    ([{**ONE_HOUR, "start": ["0 8 * * *"]}], "spec.schedules[0].start: must be a string"),
    ([{**ONE_HOUR, "duration": "-1h"}], "spec.schedules[0].duration: not a duration: '-1h' (e.g. 10h, 90m)"),
    ([{**ONE_HOUR, "duration": "0s"}], "spec.schedules[0].duration: must be positive"),
    ([{**ONE_HOUR, "timeZone": "Mars/Olympus"}], "spec.schedules[0].timeZone: unknown IANA time zone: 'Mars/Olympus'"),
    ([{**ONE_HOUR, "timeZone": 1}], "spec.schedules[0].timeZone: must be a string"),
    ([{k: v for k, v in ONE_HOUR.items() if k != "minReplicas"}], "spec.schedules[0].minReplicas: required"),
    ([{**ONE_HOUR, "minReplicas": "2"}], "spec.schedules[0].minReplicas: must be an integer, got '2'"),
    ([{**ONE_HOUR, "minReplicas": -1}], "spec.schedules[0].minReplicas: must be greater than or equal to 0"),
    ([{**ONE_HOUR, "minReplicas": 21}],
     "spec.schedules[0].minReplicas: must be less than or equal to `maxReplicas` (20)"),
])
def test_schedule_errors_are_one_line_naming_the_field(schedules: object, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "maxReplicas": 20,
                    "metrics": [ext_avg("1")], "schedules": schedules}, "spec")
    assert str(err.value) == message


def test_a_bad_cron_expression_is_named_and_quoted() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "maxReplicas": 20,
                    "metrics": [ext_avg("1")], "schedules": [{**ONE_HOUR, "start": "0 8 * *"}]}, "spec")
    assert str(err.value).startswith("spec.schedules[0].start: not a cron expression: '0 8 * *' (")
    assert "\n" not in str(err.value)


def test_the_remembered_window_answers_as_a_fresh_computation() -> None:
    # One schedule object asked at instants in shuffled order (its memo in play) agrees with a new
    # object per instant (no memo), over both DST days.
    import random
    from datetime import timedelta

    rules = [("30 2 * * *", None, 1800.0), ("0 8 * * 1-5", "0 18 * * 1-5", None), ("0 * * * *", None, 600.0)]
    for start, end, duration in rules:
        kept = sched(start, end=end, duration=duration)
        for day in (utc(2026, 3, 28, 12), utc(2026, 10, 24, 12)):
            instants = [day + timedelta(minutes=7 * k) for k in range(24 * 60 // 7 * 2)]
            random.Random(22).shuffle(instants)
            for at in instants + sorted(instants):
                assert is_open(kept, at) == is_open(sched(start, end=end, duration=duration), at), (start, at)
