"""Simulated workloads for the demo, tests and benchmarks, driven by a clock.

Two textbook autoscaling cases, each a small model plus the Prometheus series a real
deployment would expose:

- `WebWorkload`: total requests/s follow a load profile and are split evenly across the Ready
  pods of a Deployment; each pod exposes a counter `http_requests_total{namespace,pod}`.
- `QueueWorkload`: a producer whose rate follows a profile fills a queue that every Ready
  consumer pod drains at a fixed rate; exposes `queue_messages_ready{queue,namespace}`.

The models are pure state machines (`step(t0, t1, ...)`); `WorkloadDriver` feeds them the pods
it reads from a `KubeSim`, and `Exporter` serves every simulated pod's series from one HTTP
endpoint (Prometheus text format, rendered by prometheus-client), as if each pod were scraped.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

# --- load profiles ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadChange:
    """One transition of a profile: the value moves from `before` to `after` during [start, end]."""

    start: float
    end: float
    before: float
    after: float


@dataclass(frozen=True, slots=True)
class Profile:
    """A piecewise-linear function of time: `(seconds, value)` knots, flat outside them."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("a profile needs at least one point")
        times = [t for t, _ in self.points]
        if times != sorted(times):
            raise ValueError("profile points must be in time order")

    def at(self, t: float) -> float:
        pts = self.points
        if t <= pts[0][0]:
            return pts[0][1]
        if t >= pts[-1][0]:
            return pts[-1][1]
        i = bisect.bisect_right([p[0] for p in pts], t)
        (t0, v0), (t1, v1) = pts[i - 1], pts[i]
        return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    def integral(self, t0: float, t1: float) -> float:
        """Exact area under the profile over [t0, t1] (requests or messages in that interval)."""
        if t1 <= t0:
            return 0.0
        cuts = [t0] + [t for t, _ in self.points if t0 < t < t1] + [t1]
        return sum((b - a) * (self.at(a) + self.at(b)) / 2 for a, b in itertools.pairwise(cuts))

    def changes(self) -> list[LoadChange]:
        """Maximal non-flat stretches, in order: when the load moved and between which levels."""
        out: list[LoadChange] = []
        for (a, va), (b, vb) in itertools.pairwise(self.points):
            if va == vb:
                continue
            if out and out[-1].end == a and (vb - va) * (out[-1].after - out[-1].before) > 0:
                last = out.pop()
                out.append(LoadChange(last.start, b, last.before, vb))
            else:
                out.append(LoadChange(a, b, va, vb))
        return out


def web_profile(duration: float, recovery: float | None = None) -> Profile:
    """Requests/s: steady, ramp up, spike, fall, quiet; the shape scales with `duration`, and the
    last `recovery` seconds (default: the last 48%) stay quiet so the scale-down can finish.

    Levels are multiples of the demo's 0.5 req/s per-pod target (2, 5, 9 pods); the quiet level,
    0.2 req/s, is well under one pod's target: at 0.5 req/s, two pods sit on the rounding boundary
    (0.25 per pod, ratio 0.5, ceil(2 x 0.5) = 1) where any noise in the rate keeps two."""
    a = _span(duration, recovery, 0.52)
    return Profile(((0, 1.0), (0.08 * a, 1.0), (0.25 * a, 2.5), (0.32 * a, 2.5), (0.34 * a, 4.5),
                    (0.50 * a, 4.5), (0.52 * a, 0.2), (max(float(duration), 0.52 * a), 0.2)))


def producer_profile(duration: float, recovery: float | None = None) -> Profile:
    """Messages/s produced: a trickle, a surge the consumers cannot keep up with, a trickle for the
    last `recovery` seconds (default: the last 54%)."""
    a = _span(duration, recovery, 0.46)
    return Profile(((0, 1.0), (0.10 * a, 1.0), (0.15 * a, 14.0), (0.42 * a, 14.0), (0.46 * a, 1.0),
                    (max(float(duration), 0.46 * a), 1.0)))


def _span(duration: float, recovery: float | None, active: float) -> float:
    """The length the profile's knots are scaled to, so the active part (`active` of it) ends
    `recovery` seconds before `duration`."""
    d = float(duration)
    return d if recovery is None else max(d - recovery, 0.0) / active


# --- models -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodState:
    name: str
    ready: bool


