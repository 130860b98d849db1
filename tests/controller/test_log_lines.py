"""The controller's log lines name what they talk about, and a failure that repeats every sync is
logged once, then at most once a minute with a count, while every occurrence is an Event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator

from .conftest import NS, autoscaler, deployment, events, eventually, pods_metric, replicas, running, settings
from .test_reconcile import per_pod

FAILED = "HorizontalAutoscaler default/orphan: FailedGetScale"


def _event_count(sim, name: str, reason: str) -> int:
    return sum(int(e.get("count") or 1) for e in sim.list("v1", "Event", NS)
               if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == reason)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and FAILED in r.getMessage()]


async def test_missing_target_is_logged_once_a_minute_with_a_count(sim, fake, caplog):
    caplog.set_level(logging.INFO)
    now = [time.monotonic()]
    sim.apply(autoscaler("orphan", "nonexistent", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:
        controller.reconciler.repeats.clock = lambda: now[0]
        await eventually(lambda: _event_count(sim, "orphan", "FailedGetScale") >= 4)
        assert len(_warnings(caplog)) == 1  # four failed syncs, one line
        assert "Deployment" in _warnings(caplog)[0] or "nonexistent" in _warnings(caplog)[0]
        events_before = _event_count(sim, "orphan", "FailedGetScale")
        now[0] += 61  # a minute later the next failure is logged again, with how often it occurred since
        await eventually(lambda: len(_warnings(caplog)) == 2)
    again = _warnings(caplog)[1]
    assert "more times since last logged" in again
    suppressed = int(again.split("(occurred ")[1].split()[0])
    assert suppressed >= events_before - 1  # every failure in between was counted


async def test_scale_line_names_the_autoscaler_and_the_target(sim, fake, caplog):
    caplog.set_level(logging.INFO)
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()):
        await eventually(lambda: replicas(sim, "web") == 4)
    lines = [r.getMessage() for r in caplog.records if "scaled" in r.getMessage()]
    assert any(line.startswith("HorizontalAutoscaler default/web scaled Deployment default/web 2 -> 4: ")
               for line in lines), lines


@contextlib.contextmanager
def held_events(controller, *reasons: str) -> Iterator[asyncio.Event]:
    """The controller's Event writes with these reasons wait until the returned event is set: what
    the log says meanwhile is what a reader sees while a sync's writes are in flight."""
    release = asyncio.Event()
    record = controller.reconciler.events.record

    async def held(obj, type_, reason, *args, **kwargs):
        if reason in reasons:
            await release.wait()
        return await record(obj, type_, reason, *args, **kwargs)

    controller.reconciler.events.record = held
    try:
        yield release
    finally:
        release.set()
        controller.reconciler.events.record = record


async def test_a_failed_sync_is_logged_before_its_event_is_written(sim, fake, caplog):
    caplog.set_level(logging.INFO)
    sim.apply(autoscaler("orphan", "nonexistent", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:
        with held_events(controller, "FailedGetScale") as release:
            await eventually(lambda: _warnings(caplog))  # while its Event write waits
            assert _event_count(sim, "orphan", "FailedGetScale") == 0
            release.set()
            await eventually(lambda: _event_count(sim, "orphan", "FailedGetScale") >= 1)


async def test_a_rescale_is_logged_before_its_event_is_written(sim, fake, caplog, monkeypatch):
    """A failed rescale's warning (the API server refuses the write: the Deployment changed since
    the scale was read), and the scale line once it succeeds, are out before their Events."""
    caplog.set_level(logging.INFO)
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))

    def lines(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    def reasons(reason: str) -> list[tuple[str, str, str]]:
        return [e for e in events(sim, "web") if e[1] == reason]

    async with running(sim, settings()) as controller:
        kube = controller.reconciler.kube
        original, conflicts = kube.request, [True]

        async def racing(method, path, *args, **kwargs):
            if method == "PUT" and path.endswith("/scale") and conflicts:
                touched = sim.get("apps/v1", "Deployment", NS, "web")
                touched["metadata"].setdefault("annotations", {})["touched"] = "yes"
                sim.apply(touched)  # someone else wrote it after our read: 409 Conflict
            return await original(method, path, *args, **kwargs)

        monkeypatch.setattr(kube, "request", racing)
        with held_events(controller, "SuccessfulRescale") as scaled:
            with held_events(controller, "FailedRescale") as failed:
                await eventually(lambda: lines("web: FailedRescale: Deployment default/web to 4: Conflict"))
                assert not reasons("FailedRescale")
                conflicts.clear()
                failed.set()
            await eventually(lambda: reasons("FailedRescale"))
            await eventually(lambda: replicas(sim, "web") == 4)
            await eventually(lambda: lines("HorizontalAutoscaler default/web scaled Deployment default/web 2 -> 4"))
            assert not reasons("SuccessfulRescale")
            scaled.set()
        await eventually(lambda: reasons("SuccessfulRescale"))
