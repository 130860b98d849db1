"""`python -m autoscaler run` as a real process: flags, errors, a live run, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from kubesim.net import free_port
from tests.support import API_CLIENT, import_order

from .conftest import NS, autoscaler, deployment, eventually, pods_metric, replicas, status
from .test_reconcile import per_pod

ROOT = Path(__file__).resolve().parents[2]


def _cmd() -> list[str]:
    return [sys.executable, "-m", "autoscaler", "run"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_cmd(), *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_help_explains_why_native_hpas_are_off_by_default():
    out = _run("--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--reconcile-native-hpas" in text and "would fight" in text
    for flag in (
        "--horizontal-pod-autoscaler-sync-period",
        "--kubernetes-version",
        "--concurrent-horizontal-pod-autoscaler-syncs",
        "--horizontal-pod-autoscaler-tolerance",
        "--horizontal-pod-autoscaler-downscale-stabilization",
        "--horizontal-pod-autoscaler-cpu-initialization-period",
        "--horizontal-pod-autoscaler-initial-readiness-delay",
        "--leader-elect-lease-duration",
        "--leader-elect-resource-namespace",
        "--sharding",
        "--dry-run",
        "--namespace",
    ):
        assert flag in text


def test_bad_flags_give_one_line_errors():
    out = _run("--horizontal-pod-autoscaler-sync-period=soon")
    assert out.returncode == 2
    assert "--horizontal-pod-autoscaler-sync-period" in out.stderr and "Traceback" not in out.stderr
    out = _run("--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s")
    assert out.returncode == 2 and "renew-deadline" in out.stderr and "Traceback" not in out.stderr
    out = _run("--kubernetes-version=latest")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "argument --kubernetes-version: not a Kubernetes version (want 1.36 or v1.37.0): 'latest'" in out.stderr
    out = _run("--sharding", "--leader-elect")
    assert out.returncode == 2 and "--sharding and --leader-elect are mutually exclusive" in out.stderr
    assert "Traceback" not in out.stderr
    out = _run("--kubeconfig", "/nonexistent/kubeconfig", "--leader-elect=false")
    assert out.returncode == 1 and "/nonexistent/kubeconfig" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


async def test_runs_against_the_cluster_and_stops_cleanly_on_sigterm(sim, fake, tmp_path):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    port = free_port()
    log = (tmp_path / "stderr").open("w")  # a file: the import log fills a pipe nobody reads yet
    proc = subprocess.Popen(
        [
            *_cmd(),
            "--kubeconfig",
            sim.kubeconfig_path,
            "--horizontal-pod-autoscaler-sync-period=300ms",
            "--leader-elect-resource-namespace",
            NS,
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
            "--http-address=127.0.0.1",
            f"--http-port={port}",
        ],
        cwd=ROOT,
        stderr=log,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPROFILEIMPORTTIME": "1"},
    )
    try:
        await eventually(lambda: replicas(sim, "web") == 4, timeout=30)
        await eventually(lambda: status(sim, "web").get("currentReplicas") == 4)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    stderr = (tmp_path / "stderr").read_text()
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    messages = [entry["msg"] for entry in logs]
    assert any(m.startswith("HorizontalAutoscaler default/web scaled Deployment default/web 2 -> 4") for m in messages)
    assert "controller stopped" in messages
    lease = sim.get("coordination.k8s.io/v1", "Lease", NS, "promscaler-autoscaler")
    assert lease["spec"]["holderIdentity"] == ""  # released on SIGTERM
    # the client's asyncio half only (promscaler.kubepackages): not its ApiClient (issue 28), nor the
    # synchronous client, nor what `kubernetes/__init__.py` and `kubernetes/aio/__init__.py` import
    imported = set(import_order(stderr))
    assert {"kubernetes.aio.client.rest", "kubernetes.aio.config.kube_config"} <= imported
    assert imported & {*API_CLIENT, "kubernetes.client", "kubernetes.config", "kubernetes.aio.dynamic", "urllib3",
                       "kubernetes.aio.watch", "websocket"} == set()
