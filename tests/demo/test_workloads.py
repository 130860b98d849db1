"""The simulated workloads: load profiles, the web and queue models, and the scrape endpoint."""

from __future__ import annotations

import math

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.demo.scenario import WEB, Timings
from kubesim.net import free_port
from kubesim.workloads import (
    Exporter,
    LoadChange,
    PodState,
    Profile,
    QueueWorkload,
    WebWorkload,
    WorkloadDriver,
    pod_states,
    producer_profile,
    web_profile,
)


def test_profile_interpolates_and_is_flat_outside():
    p = Profile(((10, 1.0), (20, 3.0)))
    assert p.at(0) == 1.0 and p.at(15) == 2.0 and p.at(30) == 3.0


def test_profile_integral_is_exact_across_knots():
    p = Profile(((0, 0.0), (10, 10.0), (20, 10.0)))
    assert p.integral(0, 10) == pytest.approx(50.0)
    assert p.integral(5, 15) == pytest.approx(37.5 + 50.0)
    assert p.integral(20, 30) == pytest.approx(100.0)
    assert p.integral(3, 3) == 0.0


def test_profile_changes_merge_consecutive_moves_in_one_direction():
    p = Profile(((0, 1), (5, 2), (6, 4), (10, 4), (12, 1)))
    assert p.changes() == [LoadChange(0, 6, 1, 4), LoadChange(10, 12, 4, 1)]


def test_demo_profiles_ramp_spike_and_fall():
    web = web_profile(100)
    assert [round(c.after, 1) for c in web.changes()] == [2.5, 4.5, 0.2]
    assert max(v for _, v in web.points) == web.at(40)
    prod = producer_profile(100)
    assert prod.at(30) > prod.at(0) and prod.at(90) == prod.at(0)


def test_demo_profiles_leave_the_recovery_time_quiet_at_the_end():
    """The last load change ends `recovery` seconds before the end, whatever the duration."""
    for duration in (60, 100, 120):
        timings = Timings().scaled(2) if duration == 60 else Timings()
        web = web_profile(duration, timings.web_recovery)
        prod = producer_profile(duration, timings.worker_recovery)
        assert web.changes()[-1].end == pytest.approx(duration - timings.web_recovery)
        assert prod.changes()[-1].end == pytest.approx(duration - timings.worker_recovery)
        assert web.at(duration) == 0.2 and prod.at(duration) == 1.0


def test_the_quiet_web_load_is_clearly_one_pod():
    """At the quiet level even two pods with a rate 20% too high ask for one (no rounding boundary),
    and one pod is within its target."""
    quiet = web_profile(100).at(100)
    target = WEB.target
    assert math.ceil(2 * (1.2 * quiet / 2) / target) == 1
    assert quiet <= target


def test_web_splits_load_evenly_over_ready_pods_only():
    w = WebWorkload("web", "demo", Profile(((0, 6.0),)))
    w.step(0, 10, [PodState("a", True), PodState("b", True), PodState("c", False)])
    assert w.counters == {"a": pytest.approx(30.0), "b": pytest.approx(30.0), "c": 0.0}
    assert w.per_pod_rate(10) == pytest.approx(3.0)
    w.step(10, 20, [PodState("b", True), PodState("c", True)])
    assert w.counters == {"b": pytest.approx(60.0), "c": pytest.approx(30.0)}   # a is gone
    assert w.served == pytest.approx(120.0)


def test_web_with_no_ready_pod_drops_requests():
    w = WebWorkload("web", "demo", Profile(((0, 2.0),)))
    w.step(0, 5, [PodState("a", False)])
    assert w.counters == {"a": 0.0} and w.dropped == pytest.approx(10.0)


def test_queue_grows_when_producer_outpaces_consumers_and_drains_after():
    q = QueueWorkload("worker", "demo", "worker_tasks", Profile(((0, 10.0),)), per_consumer=2.0)
    q.step(0, 10, [PodState("w1", True), PodState("w2", False)])
    assert q.ready == pytest.approx(80.0)           # 100 in, 20 out
    q.step(10, 20, [PodState(f"w{i}", True) for i in range(10)])
    assert q.ready == pytest.approx(0.0)            # 100 in, capacity 200, backlog 80
    assert q.consumed == pytest.approx(q.produced)


def test_pod_states_reads_labels_readiness_and_deletion():
    pods = [
        {"metadata": {"name": "web-2", "labels": {"app": "web"}},
         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        {"metadata": {"name": "web-1", "labels": {"app": "web"}}, "status": {"phase": "Pending"}},
        {"metadata": {"name": "web-3", "labels": {"app": "web"}, "deletionTimestamp": "2026-01-01T00:00:00Z"},
         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        {"metadata": {"name": "worker-1", "labels": {"app": "worker"}}, "status": {"phase": "Running"}},
    ]
    assert pod_states(pods, "web") == [PodState("web-1", False), PodState("web-2", True)]


class _FakeSim:
    """Only what the driver reads: pods by namespace."""

    def __init__(self, pods):
        self.pods = pods

    def list(self, api_version, kind, namespace=None):
        assert (api_version, kind) == ("v1", "Pod")
        return [p for p in self.pods if p["metadata"]["namespace"] == namespace]


def _pod(name, app):
    return {"metadata": {"name": name, "namespace": "demo", "labels": {"app": app}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def test_exporter_serves_pod_labelled_series_in_text_format():
    now = [0.0]
    sim = _FakeSim([_pod("web-a", "web"), _pod("web-b", "web"), _pod("worker-a", "worker")])
    driver = WorkloadDriver(sim, WebWorkload("web", "demo", Profile(((0, 4.0),))),
                            QueueWorkload("worker", "demo", "worker_tasks", Profile(((0, 5.0),)), per_consumer=2.0),
                            clock=lambda: now[0])
    driver.start()
    now[0] = 10.0
    driver.tick()
    exporter = Exporter(driver, free_port()).start()
    try:
        text = httpx.get(f"http://{exporter.target}/metrics").text
    finally:
        exporter.stop()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples[("http_requests_total", (("namespace", "demo"), ("pod", "web-a")))] == pytest.approx(20.0)
    assert samples[("http_requests_total", (("namespace", "demo"), ("pod", "web-b")))] == pytest.approx(20.0)
    assert samples[("queue_messages_ready", (("namespace", "demo"), ("queue", "worker_tasks")))] == pytest.approx(30.0)
