"""`python -m autoscaler demo --kubeconfig F`: the same two workloads on a real cluster.

Expects the examples applied (examples/README.md): the web app and the RabbitMQ worker with
their load generators, the adapter serving the rules, the CRD and the two HorizontalAutoscalers.
The demo runs the controller locally against the cluster, drives the load generators
(`web-load`, `producer`) through the demo's load profiles by scaling them, watches and reports
exactly as in the sandbox, and puts the load generators back as it found them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from autoscaler.demo.processes import Child
from autoscaler.demo.sandbox import StartupError, _cancel, _wait_ready
from autoscaler.demo.scenario import AUTOSCALER_API, NAMESPACE, WEB, WORKER, Workload
from kubesim.net import free_port
from kubesim.workloads import Profile, producer_profile, web_profile
from promscaler.kubeapi import ApiError, Kube, load_configuration

# What one load-generator replica adds (examples/web/load.yaml, examples/worker/producer.yaml).
PER_REPLICA = {"web-load": 0.5, "producer": 1.0}
DRIVES = {"web-load": WEB.name, "producer": WORKER.name}
MERGE = "application/merge-patch+json"


class ClusterStage:
    """The real-cluster counterpart of `Sandbox`: same attributes the demo loop reads."""

    mode = "cluster"

    def __init__(self, kubeconfig: str, duration: float, workdir: Path, log_dir: Path,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.kubeconfig = str(Path(kubeconfig).resolve())
        self.duration, self.workdir, self.log_dir, self.say = duration, workdir, log_dir, say
        self.profiles: dict[str, Profile] = {WEB.name: web_profile(duration), WORKER.name: producer_profile(duration)}
        self.children: list[Child] = []
        self.stack = contextlib.AsyncExitStack()
        self.t0 = time.monotonic()
        self.kube: Kube | None = None

    def lines(self) -> list[str]:
        return [f"real cluster from {self.kubeconfig}: your Prometheus and adapter, namespace {NAMESPACE}",
                "controller runs here with kube-controller-manager's default timings "
                "(sync 15s, downscale stabilization 5m)",
                "load: web-load and producer Deployments scaled through the demo's profiles "
                f"({PER_REPLICA['web-load']} req/s and {PER_REPLICA['producer']} msg/s per replica)"]

    def load_of(self, w: Workload, t: float) -> float:
        return self.profiles[w.name].at(t)

    def truth_of(self, w: Workload) -> float | None:
        return None

    def processes(self) -> list[dict]:
        return [{"name": c.name, "pid": c.pid, "argv": c.argv} for c in self.children if c.pid]

    def check_alive(self) -> None:
        for child in self.children:
            if not child.running():
                raise StartupError(f"{child.name} exited (code {child.returncode}):\n{child.log_tail()}")

    @property
    def _kube(self) -> Kube:
        if self.kube is None:
            raise RuntimeError("the cluster stage has not started")
        return self.kube

    async def _require(self, path: str, what: str) -> dict:
        try:
            return await self._kube.get(path)
        except ApiError as exc:
            raise StartupError(f"{what} ({path}: {exc.status} {exc.reason}); see examples/README.md") from None
        except OSError as exc:  # aiohttp's connection errors are OSErrors
            raise StartupError(f"cannot reach the cluster's API server: {exc}") from None

    async def _scale(self, name: str, replicas: int) -> None:
        await self._kube.request("PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}/scale",
                                body={"spec": {"replicas": replicas}}, content_type=MERGE)

    async def start(self) -> None:
        try:
            self.kube = Kube(await load_configuration(self.kubeconfig))
        except Exception as exc:
            raise StartupError(f"cannot load the kubeconfig {self.kubeconfig}: {exc}") from None
        self.stack.push_async_callback(self.kube.close)
        group, version = AUTOSCALER_API.split("/")
        for api in ("custom.metrics.k8s.io", "external.metrics.k8s.io"):
            await self._require(f"/apis/{api}/v1beta1", f"{api} is not served: install the adapter")
        for w in (WEB, WORKER):
            await self._require(
                f"/apis/{group}/{version}/namespaces/{NAMESPACE}/horizontalautoscalers/{w.name}",
                f"HorizontalAutoscaler {NAMESPACE}/{w.name} is missing: "
                f"apply examples/{w.name}/horizontalautoscaler.yaml")
        before = {}
        for name in DRIVES:
            scale = await self._require(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}/scale",
                                        f"Deployment {NAMESPACE}/{name} is missing: apply the examples")
            before[name] = int((scale.get("spec") or {}).get("replicas") or 0)
        self.stack.push_async_callback(self._restore, before)

        port = free_port()
        child = Child("controller", "autoscaler", [
            "run", "--kubeconfig", self.kubeconfig, "--namespace", NAMESPACE,
            "--http-address", "127.0.0.1", "--http-port", str(port), "--log-format", "text"], self.log_dir,
                      cwd=self.workdir)
        self.children.append(child)
        self.stack.push_async_callback(asyncio.to_thread, child.stop)
        child.start()
        await _wait_ready(f"http://127.0.0.1:{port}/healthz", child, 60, "the controller")
        self.say(f"controller running against the cluster, logs in {self.log_dir}")
        self.t0 = time.monotonic()
        task = asyncio.create_task(self._drive(), name="load")
        self.stack.push_async_callback(_cancel, task)

    async def _drive(self) -> None:
        current: dict[str, int] = {}
        while True:
            t = time.monotonic() - self.t0
            for name, workload in DRIVES.items():
                want = max(0, round(self.profiles[workload].at(t) / PER_REPLICA[name]))
                if current.get(name) != want:
                    try:
                        await self._scale(name, want)
                        current[name] = want
                    except ApiError as exc:
                        self.say(f"could not scale {name}: {exc}")
            await asyncio.sleep(2.0)

    async def _restore(self, before: dict[str, int]) -> None:
        for name, replicas in before.items():
            with contextlib.suppress(ApiError, OSError):
                await self._scale(name, replicas)

    async def stop(self) -> None:
        await self.stack.aclose()
