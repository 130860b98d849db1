"""The README's "To a real cluster" steps, run as written and in order, against kubesim (the
in-process API server) with the real kubectl: the objects they leave are what the adapter needs.

Step 6 (reading metrics through the aggregation layer) needs a running adapter behind the
APIServices; the aggregation path is covered by tests/e2e and tests/kubesim. Every other line
of the block runs as a shell command, in a directory holding only this checkout's files.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from adapter.rules import parse_rules
from kubesim.apiserver import KubeSim

ROOT = Path(__file__).resolve().parents[2]


def cluster_steps() -> list[str]:
    """The command lines of the README's first bash block under "## To a real cluster", in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## To a real cluster"):]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block
    lines, skipping = [], False
    for line in block.group(1).splitlines():
        if line.startswith("# "):
            skipping = line.startswith("# 6.")
            continue
        if line.strip() and not skipping:
            lines.append(line.split("  #")[0].strip())
    return lines


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(ready_delay=0.3) as s:
        yield s


def test_the_steps_leave_a_configured_adapter(sim: KubeSim, tmp_path: Path) -> None:
    steps = cluster_steps()
    assert any(s.startswith("PROMETHEUS_URL=") for s in steps)
    work = tmp_path / "checkout"
    work.mkdir()
    for name in ("apiservice", "examples", ".venv"):
        (work / name).symlink_to(ROOT / name)
    env = dict(os.environ, KUBECONFIG=sim.kubeconfig_path, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
               PYTHONPATH=str(ROOT), KUBECACHEDIR=str(tmp_path / "kube-cache"))
    script = "set -euo pipefail\n" + "\n".join(steps) + "\n"
    proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    url = next(s for s in steps if s.startswith("PROMETHEUS_URL=")).split("=", 1)[1]

    def get(*args: str) -> dict:
        out = subprocess.run(["kubectl", *args, "-o", "json"], env=env, capture_output=True, text=True,
                             check=True, timeout=60).stdout
        return json.loads(out)

    # the serving certificate and the APIServices that trust its CA
    ca = (work / "certs" / "ca.crt").read_bytes()
    secret = get("-n", "promscaler", "get", "secret", "promscaler-adapter-tls")
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca
    services = get("get", "apiservices")["items"]
    ours = {a["metadata"]["name"]: a["spec"] for a in services if a["metadata"]["name"].endswith("metrics.k8s.io")}
    assert set(ours) == {"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io",
                         "v1beta1.external.metrics.k8s.io"}
    assert all(base64.b64decode(spec["caBundle"]) == ca for spec in ours.values())
    assert all(spec["service"] == {"name": "promscaler-adapter", "namespace": "promscaler", "port": 443}
               for spec in ours.values())

    # the adapter asks the Prometheus the README names, and reads the rules ConfigMap of step 4
    deploy = get("-n", "promscaler", "get", "deployment", "promscaler-adapter")
    pod = deploy["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert [a for a in args if a.startswith("--prometheus-url=")] == [f"--prometheus-url={url}"]
    assert "--config=/etc/promscaler/config.yaml" in args
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["config"] == "/etc/promscaler"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(volumes) == {"serving-cert", "config", "tmp"}
    rules_cm = get("-n", "promscaler", "get", "configmap", volumes["config"]["configMap"]["name"])
    config = parse_rules(rules_cm["data"]["config.yaml"])
    example = yaml.safe_load((ROOT / "examples" / "adapter-rules.yaml").read_text())
    assert rules_cm["data"] == example["data"] and len(config.rules) == 1 and len(config.external_rules) == 1

    # the manifests' own ConfigMap was not overwritten by the rules step
    manifest_cm = next(d for d in yaml.safe_load_all((ROOT / "apiservice" / "adapter-configmap.yaml").read_text())
                       if d)
    live_cm = get("-n", "promscaler", "get", "configmap", manifest_cm["metadata"]["name"])
    assert live_cm["data"] == manifest_cm["data"]
    assert manifest_cm["metadata"]["name"] != rules_cm["metadata"]["name"]

    # the example app and its autoscaler
    assert get("-n", "demo", "get", "deployment", "web")["spec"]["selector"]["matchLabels"]
    autoscaler = get("-n", "demo", "get", "horizontalautoscalers", "web")
    assert autoscaler["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    assert "web" in proc.stdout  # `kubectl -n demo get horizontalautoscalers` listed it
