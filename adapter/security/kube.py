"""Clients for the delegated reviews, from a kubeconfig or the pod's service account: the adapter's
shared JSON client (adapter.kube.client), so reviews fail with the same `ApiError` as lists do."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from promscaler.kubeapi import Kube

__all__ = ["api_client", "in_cluster"]


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


async def api_client(kubeconfig: str | None) -> Kube | None:
    """A client for `kubeconfig`, else in-cluster config, else None (no delegation possible)."""
    from kubernetes.aio.client.configuration import Configuration

    from adapter.kube import client

    cfg = Configuration()
    if kubeconfig:
        from kubernetes.aio.config.kube_config import load_kube_config

        try:
            await load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
        except Exception as exc:  # the loader raises several unrelated types
            raise ValueError(f"cannot load kubeconfig {kubeconfig}: {exc}") from None
        return client(cfg)
    if in_cluster():
        from kubernetes.aio.config.incluster_config import load_incluster_config

        load_incluster_config(client_configuration=cfg)
        return client(cfg)
    return None
