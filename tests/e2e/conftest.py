"""End to end: KubeSim + a test exporter scraped by a real Prometheus + the real adapter process
(aggregated behind KubeSim) + the controller. Time is compressed: 1 s scrapes, 10 s rate
windows, 1 s sync period."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from autoscaler.controller.controller import Controller, Settings
from autoscaler.decision.model import ControllerConfig
from kubesim.adapterrules import counter_rate_rule, gauge_rule
from kubesim.apiserver import KubeSim
from kubesim.net import free_port
from kubesim.processes import AdapterProcess
from kubesim.prometheus import PrometheusServer

from .. import support
from ..support import running

ROOT = Path(__file__).resolve().parents[2]
NS = "default"

RULES = {
    "rules": [counter_rate_rule('http_requests_total{namespace!="",pod!=""}', "10s")],
    "externalRules": [gauge_rule('queue_messages_ready{queue!=""}', ("namespace",))],
}


class Exporter:
    """What the workloads expose: per-pod request counters growing at total load / ready pods,
    and a queue backlog gauge. Served over HTTP for Prometheus."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self.load: dict[str, float] = {}            # app label -> total requests per second
        self.queues: dict[str, float] = {}          # queue name -> messages ready
        self.counters: dict[str, float] = {}        # pod -> requests served
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.port = free_port()
        self.prometheus_url = ""
        self.prometheus: PrometheusServer | None = None  # the one scraping it (tests stop and restart it)
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def ready_pods(self, app: str) -> list[str]:
        out = []
        for pod in self.sim.list("v1", "Pod", NS):
            meta = pod["metadata"]
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (pod.get("status") or {}).get("conditions") or []
            )
            if (meta.get("labels") or {}).get("app") == app and ready and not meta.get("deletionTimestamp"):
                out.append(meta["name"])
        return out

    def render(self) -> str:
        with self.lock:
            now = time.monotonic()
            dt, self.last = now - self.last, now
            lines = ["# TYPE http_requests_total counter"]
            for app, total in self.load.items():
                pods = self.ready_pods(app)
                for pod in pods:
                    self.counters[pod] = self.counters.get(pod, 0.0) + total / len(pods) * dt
                    lines.append(f'http_requests_total{{namespace="{NS}",pod="{pod}"}} {self.counters[pod]:.3f}')
            lines.append("# TYPE queue_messages_ready gauge")
            for queue, ready in self.queues.items():
                lines.append(f'queue_messages_ready{{namespace="{NS}",queue="{queue}"}} {ready}')
            return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


E = TypeVar("E", bound=Exporter)


@contextlib.contextmanager
def aggregated_world(make_exporter: Callable[[KubeSim], E], rules: dict, groups: Sequence[str],
                     *adapter_args: str) -> Iterator[tuple[KubeSim, E]]:
    """KubeSim with the CRD, the exporter scraped every second by Prometheus, the adapter (serving
    `rules`, with `adapter_args`) aggregated as each of `groups`."""
    with KubeSim(ready_delay=0.0) as sim:
        sim.apply(yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text()))
        exporter = make_exporter(sim)
        prom = PrometheusServer(scrape_targets=[f"127.0.0.1:{exporter.port}"], scrape_interval="1s").start()
        exporter.prometheus_url, exporter.prometheus = prom.url, prom
        rules_file = Path(prom.dir) / "rules.yaml"
        rules_file.write_text(yaml.safe_dump(rules))
        adapter = None
        try:
            adapter = AdapterProcess("--prometheus-url", prom.url, "--config", str(rules_file),
                                     "--kubeconfig", sim.kubeconfig_path, *adapter_args).wait_ready()
            for group in groups:
                sim.set_aggregated_api(group, adapter.url)
            yield sim, exporter
        finally:
            if adapter is not None:
                adapter.stop()
            prom.close()
            exporter.close()


@pytest.fixture
def world() -> Iterator[tuple[KubeSim, Exporter]]:
    """The custom and external metrics APIs from the adapter; 1s relists (1s scrapes: no flapping)."""
    with aggregated_world(Exporter, RULES, ("custom.metrics.k8s.io", "external.metrics.k8s.io"),
                          "--metrics-relist-interval", "1s", "--metrics-max-age", "30s") as w:
        yield w


@contextlib.asynccontextmanager
async def controller(sim: KubeSim, **overrides: Any) -> AsyncIterator[Controller]:
    base: dict[str, Any] = dict(
        sync_period=1.0, leader_elect=False, http_port=None, config=ControllerConfig(downscale_stabilization_window=5.0)
    )
    base.update(overrides)
    async with running(sim, Settings(**base)) as c:
        yield c


def syncs(c: Controller) -> float:
    """Syncs the controller has completed (its reconcile histogram's count)."""
    return c.telemetry.registry.get_sample_value("promscaler_autoscaler_reconcile_duration_seconds_count") or 0.0


async def eventually(check: Callable[[], Any], timeout: float = 45.0, interval: float = 0.2) -> Any:
    """End-to-end conditions take longer: scrapes, rate windows and sync periods add up."""
    return await support.eventually(check, timeout, interval)
