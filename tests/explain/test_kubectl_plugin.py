"""`kubectl promscaler`: the real kubectl finds the `kubectl-promscaler` plugin on PATH and runs
it with kubectl's own conventions: `$KUBECONFIG`, `--kubeconfig`, `--context`, `-n/--namespace`
anywhere after the plugin's name, and without `-n` the context's namespace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from kubesim.net import free_port

from ..controller.conftest import ROOT, autoscaler, deployment, pods_metric
from ..support import API_CLIENT, import_order, kubectl


def _kubeconfig(path: Path, sim, current: str) -> str:
    """Two contexts: `shop` (the sandbox, namespace shop) and `gone` (nothing listening there)."""
    token = yaml.safe_load(Path(sim.kubeconfig_path).read_text())["users"][0]["user"]["token"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "sim", "cluster": {"server": sim.url}},
                     {"name": "gone", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "shop", "context": {"cluster": "sim", "user": "u", "namespace": "shop"}},
                     {"name": "gone", "context": {"cluster": "gone", "user": "u", "namespace": "gone"}}],
    }))
    return str(path)


async def _kubectl(*args: str, **kw) -> tuple[int, str, str]:
    done = await asyncio.to_thread(kubectl, *args, **kw)
    return done.returncode, done.stdout, done.stderr


async def test_explain_with_kubectls_namespace_context_and_kubeconfig(sim, fake, tmp_path: Path):
    # web in shop: 1500m per pod against 500m at 2 replicas -> ratio 3 -> 6, limited to max(2 x 2, 4) = 4.
    # web in default: 250m per pod at 2 -> ratio 0.5 -> 1 (no status, so no stabilization) = 1.
    for ns, value in (("shop", "1500m"), ("default", "250m")):
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        sim.apply(deployment("web", 2, ns=ns))
        sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], ns=ns))
        fake.pods[(ns, "http_requests")] = value
    on_shop = _kubeconfig(tmp_path / "on-shop", sim, current="shop")
    on_gone = _kubeconfig(tmp_path / "on-gone", sim, current="gone")

    def explained(out: str) -> tuple[str, int]:
        doc = json.loads(out)
        return doc["object"]["namespace"], doc["decision"]["desiredReplicas"]

    # $KUBECONFIG, its current context's namespace
    code, out, err = await _kubectl("promscaler", "explain", "web", "-o", "json", home=tmp_path, kubeconfig_env=on_shop)
    assert code == 0, err
    assert explained(out) == ("shop", 4)
    # -n before the command, --namespace=, -nNAME: the namespace given wins over the context's
    for flags in (["-n", "default", "explain"], ["explain", "--namespace=default"], ["explain", "-ndefault"]):
        code, out, err = await _kubectl("promscaler", *flags, "web", "-o", "json", home=tmp_path,
                                        kubeconfig_env=on_shop)
        assert code == 0, err
        assert explained(out) == ("default", 1)
    # --kubeconfig over $KUBECONFIG; --context over the current context (and its namespace)
    code, out, err = await _kubectl("promscaler", "--kubeconfig", on_gone, "--context", "shop", "explain", "web",
                                    "-o", "json", home=tmp_path, kubeconfig_env=str(tmp_path / "missing"))
    assert code == 0, err
    assert explained(out) == ("shop", 4)
    # the current context `gone`: its namespace and its (absent) server, in one line
    code, out, err = await _kubectl("promscaler", "explain", "web", "--kubeconfig", on_gone, home=tmp_path)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("autoscaler explain: HorizontalAutoscaler gone/web: the API server")
    # the text report, as without kubectl; the plugin's process imports the client's asyncio half
    # only (promscaler.kubepackages): not the synchronous client, its ApiClient, nor what the
    # packages' `__init__` files import (urllib3: `kubernetes.utils`, the quantity parser's package)
    code, out, err = await _kubectl("promscaler", "explain", "web", home=tmp_path, kubeconfig_env=on_shop,
                                    extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert code == 0, err
    assert "HorizontalAutoscaler shop/web (live)" in out
    imported = set(import_order(err))
    assert {"kubernetes.aio.client.rest", "kubernetes.utils.quantity"} <= imported
    assert imported & {*API_CLIENT, "kubernetes.client", "kubernetes.config", "urllib3"} == set()


async def test_simulate_through_kubectl_and_flags_that_do_not_apply(tmp_path: Path):
    scenario = ROOT / "examples" / "scenarios" / "pods-http-requests.yaml"
    code, out, err = await _kubectl("promscaler", "simulate", "--check", str(scenario), home=tmp_path)
    assert code == 0, err
    assert out.strip().endswith(": ok")
    # simulate reads no cluster: kubectl's cluster flags are a usage error, not silently ignored
    for flags in (["--context", "prod"], ["-n", "shop"], ["--kubeconfig=/x"]):
        code, out, err = await _kubectl("promscaler", "simulate", *flags, str(scenario), home=tmp_path)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "simulate" in err and "does not apply" in err
    code, _, err = await _kubectl("promscaler", "--context", "prod", "backtest", "x.yaml", home=tmp_path)
    assert code == 2 and "--context does not apply" in err and err.count("\n") == 1
    code, out, _ = await _kubectl("promscaler", home=tmp_path)
    assert code == 2 and "explain" in out and "--context" in out
    code, _, err = await _kubectl("promscaler", "demo", home=tmp_path)
    assert code == 2 and "unknown command 'demo'" in err
