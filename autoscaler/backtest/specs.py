"""Autoscaler spec files (autoscaling/v2 HorizontalPodAutoscaler or promscaler
HorizontalAutoscaler YAML, one or more documents) -> parsed specs, errors with file and field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autoscaler.decision import HPASpec, SpecError, parse_spec

__all__ = ["KINDS", "Spec", "SpecFileError", "load_specs"]

KINDS = ("HorizontalPodAutoscaler", "HorizontalAutoscaler")


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


def load_specs(path: str) -> list[Spec]:
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
        try:
            spec = parse_spec(doc.get("spec"), "spec")
        except SpecError as exc:
            raise SpecFileError(f"{where}: {exc}") from None
        ns = meta.get("namespace")
        out.append(Spec(f"{short} ({name})", name, ns if isinstance(ns, str) else None, doc["kind"], spec, doc))
    if not out:
        raise SpecFileError(f"{path}: no autoscaler in the file")
    return out
