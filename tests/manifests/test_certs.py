"""`python -m apiservice.certs`: a CA and serving certificate for the Service's DNS names, the
Secret manifest, and the APIService objects with the caBundle (comments kept), all in the output
directory: tracked files are never rewritten."""

from __future__ import annotations

import base64
import datetime as dt
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from .conftest import APISERVICE, ROOT

SVC_DNS = "promscaler-adapter.promscaler.svc"


def run_certs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apiservice.certs", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def api_dir(tmp_path: Path) -> Path:
    d = tmp_path / "apiservice"
    shutil.copytree(APISERVICE, d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return d


def _bundles(d: Path) -> dict[str, str]:
    """caBundle per APIService in the output directory's apiservices.yaml."""
    out = {}
    for doc in yaml.safe_load_all((d / "apiservices.yaml").read_text()):
        if doc and doc["kind"] == "APIService":
            out[doc["metadata"]["name"]] = doc["spec"].get("caBundle")
    return out


def test_creates_a_verifying_chain_and_patches_cabundle(tmp_path: Path, api_dir: Path) -> None:
    before = {p.name: p.read_text() for p in api_dir.glob("*.yaml")}
    out = tmp_path / "certs"
    r = run_certs("--namespace", "promscaler", "--service", "promscaler-adapter", "--out", str(out),
                  "--apiservice-dir", str(api_dir))
    assert r.returncode == 0, r.stderr
    assert "caBundle set in v1beta1.custom.metrics.k8s.io, v1beta2.custom.metrics.k8s.io" in r.stdout

    ca_pem = (out / "ca.crt").read_bytes()
    bundles = _bundles(out)
    assert len(bundles) == 3 and all(base64.b64decode(b) == ca_pem for b in bundles.values())

    ca = x509.load_pem_x509_certificate(ca_pem)
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    for name in ("promscaler-adapter", "promscaler-adapter.promscaler", SVC_DNS, SVC_DNS + ".cluster.local"):
        verifier = PolicyBuilder().store(Store([ca])).build_server_verifier(x509.DNSName(name))
        chain = verifier.verify(leaf, [])
        assert chain[-1] == ca
    other = PolicyBuilder().store(Store([ca])).build_server_verifier(x509.DNSName("evil.example.com"))
    with pytest.raises(VerificationError):
        other.verify(leaf, [])
    key = serialization.load_pem_private_key((out / "tls.key").read_bytes(), None)
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(*spki) == leaf.public_key().public_bytes(*spki)
    assert (out / "tls.key").stat().st_mode & 0o077 == 0 and (out / "ca.key").stat().st_mode & 0o077 == 0

    # the source manifests are untouched; the written APIServices are the source's with only the
    # caBundle lines changed (comments and layout kept)
    assert {p.name: p.read_text() for p in api_dir.glob("*.yaml")} == before
    source = [line for line in before["apiservices.yaml"].splitlines() if line.strip() != "---"]
    written = [line for line in (out / "apiservices.yaml").read_text().splitlines()[1:] if line.strip() != "---"]
    assert len(source) == len(written)
    changed = [(a, b) for a, b in zip(source, written, strict=True) if a != b]
    assert len(changed) == 3 and all("caBundle:" in a and "caBundle:" in b for a, b in changed)
    assert "# Set by `python -m apiservice.certs`" in (out / "apiservices.yaml").read_text()

    # the Secret is a valid kubernetes.io/tls Secret that the Deployment mounts
    secret = yaml.safe_load((out / "secret.yaml").read_text())
    kubernetes_validate.validate(secret, "1.36", strict=True)
    assert secret["type"] == "kubernetes.io/tls" and secret["metadata"]["name"] == "promscaler-adapter-tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == (out / "tls.crt").read_bytes()
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca_pem


def test_rerun_keeps_the_ca_and_renews_the_serving_cert(tmp_path: Path, api_dir: Path) -> None:
    out = tmp_path / "certs"
    assert run_certs("--out", str(out), "--apiservice-dir", str(api_dir)).returncode == 0
    first_bundles, first_leaf = _bundles(out), (out / "tls.crt").read_bytes()
    assert run_certs("--out", str(out), "--apiservice-dir", str(api_dir), "--days", "30").returncode == 0
    assert _bundles(out) == first_bundles
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert (out / "tls.crt").read_bytes() != first_leaf
    life = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert dt.timedelta(days=29) < life < dt.timedelta(days=31)


def test_resource_metrics_register_v1_and_v1beta1_or_only_v1beta1(tmp_path: Path) -> None:
    """apiservice/resource-metrics/ registers metrics.k8s.io v1 (Kubernetes 1.37) and v1beta1;
    `--skip-apiservice v1.metrics.k8s.io` leaves v1 out for a cluster before 1.37; a name that is
    not there is one clear line."""
    resource_dir = APISERVICE / "resource-metrics"
    both, old = tmp_path / "both", tmp_path / "old"
    r = run_certs("--out", str(both), "--apiservice-dir", str(resource_dir))
    assert r.returncode == 0, r.stderr
    docs = [d for d in yaml.safe_load_all((both / "apiservices.yaml").read_text()) if d]
    assert {d["metadata"]["name"]: d["spec"]["version"] for d in docs} == {
        "v1.metrics.k8s.io": "v1", "v1beta1.metrics.k8s.io": "v1beta1"}
    # equal versionPriority: the aggregator orders GA before beta, so v1 is the preferred version
    assert {d["spec"]["versionPriority"] for d in docs} == {100}
    for d in docs:
        kubernetes_validate.validate(d, "1.36", strict=True)
    r = run_certs("--out", str(old), "--apiservice-dir", str(resource_dir), "--skip-apiservice", "v1.metrics.k8s.io")
    assert r.returncode == 0, r.stderr
    assert list(_bundles(old)) == ["v1beta1.metrics.k8s.io"]
    r = run_certs("--out", str(old), "--apiservice-dir", str(resource_dir), "--skip-apiservice", "v2.metrics.k8s.io")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (f"apiservice.certs: --skip-apiservice: no APIService v2.metrics.k8s.io in "
                                f"{resource_dir} points at service promscaler/promscaler-adapter")


def test_wrong_service_is_an_error(tmp_path: Path, api_dir: Path) -> None:
    r = run_certs("--service", "nope", "--out", str(tmp_path / "c"), "--apiservice-dir", str(api_dir))
    assert r.returncode == 1
    assert r.stderr.strip() == (f"apiservice.certs: no APIService in {api_dir} points at service promscaler/nope")
    assert "Traceback" not in r.stderr


def test_served_pair_passes_a_real_handshake_as_the_aggregator_checks_it(tmp_path: Path, api_dir: Path) -> None:
    """A TLS server with tls.crt/tls.key; a client trusting only the caBundle, checking the Service DNS name."""
    out = tmp_path / "certs"
    assert run_certs("--out", str(out), "--apiservice-dir", str(api_dir)).returncode == 0
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(out / "tls.crt", out / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as s:
                s.sendall(b"ok")
        except ssl.SSLError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    ca_bundle = base64.b64decode(next(iter(_bundles(out).values())))
    client = ssl.create_default_context(cadata=ca_bundle.decode())
    with (socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
          client.wrap_socket(raw, server_hostname=SVC_DNS) as s):
        assert s.recv(2) == b"ok"
    t.join(5)
    listener.close()


def test_a_clone_stays_clean_and_the_output_is_ignored(tmp_path: Path) -> None:
    """Run as the README says, in a clone: `git status` shows nothing, the keys are git-ignored."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], check=True, timeout=60)
    for name in (".gitignore", "apiservice/certs.py"):  # this checkout's versions, committed or not
        shutil.copy(ROOT / name, clone / name)
    subprocess.run(["git", "-C", str(clone), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet",
                    "--allow-empty", "-m", "this checkout"], check=True)
    r = subprocess.run([sys.executable, "-m", "apiservice.certs", "--namespace", "promscaler", "--service",
                        "promscaler-adapter", "--out", "certs/"], cwd=clone, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert {p.name for p in (clone / "certs").iterdir()} >= {"ca.key", "tls.key", "secret.yaml", "apiservices.yaml"}
    status = subprocess.run(["git", "status", "--porcelain", "--ignored=no"], cwd=clone, capture_output=True,
                            text=True, check=True).stdout
    assert status == ""
    ignored = subprocess.run(["git", "check-ignore", "certs/tls.key", "certs/ca.key"], cwd=clone,
                             capture_output=True, text=True).stdout.split()
    assert ignored == ["certs/tls.key", "certs/ca.key"]
