"""Helm's own engine (helm-sdkpy: Helm v4 as a shared library) for the chart tests: lint a chart
with a given values file, install it into a fresh sandbox API server and read back what it created."""

from __future__ import annotations

import asyncio
import copy
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import helm_sdkpy
import yaml

from kubesim.apiserver import KubeSim

from .conftest import CHART

__all__ = ["STUB_CRDS", "WARNING", "installed", "lint", "merge"]

WARNING = 2  # helm's support.WarningSev; INFO is 1, ERROR 4
SEVERITY = {1: "INFO", 2: "WARNING", 4: "ERROR"}
HA_CRD = "horizontalautoscalers.promscaler.io"


def merge(base: Any, over: Any) -> Any:
    """Helm's coalescing of a user values file over the chart's: maps merge, null removes a key."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v) if k in out else copy.deepcopy(v)
    return out


def lint(tmp: Path, values: dict[str, Any] | None = None) -> list[str]:
    """`helm lint` of the chart, with `values` laid over values.yaml (Helm's lint reads the chart's
    own values.yaml): one 'SEVERITY path: message' line per finding."""
    chart = tmp / "promscaler"
    shutil.copytree(CHART, chart)
    if values is not None:
        defaults = yaml.safe_load((CHART / "values.yaml").read_text())
        (chart / "values.yaml").write_text(yaml.safe_dump(merge(defaults, values), sort_keys=False))
    conf = helm_sdkpy.Configuration(namespace="promscaler")
    result = asyncio.run(helm_sdkpy.Lint(conf).run(str(chart)))
    out = [f"{SEVERITY.get(m['Severity'], m['Severity'])} {m['Path']}" for m in result.get("Messages") or []]
    return out + [f"ERROR {e}" for e in result.get("Errors") or []]


# CRDs of the operators some values turn on (cert-manager, prometheus-operator): names and
# versions only, as the sandbox validates no schema.
def _stub_crd(group: str, plural: str, kind: str, version: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


STUB_CRDS = [
    _stub_crd("cert-manager.io", "certificates", "Certificate", "v1"),
    _stub_crd("cert-manager.io", "issuers", "Issuer", "v1"),
    _stub_crd("monitoring.coreos.com", "servicemonitors", "ServiceMonitor", "v1"),
    _stub_crd("monitoring.coreos.com", "prometheusrules", "PrometheusRule", "v1"),
]


@contextmanager
def installed(values: dict[str, Any] | None = None, release: str = "promscaler",
              namespace: str = "promscaler") -> Iterator[tuple[KubeSim, dict[str, Any]]]:
    """`helm install release charts/promscaler -n namespace -f values` into a fresh sandbox
    (without its pre-installed HorizontalAutoscaler CRD, which the chart creates)."""
    with KubeSim(ready_delay=0.2) as sim:
        sim.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, HA_CRD)
        for crd in STUB_CRDS:
            sim.apply(copy.deepcopy(crd))
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        conf = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=sim.kubeconfig_path)
        result = asyncio.run(helm_sdkpy.Install(conf).run(release, str(CHART), values=values, wait=False, timeout=60))
        yield sim, result


def install_error(values: dict[str, Any]) -> str:
    """The message of a refused install (values schema), or '' when it went through."""
    try:
        with installed(values):
            return ""
    except helm_sdkpy.HelmError as exc:
        return str(exc)
