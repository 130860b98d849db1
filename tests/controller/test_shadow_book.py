"""ShadowBook on a hand-moved clock: real scale events, the seed from reality, the phase lock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from autoscaler.controller.shadow import ShadowBook, late, lead
from promscaler.times import format_time

KEY = ("HorizontalPodAutoscaler", "default", "web")
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def hpa(status: dict | None) -> dict:
    return {"metadata": {"namespace": "default", "name": "web"}, "status": status or {}}


def book(clock: Clock, period: float = 15.0) -> ShadowBook:
    return ShadowBook(CollectorRegistry(), sync_period=period, clock=clock)


def test_a_recent_real_scale_down_seen_at_start_is_history_and_seeds_no_recommendation():
    clock = Clock()
    b = book(clock)
    scaled = T0 - timedelta(seconds=20)
    b.observe(KEY, None, hpa({"currentReplicas": 5, "desiredReplicas": 4, "lastScaleTime": format_time(scaled)}))
    h = b.history(KEY, None, T0, downscale_window=300)
    assert h.recommendations == ()  # the real window held nothing above 4: no seed at 5
    assert [e.replica_change for e in h.scale_down_events] == [1] and not h.scale_up_events
    assert scaled <= h.scale_down_events[0].timestamp < scaled + timedelta(seconds=1)


def test_without_a_recent_scale_down_the_current_size_is_seeded_as_a_restarted_controller_does():
    clock = Clock()
    b = book(clock)
    old = T0 - timedelta(seconds=400)
    b.observe(KEY, None, hpa({"currentReplicas": 5, "desiredReplicas": 4, "lastScaleTime": format_time(old)}))
    assert b.history(KEY, None, T0, downscale_window=300).recommendations is None  # the engine records the current size
    b2 = book(clock)
    b2.observe(KEY, None, hpa({"currentReplicas": 3, "desiredReplicas": 6, "lastScaleTime": format_time(T0)}))
    h = b2.history(KEY, None, T0, downscale_window=300)
    assert h.recommendations is None and [e.replica_change for e in h.scale_up_events] == [3]


def test_each_new_last_scale_time_is_one_real_scale_event_dated_when_seen_within_its_second():
    clock = Clock()
    b = book(clock)
    first = {"currentReplicas": 4, "desiredReplicas": 4}
    b.observe(KEY, None, hpa(first))
    clock.now = T0 + timedelta(seconds=15, milliseconds=300)
    scaled = {"currentReplicas": 4, "desiredReplicas": 3, "lastScaleTime": format_time(clock.now)}
    b.observe(KEY, hpa(first), hpa(scaled))
    clock.now += timedelta(seconds=15)
    held = {**scaled, "currentReplicas": 3}  # the next sync: same lastScaleTime, no new event
    b.observe(KEY, hpa(scaled), hpa(held))
    h = b.history(KEY, None, clock.now, downscale_window=300)
    assert [(e.timestamp, e.replica_change) for e in h.scale_down_events] == [
        (T0 + timedelta(seconds=15, milliseconds=300), 1)]


def test_the_shadow_syncs_just_before_the_real_hpa_and_decides_as_of_its_sync():
    clock = Clock()
    b = book(clock, period=15.0)
    assert b.next_delay(KEY) == 15.0 and b.decision_time(KEY, T0) == T0  # no real sync seen yet
    b.observe(KEY, None, hpa({}))
    clock.now = T0 + timedelta(seconds=3)  # the real HPA's status update: one of its syncs
    b.observe(KEY, hpa({}), hpa({"currentReplicas": 2, "desiredReplicas": 2}))
    clock.now = T0 + timedelta(seconds=10)
    assert abs(b.next_delay(KEY) - (18 - 10 - lead(15.0))) < 1e-6  # 0.5 s before the real sync at 18 s
    clock.now = T0 + timedelta(seconds=18) - timedelta(seconds=lead(15.0))
    assert b.decision_time(KEY, clock.now) == T0 + timedelta(seconds=18 + late(15.0))
    assert abs(b.next_delay(KEY) - 15.0) < 1e-6  # then the one after, a period later
