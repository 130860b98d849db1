"""Field selectors (`?fieldSelector=metadata.name=web,status.phase!=Failed`) and the dotted-path
lookups they and the scale subresource need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promscaler.selectors import Selector, SelectorError, parse_selector

__all__ = ["FieldSelector", "Filter", "get_path", "parse_field_selector", "set_path"]


def get_path(obj: Any, path: str) -> Any:
    """Value at a dotted path (`.spec.replicas` or `spec.replicas`), or None."""
    cur = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    cur = obj
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    cur[parts[-1]] = value


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of `path=value` / `path!=value` terms over any scalar field."""

    terms: tuple[tuple[str, bool, str], ...] = ()  # (path, equal?, value)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((_field_text(get_path(obj, p)) == v) == eq for p, eq, v in self.terms)


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    terms = []
    for part in text.split(","):
        part = part.strip()
        for op, eq in (("!=", False), ("==", True), ("=", True)):
            if op in part:
                path, _, value = part.partition(op)
                if not path.strip():
                    raise SelectorError(f"invalid field selector {text!r}: {part!r} has no field name")
                terms.append((path.strip(), eq, value.strip()))
                break
        else:
            raise SelectorError(
                f"invalid field selector {text!r}: {part!r} is not of the form field=value or field!=value"
            )
    return FieldSelector(tuple(terms))


@dataclass(frozen=True, slots=True)
class Filter:
    """What a list or watch asks for: a namespace (or all), labels and fields."""

    namespace: str | None = None
    labels: Selector = field(default_factory=Selector)
    fields: FieldSelector = FieldSelector()

    @classmethod
    def parse(cls, namespace: str | None, label_selector: str | None, field_selector: str | None) -> Filter:
        return cls(namespace, parse_selector(label_selector), parse_field_selector(field_selector))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)
