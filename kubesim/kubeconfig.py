"""A kubeconfig for the sandbox, so the real `kubernetes` client and kubectl connect to it as to
any cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["aio_client_configuration", "client_configuration", "kubeconfig", "write_kubeconfig"]


def kubeconfig(server: str, token: str, namespace: str = "default", name: str = "kubesim",
               ca_file: str | None = None) -> dict[str, Any]:
    """`ca_file`: the CA that signed an https server's certificate (`certificate-authority`)."""
    cluster: dict[str, Any] = {"server": server, **({"certificate-authority": ca_file} if ca_file else {})}
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
    }


def write_kubeconfig(path: Path, server: str, token: str, ca_file: str | None = None) -> Path:
    path.write_text(yaml.safe_dump(kubeconfig(server, token, ca_file=ca_file), sort_keys=False))
    path.chmod(0o600)
    return path


def client_configuration(server: str, token: str):  # -> kubernetes.client.Configuration
    """A sync `kubernetes.client.Configuration` for the sandbox (no kubeconfig file needed)."""
    from kubernetes import client

    conf = client.Configuration(host=server)
    conf.api_key = {"BearerToken": token}
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    return conf


def aio_client_configuration(server: str, token: str):  # -> kubernetes.aio.client.Configuration
    """The same for `kubernetes.aio`."""
    from kubernetes.aio import client

    conf = client.Configuration(host=server)
    conf.api_key = {"BearerToken": token}
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    return conf
