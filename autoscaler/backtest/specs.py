"""Autoscaler spec files (autoscaling/v2 HorizontalPodAutoscaler, promscaler HorizontalAutoscaler or
KEDA ScaledObject YAML, one or more documents) -> parsed specs, errors with file and field.

A ScaledObject is read as KEDA turns it into an HPA (decision/keda.py): `raw` is then the
HorizontalAutoscaler promscaler decides with (what `tune` edits), `source` the ScaledObject, and
`queries` each trigger's PromQL (what backtest replays)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoscaler.decision import HPASpec, SpecError, admit, parse_spec
from autoscaler.decision.keda import is_scaled_object, read_scaled_object, write_scaled_object
from autoscaler.decision.kubeversion import CURRENT, KubeVersion

__all__ = ["KINDS", "Spec", "SpecFileError", "load_specs"]

KINDS = ("HorizontalPodAutoscaler", "HorizontalAutoscaler", "ScaledObject")


class SpecFileError(ValueError):
    pass


@dataclass(frozen=True)
class Spec:
    label: str                 # "file.yaml (name)"
    name: str
    namespace: str | None
    kind: str
    spec: HPASpec
    raw: dict[str, Any]
    source: Mapping[str, Any] | None = None           # a ScaledObject's document
    queries: Mapping[str, str] = field(default_factory=dict)   # a ScaledObject's: metric name -> PromQL
    triggers: tuple[int, ...] = ()   # a ScaledObject's: the trigger of each metric of `raw` (as read once)

    def parse(self, raw: dict[str, Any]) -> HPASpec:
        """The spec of `raw`, an edit of this spec's `raw` (tune's candidates): a ScaledObject's
        is read as KEDA reads the written ScaledObject (its field names in errors)."""
        if self.source is not None:
            return read_scaled_object(self.written(raw)).spec
        return parse_spec(raw.get("spec"), "spec")

    def written(self, raw: dict[str, Any]) -> dict[str, Any]:
        """`raw` as the user's kind of object (a ScaledObject stays one)."""
        return raw if self.source is None else write_scaled_object(self.source, raw, self.triggers)


def load_specs(path: str, kube_version: KubeVersion = CURRENT) -> list[Spec]:
    """The autoscalers of a YAML file, checked as `kube_version`'s API server checks new objects."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise SpecFileError(f"{path}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    out = []
    for i, doc in enumerate(docs):
        where = path if len(docs) == 1 else f"{path}#{i + 1}"
        short = Path(path).name if len(docs) == 1 else f"{Path(path).name}#{i + 1}"
        if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
            raise SpecFileError(f"{where}: kind: must be one of {', '.join(KINDS)}")
        meta = doc.get("metadata") or {}
        name = str(meta.get("name") or Path(path).stem)
        ns = meta.get("namespace")
        try:
            if is_scaled_object(doc):
                so = read_scaled_object(doc)
                out.append(Spec(f"{short} ({name})", so.hpa["metadata"]["name"], so.namespace, doc["kind"], so.spec,
                                so.autoscaler, doc, so.queries, so.triggers))
                continue
            spec = parse_spec(doc.get("spec"), "spec")
            admit(spec, doc["kind"], kube_version)
        except SpecError as exc:
            raise SpecFileError(f"{where}: {exc}") from None
        out.append(Spec(f"{short} ({name})", name, ns if isinstance(ns, str) else None, doc["kind"], spec, doc))
    if not out:
        raise SpecFileError(f"{path}: no autoscaler in the file")
    return out
