"""Clients for the delegated reviews, as kube-apiserver's `--authentication-kubeconfig` and
`--authorization-kubeconfig` pick them: the file given, else the pod's service account. Loaded by
promscaler.kubeconfig, served by the adapter's shared JSON client (adapter.kube.client), so reviews
fail with the same `ApiError` as lists do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from promscaler.kubeconfig import Source, in_cluster, load_configuration

if TYPE_CHECKING:
    from promscaler.kubeapi import Kube

__all__ = ["api_client", "in_cluster"]


async def api_client(kubeconfig: str | None) -> Kube | None:
    """A client for `kubeconfig`, else in-cluster config, else None (no delegation possible)."""
    source = Source("flag", kubeconfig) if kubeconfig else Source("in-cluster", None) if in_cluster() else None
    if source is None:
        return None
    from adapter.kube import client

    try:
        cfg, _ = await load_configuration(kubeconfig, source=source)
    except Exception as exc:  # the loaders raise several unrelated types
        raise ValueError(f"cannot load kubeconfig {kubeconfig or '(in-cluster)'}: {exc}") from None
    return client(cfg)
