"""Small object builders for the kubesim tests."""

from __future__ import annotations


def deployment(
    name: str, replicas: int = 1, labels: dict[str, str] | None = None, namespace: str | None = None
) -> dict:
    labels = labels or {"app": name}
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "app", "image": "example/app:1"}]}}},
    }


def pod(
    name: str, labels: dict[str, str] | None = None, phase: str | None = None, namespace: str | None = None
) -> dict:
    meta = {"name": name, "labels": labels or {}, **({"namespace": namespace} if namespace else {})}
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"containers": [{"name": "app", "image": "example/app:1"}]}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj
