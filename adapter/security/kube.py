"""`kubernetes.aio` clients for the delegated reviews, from a kubeconfig or the pod's service account."""

from __future__ import annotations

import os

from kubernetes.aio import client, config

__all__ = ["api_client", "in_cluster"]


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


async def api_client(kubeconfig: str | None) -> client.ApiClient | None:
    """A client for `kubeconfig`, else in-cluster config, else None (no delegation possible)."""
    if kubeconfig:
        try:
            return await config.new_client_from_config(config_file=kubeconfig, persist_config=False)
        except Exception as exc:  # the loader raises several unrelated types
            raise ValueError(f"cannot load kubeconfig {kubeconfig}: {exc}") from None
    if in_cluster():
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)
        return client.ApiClient(configuration=cfg)
    return None
