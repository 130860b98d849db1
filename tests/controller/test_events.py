"""Warning events are aggregated as client-go's recorder does: the same failure on every sync is
one Event whose count and lastTimestamp grow, not a new Event each time."""

from __future__ import annotations

from .conftest import NS, autoscaler, eventually, pods_metric, running, settings


async def test_repeated_failure_is_one_event_with_a_count(sim, fake):
    sim.apply(autoscaler("orphan", "missing", [pods_metric("http_requests", "500m")]))

    def failed_get_scale():
        return [e for e in sim.list("v1", "Event", NS)
                if e["involvedObject"]["name"] == "orphan" and e["reason"] == "FailedGetScale"]

    async with running(sim, settings()):
        await eventually(lambda: (evs := failed_get_scale()) and evs[0]["count"] >= 3
                         and evs[0]["lastTimestamp"] > evs[0]["firstTimestamp"], timeout=20)
    events = failed_get_scale()
    assert len(events) == 1, events
    ev = events[0]
    assert ev["type"] == "Warning" and ev["involvedObject"]["kind"] == "HorizontalAutoscaler"
    assert ev["lastTimestamp"] > ev["firstTimestamp"]
