"""Starting and stopping: in the caller's event loop, from a thread, and as `python -m kubesim`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from kubernetes.aio import client as aclient

from kubesim.apiserver import KubeSim

from ..support import run_kubectl, wait_for


async def test_astart_serves_in_the_callers_loop() -> None:
    async with KubeSim(ready_delay=0) as sim:
        async with aclient.ApiClient(sim.aio_client_configuration()) as api:
            apps = aclient.AppsV1Api(api)
            await apps.create_namespaced_deployment(
                "default",
                {
                    "metadata": {"name": "web"},
                    "spec": {
                        "replicas": 2,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "a", "image": "i"}]},
                        },
                    },
                },
            )
            core = aclient.CoreV1Api(api)
            for _ in range(100):
                pods = (await core.list_namespaced_pod("default", label_selector="app=web")).items
                if len(pods) == 2 and all(
                    c.status == "True" for p in pods for c in p.status.conditions if c.type == "Ready"
                ):
                    break
                await asyncio.sleep(0.05)
            assert len(pods) == 2
        url, kubeconfig = sim.url, sim.kubeconfig_path
    assert not Path(kubeconfig).exists()
    try:
        httpx.get(f"{url}/api", timeout=1)
        raise AssertionError("still serving after astop()")
    except httpx.ConnectError:
        pass


def test_stop_ends_open_watches() -> None:
    sim = KubeSim().start()
    with httpx.Client(timeout=10) as c, c.stream("GET", f"{sim.url}/api/v1/pods", params={"watch": "1"}) as r:
        assert r.status_code == 200
        sim.stop()
        # ended cleanly by the stop (a watch left open is cut after the graceful timeout instead:
        # an incomplete chunked body, RemoteProtocolError here), however long the stop took
        assert list(r.iter_lines()) == []


def test_cli(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "--kubeconfig-out", str(kubeconfig), "--ready-delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("kubesim serving on http://127.0.0.1:"), line + proc.stderr.read()
        out = run_kubectl(kubeconfig, "get", "ns", "-o", "name")
        assert "namespace/default" in out.stdout.split(), out.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    bad = subprocess.run(
        [sys.executable, "-m", "kubesim", "--ready-delay", "-1"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--ready-delay" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_serves_legacy_discovery_only_when_asked() -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    for flags, kind in (([], "APIGroupDiscoveryList"), (["--no-aggregated-discovery"], "APIGroupList")):
        proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--ready-delay", "0", *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert line.startswith("kubesim serving on "), line + proc.stderr.read()
            url = line.split()[3].rstrip(";")
            assert httpx.get(f"{url}/apis", headers={"Accept": accept}).json()["kind"] == kind
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0


def test_restart_keeps_url_and_state() -> None:
    sim = KubeSim().start()
    try:
        url = sim.url
        rv = sim.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}})[
            "metadata"]["resourceVersion"]
        sim.stop()
        sim.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default"}})
        sim.start()
        assert sim.url == url
        r = httpx.get(f"{url}/api/v1/namespaces/default/configmaps",
                      params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1"}, timeout=10)
        assert [line for line in r.text.splitlines() if '"name":"b"' in line]
    finally:
        sim.stop()


def test_pods_starting_during_a_restart_still_become_ready() -> None:
    # An hour to Ready: the pod is surely still starting when the server stops, however slow the
    # machine; the restarted kubelet takes half a second (its delay counts from the restart).
    sim = KubeSim(ready_delay=3600).start()
    try:
        sim.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}})
        assert wait_for(lambda: sim.list("v1", "Pod", "default"), timeout=10), "no pod created"
        sim.stop()  # before the pod is Ready
        pod = sim.list("v1", "Pod", "default")[0]
        assert not _ready(pod)
        sim.controller.ready_delay = 0.5
        sim.start()
        assert wait_for(lambda: _ready(sim.get("v1", "Pod", "default", pod["metadata"]["name"])), timeout=10), (
            "pod never became Ready after the restart")
    finally:
        sim.stop()


def _ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
