"""The whole system on loopback: the in-process Kubernetes API server, the simulated workloads
and their scrape endpoint, a real Prometheus, the adapter and the controller (real processes).

`Sandbox.start()` brings them up in dependency order and records how to stop each one; `stop()`
stops everything that started, in reverse order, whatever failed on the way.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import yaml

from autoscaler.demo import scenario
from autoscaler.demo.processes import Child
from autoscaler.demo.scenario import NAMESPACE, QUEUE, WEB, WORKER, Timings, Workload
from kubesim.net import free_port
from kubesim.prometheus import PrometheusServer
from kubesim.workloads import (
    Exporter,
    Profile,
    QueueWorkload,
    WebWorkload,
    WorkloadDriver,
    producer_profile,
    web_profile,
)
from promscaler.times import format_duration

if TYPE_CHECKING:
    from kubesim.apiserver import KubeSim


class StartupError(RuntimeError):
    """A part of the sandbox did not come up; the message says which and why."""


async def _wait_ready(url: str, child: Child | None, timeout: float, what: str,
                      ok: Callable[[httpx.Response], bool] = lambda r: True) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    last = "no answer"
    async with httpx.AsyncClient(timeout=2.0) as client:
        while asyncio.get_running_loop().time() < deadline:
            if child is not None and not child.running():
                raise StartupError(f"{what} exited during start-up:\n{child.log_tail()}")
            try:
                r = await client.get(url)
                if r.status_code == 200 and ok(r):
                    return
                last = f"HTTP {r.status_code}: {r.text[:200]}"
            except httpx.HTTPError as exc:
                last = str(exc) or type(exc).__name__
            await asyncio.sleep(0.2)
    tail = f"\n{child.log_tail()}" if child is not None else ""
    raise StartupError(f"{what} not ready after {timeout:.0f}s ({url}: {last}){tail}")


class Sandbox:
    mode = "sandbox"

    def __init__(self, timings: Timings, duration: float, workdir: Path, log_dir: Path,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.timings, self.duration, self.workdir, self.log_dir, self.say = timings, duration, workdir, log_dir, say
        self.stack = contextlib.AsyncExitStack()
        self.children: list[Child] = []
        self.prometheus: PrometheusServer | None = None
        self.sim: KubeSim | None = None
        self.driver: WorkloadDriver | None = None
        self.profiles: dict[str, Profile] = {WEB.name: web_profile(duration, timings.web_recovery),
                                             WORKER.name: producer_profile(duration, timings.worker_recovery)}

    # -- what the demo loop and the monitor need -----------------------------------------------

    def lines(self) -> list[str]:
        return self.timings.lines()

    @property
    def t0(self) -> float:
        """The workloads' clock origin (time.monotonic()): t = 0 of the load profiles."""
        if self.driver is None or self.driver.t0 is None:
            raise RuntimeError("the sandbox has not started")
        return self.driver.t0

    @property
    def kubeconfig(self) -> str:
        """A copy of the sandbox's kubeconfig inside the work dir (so every child's command line
        names the work dir, which is how the tests find strays)."""
        return str(self.workdir / "kubeconfig")

    def load_of(self, w: Workload, t: float) -> float:
        return self.profiles[w.name].at(t)

    def truth_of(self, w: Workload) -> float | None:
        return round(self.driver.worker.ready, 2) if (self.driver and w is WORKER) else None

    def processes(self) -> list[dict]:
        out = [{"name": c.name, "pid": c.pid, "argv": c.argv} for c in self.children if c.pid]
        if self.prometheus is not None and self.prometheus.proc is not None:
            out.append({"name": "prometheus", "pid": self.prometheus.proc.pid, "argv": self.prometheus.proc.args})
        return out

    # -- start-up --------------------------------------------------------------------------------

    async def start(self) -> None:
        from kubesim.apiserver import KubeSim

        t = self.timings
        self.sim = sim = KubeSim(ready_delay=t.pod_ready_delay)
        await sim.astart()
        self.stack.push_async_callback(sim.astop)
        shutil.copyfile(sim.kubeconfig_path, self.kubeconfig)
        self.say(f"kubernetes API (in-process sandbox) at {sim.url}")
        sim.apply(scenario.namespace())
        for w in scenario.WORKLOADS:
            sim.apply(scenario.deployment(w))

        self.driver = WorkloadDriver(
            self.sim,
            WebWorkload(WEB.name, NAMESPACE, self.profiles[WEB.name]),
            QueueWorkload(WORKER.name, NAMESPACE, QUEUE, self.profiles[WORKER.name], per_consumer=2.0),
        )
        self.driver.start()
        task = asyncio.create_task(self.driver.run(0.25), name="workloads")
        self.stack.push_async_callback(_cancel, task)
        exporter = Exporter(self.driver, free_port()).start()
        self.stack.callback(exporter.stop)
        self.say(f"simulated pods' metrics at http://{exporter.target}/metrics")

        self.prometheus = PrometheusServer(scrape_targets=[exporter.target], data_dir=self.workdir / "prometheus",
                                           scrape_interval=format_duration(t.scrape_interval))
        self.stack.push_async_callback(asyncio.to_thread, self.prometheus.close)
        await asyncio.to_thread(self.prometheus.start)
        first_scrape = "count(http_requests_total)%2Bcount(queue_messages_ready)"
        await _wait_ready(f"{self.prometheus.url}/api/v1/query?query={first_scrape}", None, 30,
                          "prometheus' first scrape", ok=lambda r: bool(r.json()["data"]["result"]))
        self.say(f"prometheus at {self.prometheus.url}, scraping every {format_duration(t.scrape_interval)}")

        rules = self.workdir / "rules.yaml"
        rules.write_text(yaml.safe_dump(scenario.adapter_rules(t), sort_keys=False))
        port = free_port()
        adapter = self._child("adapter", "adapter", [
            "--insecure", "--port", str(port), "--prometheus-url", self.prometheus.url, "--config", str(rules),
            "--kubeconfig", self.kubeconfig, "--metrics-relist-interval", format_duration(t.relist_interval)])
        adapter_url = f"http://127.0.0.1:{port}"
        await _wait_ready(f"{adapter_url}/readyz", adapter, 60, "the adapter")
        for group in ("custom.metrics.k8s.io", "external.metrics.k8s.io"):
            sim.set_aggregated_api(group, adapter_url)
        self.say(f"adapter at {adapter_url}, aggregated as custom.metrics.k8s.io and external.metrics.k8s.io")

        for w in scenario.WORKLOADS:
            sim.apply(scenario.autoscaler(w, t))
        health = free_port()
        controller = self._child("controller", "autoscaler", [
            "run", "--kubeconfig", self.kubeconfig,
            "--horizontal-pod-autoscaler-sync-period", format_duration(t.sync_period),
            "--horizontal-pod-autoscaler-downscale-stabilization", format_duration(t.downscale_stabilization),
            "--leader-elect=false", "--http-address", "127.0.0.1", "--http-port", str(health), "--log-format", "text"])
        await _wait_ready(f"http://127.0.0.1:{health}/healthz", controller, 60, "the controller")
        self.say(f"controller running (sync every {format_duration(t.sync_period)}), logs in {self.log_dir}")

    def _child(self, name: str, module: str, args: list[str]) -> Child:
        child = Child(name, module, args, self.log_dir, cwd=self.workdir)
        self.children.append(child)
        self.stack.push_async_callback(asyncio.to_thread, child.stop)
        return child.start()

    def check_alive(self) -> None:
        for child in self.children:
            if not child.running():
                raise StartupError(f"{child.name} exited (code {child.returncode}):\n{child.log_tail()}")

    async def stop(self) -> None:
        await self.stack.aclose()


async def _cancel(task: asyncio.Task) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