@dataclass(slots=True)
class WebWorkload:
    """A Deployment serving HTTP: `profile(t)` requests/s in total, split evenly over Ready pods."""

    name: str
    namespace: str
    profile: Profile
    counters: dict[str, float] = field(default_factory=dict)   # pod -> http_requests_total
    ready_pods: int = 0
    served: float = 0.0
    dropped: float = 0.0                                        # requests with no Ready pod to take them

    def step(self, t0: float, t1: float, pods: Sequence[PodState]) -> None:
        """Advance from t0 to t1 with `pods` (the Deployment's pods now); gone pods disappear."""
        self.counters = {p.name: self.counters.get(p.name, 0.0) for p in pods}
        ready = [p.name for p in pods if p.ready]
        self.ready_pods = len(ready)
        requests = self.profile.integral(t0, t1)
        if not ready:
            self.dropped += requests
            return
        share = requests / len(ready)
        for name in ready:
            self.counters[name] += share
        self.served += requests

    def per_pod_rate(self, t: float) -> float:
        """What each Ready pod serves at `t` (the value the autoscaler should see, less lag)."""
        return self.profile.at(t) / self.ready_pods if self.ready_pods else 0.0


@dataclass(slots=True)
class QueueWorkload:
    """A queue filled at `profile(t)` messages/s, drained at `per_consumer` msgs/s by each Ready pod."""

    name: str
    namespace: str
    queue: str
    profile: Profile
    per_consumer: float = 2.0
    ready: float = 0.0            # messages waiting (queue_messages_ready)
    produced: float = 0.0
    consumed: float = 0.0
    consumers: int = 0

    def step(self, t0: float, t1: float, pods: Sequence[PodState]) -> None:
        if t1 <= t0:
            return
        self.consumers = sum(1 for p in pods if p.ready)
        incoming = self.profile.integral(t0, t1)
        capacity = self.consumers * self.per_consumer * (t1 - t0)
        done = min(self.ready + incoming, capacity)
        self.ready = self.ready + incoming - done
        self.produced += incoming
        self.consumed += done


# --- reading pods from the sandbox cluster --------------------------------------------------------


def pod_states(pods: Iterable[dict[str, Any]], app: str) -> list[PodState]:
    """The live pods labelled `app=<app>` and whether each is Ready (condition Ready=True)."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get("app") != app or meta.get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        ready = status.get("phase") == "Running" and any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
        out.append(PodState(meta["name"], ready))
    return sorted(out, key=lambda p: p.name)


class WorkloadDriver:
    """Steps the models on a clock with the pods a KubeSim currently has.

    `t` is seconds since `start()`; `tick()` may be called from any thread or from a task."""

    def __init__(self, sim: Any, web: WebWorkload, worker: QueueWorkload, clock=time.monotonic) -> None:
        self.sim, self.web, self.worker, self.clock = sim, web, worker, clock
        self.t0: float | None = None
        self.t = 0.0
        self.lock = threading.Lock()

    def start(self) -> None:
        self.t0 = self.clock()
        self.t = 0.0

    def tick(self) -> float:
        if self.t0 is None:
            self.start()
        now = self.clock() - self.t0
        with self.lock:
            for model in (self.web, self.worker):
                pods = pod_states(self.sim.list("v1", "Pod", model.namespace), model.name)
                model.step(self.t, now, pods)
            self.t = now
        return now

    async def run(self, interval: float = 0.25) -> None:
        while True:
            self.tick()
            await asyncio.sleep(interval)


# --- the scrape endpoint --------------------------------------------------------------------------


class _Collector:
    """prometheus-client collector rendering the models' current state as pod-labelled series."""

    def __init__(self, driver: WorkloadDriver) -> None:
        self.driver = driver

    def collect(self):
        d = self.driver
        with d.lock:
            counters = dict(d.web.counters)
            ready = d.worker.ready
        c = CounterMetricFamily("http_requests", "HTTP requests served by the pod.", labels=["namespace", "pod"])
        for pod, value in sorted(counters.items()):
            c.add_metric([d.web.namespace, pod], value)
        yield c
        g = GaugeMetricFamily("queue_messages_ready", "Messages ready for delivery in the queue.",
                              labels=["queue", "namespace"])
        g.add_metric([d.worker.queue, d.worker.namespace], ready)
        yield g


class Exporter:
    """One HTTP endpoint (`/metrics`) serving every simulated pod's series, labelled by pod."""

    def __init__(self, driver: WorkloadDriver, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(driver))
        self.port = port
        self._server: WSGIServer | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Exporter:
        self._server, self._thread = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
