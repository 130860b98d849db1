"""Kubernetes configuration as controller-runtime resolves it: `--kubeconfig`, else `$KUBECONFIG`,
else the in-cluster service account, else `~/.kube/config`; the controller and the adapter
as real processes against the sandbox API server."""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
import pytest
import yaml
from kubernetes.aio.config.incluster_config import InClusterConfigLoader

from adapter.security import pki
from kubesim.apiserver import KubeSim
from kubesim.kubeconfig import kubeconfig
from kubesim.net import free_port
from kubesim.processes import AdapterProcess, stop_process
from promscaler.kubeapi import ApiError, Kube
from promscaler.kubeconfig import ConfigNotFound, Source, context_namespace, load_configuration, locate

from ..support import run_kubectl

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "tests" / "adapter" / "rules.yaml"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _controller_ready(env: dict[str, str], expect_source: str) -> str:
    """Start `autoscaler run` with no --kubeconfig, wait for /readyz (informers synced against the
    sim), and return its log."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "autoscaler", "run", "--leader-elect=false", "--log-format=text",
                             "--v=1", "--http-address=127.0.0.1", f"--http-port={port}"],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError("the controller never became ready")
    finally:
        stop_process(proc)
    log = proc.stderr.read() if proc.stderr else ""
    assert f"Kubernetes configuration from {expect_source}" in log, log
    return log


def test_controller_takes_KUBECONFIG(sim, tmp_path):
    _controller_ready(_env(KUBECONFIG=sim.kubeconfig_path, HOME=str(tmp_path)), f"$KUBECONFIG={sim.kubeconfig_path}")


def test_controller_falls_back_to_home_kube_config(sim, tmp_path):
    (tmp_path / ".kube").mkdir()
    shutil.copy(sim.kubeconfig_path, tmp_path / ".kube" / "config")
    _controller_ready(_env(HOME=str(tmp_path)), str(tmp_path / ".kube" / "config"))


def test_controller_without_any_configuration_says_so_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "autoscaler", "run"], cwd=ROOT, capture_output=True, text=True,
                         env=_env(HOME=str(tmp_path)), timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "error: no Kubernetes configuration: pass --kubeconfig, set $KUBECONFIG, run in a cluster, "
        "or create ~/.kube/config"]


def test_adapter_takes_KUBECONFIG(sim, tmp_path, monkeypatch):
    """The adapter connects (API discovery, label informers) through $KUBECONFIG alone."""
    monkeypatch.setenv("KUBECONFIG", sim.kubeconfig_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    adapter = AdapterProcess("--prometheus-url", "http://127.0.0.1:1", "--config", str(RULES), "--v=2")
    try:
        adapter.wait_listening()
        deadline = time.monotonic() + 20
        while "Kubernetes configuration from" not in adapter.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"Kubernetes configuration from $KUBECONFIG={sim.kubeconfig_path}: {sim.url}" in adapter.stderr()
    finally:
        adapter.stop()


def _service_account(tmp_path: Path, token: str = "sa-token") -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    return sa


def test_precedence(tmp_path):
    sa = _service_account(tmp_path)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("{}")
    cluster = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    def where(flag=None, **env):
        return locate(flag, environ=env, home=home, service_account_dir=sa)

    assert where("/x", KUBECONFIG="/y", **cluster) == Source("flag", "/x")
    assert where(None, KUBECONFIG="/y", **cluster) == Source("env", "/y")
    assert where(None, **cluster) == Source("in-cluster", None)
    assert where(None) == Source("home", str(home / ".kube" / "config"))
    assert locate(None, environ={}, home=tmp_path / "nohome", service_account_dir=sa) is None
    assert locate(None, environ=cluster, home=tmp_path / "nohome", service_account_dir=tmp_path / "nosa") is None


def test_the_namespace_kubectl_would_use(tmp_path):
    # kubectl without -n: the context's namespace (current or --context), in-cluster the service
    # account's namespace file, else default.
    sa = _service_account(tmp_path)
    (sa / "namespace").write_text("team-a\n")
    cluster = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}], "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u", "namespace": "shop"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u"}}]}))

    def ns(flag=None, context=None, **env):
        return context_namespace(flag, context, environ=env, home=tmp_path / "nohome", service_account_dir=sa)

    assert ns(str(config)) == "shop"
    assert ns(str(config), "b") == "default"        # a context without a namespace
    assert ns(None, KUBECONFIG=f"{tmp_path / 'missing'}:{config}") == "shop"
    assert ns(None, "a", **cluster) == "team-a"     # in-cluster: contexts are a kubeconfig's
    assert ns(None) == "default"                    # nothing configured
    assert ns(str(tmp_path / "missing")) == "default"  # the request then says the file is missing


async def test_in_cluster_uses_the_service_account_token_and_ca(tmp_path):
    sa = _service_account(tmp_path, "the-pods-token")
    cfg, source = await load_configuration(
        None, environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
        home=tmp_path, service_account_dir=sa)
    assert source.kind == "in-cluster"
    assert cfg.host == "https://10.96.0.1:443"
    assert cfg.api_key["BearerToken"].endswith("the-pods-token")
    assert cfg.ssl_ca_cert == str(sa / "ca.crt")


def _https(tmp_path: Path) -> tuple[pki.KeyPair, tuple[str, str]]:
    """A private CA and a serving certificate for 127.0.0.1 it signed: (the CA, KubeSim's `tls` files)."""
    ca, _, cert, key = pki.write_self_signed(tmp_path)
    return ca, (str(cert), str(key))


def _pod(sim: KubeSim, tmp_path: Path, token: str, ca: pki.KeyPair) -> tuple[Path, dict[str, str]]:
    """A pod's view of the sandbox: its service account directory (token, the CA) and environment."""
    sa = _service_account(tmp_path, token)
    (sa / "ca.crt").write_bytes(ca.cert_pem)
    return sa, {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": sim.url.rsplit(":", 1)[1]}


async def test_in_cluster_against_the_sandbox_over_tls(tmp_path):
    """The service account's token and CA reach an API server that serves https with a private CA
    (as kube-apiserver does), found through KUBERNETES_SERVICE_HOST/PORT alone."""
    ca, tls = _https(tmp_path)
    with KubeSim(token="the-pods-token", authenticate=True, tls=tls) as sim:
        sa, environ = _pod(sim, tmp_path, "the-pods-token", ca)
        cfg, source = await load_configuration(None, environ=environ, home=tmp_path, service_account_dir=sa)
        assert source.kind == "in-cluster" and cfg.host == sim.url
        kube = Kube(cfg)
        try:
            namespaces = await kube.request("GET", "/api/v1/namespaces")
        finally:
            await kube.close()
        assert any(ns["metadata"]["name"] == "default" for ns in namespaces["items"])
        (sa / "token").write_text("someone-elses-token")  # the token really is what authenticates
        cfg, _ = await load_configuration(None, environ=environ, home=tmp_path, service_account_dir=sa)
        kube = Kube(cfg)
        try:
            with pytest.raises(ApiError) as denied:
                await kube.request("GET", "/api/v1/namespaces")
        finally:
            await kube.close()
        assert denied.value.status == 401


async def test_a_rotated_service_account_token_is_sent_once_the_client_reads_it_again(tmp_path, monkeypatch):
    """The kubelet rotates the projected token; the official in-cluster loader's refresh hook (which
    load_configuration keeps) reads the file again a minute after its last read, and each request
    asks the configuration for the token (Configuration.auth_settings), so the new one is sent from
    then on."""
    loaders: list[InClusterConfigLoader] = []  # the one load_configuration uses: its clock is moved below
    load_and_set = InClusterConfigLoader.load_and_set

    def recorded(self: InClusterConfigLoader, cfg: object) -> None:
        loaders.append(self)
        load_and_set(self, cfg)

    monkeypatch.setattr(InClusterConfigLoader, "load_and_set", recorded)
    ca, tls = _https(tmp_path)
    with KubeSim(token="first-token", authenticate=True, tls=tls) as sim:
        sa, environ = _pod(sim, tmp_path, "first-token", ca)
        cfg, _ = await load_configuration(None, environ=environ, home=tmp_path, service_account_dir=sa)
        [loader] = loaders
        kube = Kube(cfg)

        async def answer() -> int:
            try:
                await kube.request("GET", "/api/v1/namespaces")
                return 200
            except ApiError as exc:
                return exc.status

        try:
            first = await answer()
            (sa / "token").write_text("second-token")  # rotated: the server knows only the new token
            sim.tokens["second-token"] = sim.tokens.pop("first-token")
            within_the_minute = await answer()  # the client has not read the file again yet
            loader.token_expires_at = datetime.datetime.now()  # the minute has passed
            after = await answer()
        finally:
            await kube.close()
    assert (first, within_the_minute, after) == (200, 401, 200)


async def test_a_kubeconfigs_client_certificate_is_presented(tmp_path):
    """A kubeconfig's `client-certificate-data`/`client-key-data` (and `certificate-authority-data`)
    reach the client's TLS context: KubeSim requiring a client certificate from its CA answers with
    it, and refuses the handshake without it."""
    ca, tls = _https(tmp_path)
    client_ca = tmp_path / "client-ca.crt"
    users = pki.new_ca("client-ca")
    client_ca.write_bytes(users.cert_pem)
    user = pki.issue(users, "promscaler", client=True)
    with KubeSim(tls=tls, client_ca=str(client_ca)) as sim:
        answers = {}
        for name, identity in (("certificate", user), ("none", None)):
            doc = kubeconfig(sim.url, sim.token)
            doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(ca.cert_pem).decode()
            if identity is not None:
                doc["users"][0]["user"] |= {"client-certificate-data": base64.b64encode(identity.cert_pem).decode(),
                                            "client-key-data": base64.b64encode(identity.key_pem).decode()}
            (tmp_path / name).write_text(yaml.safe_dump(doc))
            cfg, _ = await load_configuration(str(tmp_path / name), environ={}, home=tmp_path)
            kube = Kube(cfg)
            try:
                answers[name] = len((await kube.request("GET", "/api/v1/namespaces"))["items"]) > 0
            except aiohttp.ClientError:  # the handshake refused: the connection ends (TLS 1.3: after it)
                answers[name] = "refused"
            finally:
                await kube.close()
    assert answers == {"certificate": True, "none": "refused"}


async def test_named_files_that_do_not_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match="/nonexistent"):
        await load_configuration("/nonexistent", environ={}, home=tmp_path)
    with pytest.raises(ConfigNotFound):
        await load_configuration(None, environ={}, home=tmp_path, service_account_dir=tmp_path)


async def test_the_sandboxs_kubeconfig_names_its_https_ca(tmp_path):
    """KubeSim over https with `tls_ca`: its own kubeconfig names the CA, so the official client
    (through promscaler.kubeconfig) and the real kubectl verify the server as on a real cluster;
    the same kubeconfig without the CA is refused by both (a CA no system store has)."""
    _, tls = _https(tmp_path)
    with KubeSim(tls=tls, tls_ca=str(tmp_path / "ca.crt")) as sim:
        doc = yaml.safe_load(Path(sim.kubeconfig_path).read_text())
        assert doc["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "ca.crt")
        del doc["clusters"][0]["cluster"]["certificate-authority"]
        (tmp_path / "no-ca").write_text(yaml.safe_dump(doc))
        answers = {}
        for name, path in (("with the CA", sim.kubeconfig_path), ("without", str(tmp_path / "no-ca"))):
            cfg, _ = await load_configuration(path, environ={}, home=tmp_path)
            kube = Kube(cfg)
            try:
                answers[name] = (await kube.request("GET", "/api"))["kind"]
            except aiohttp.ClientConnectorCertificateError:
                answers[name] = "unverified"
            finally:
                await kube.close()
            kubectl = run_kubectl(path, "get", "namespaces", "-o", "name")
            answers[f"kubectl {name}"] = ("default" in kubectl.stdout if kubectl.returncode == 0
                                          else "x509" in kubectl.stderr and "unverified")
    assert answers == {"with the CA": "APIVersions", "without": "unverified",
                       "kubectl with the CA": True, "kubectl without": "unverified"}
