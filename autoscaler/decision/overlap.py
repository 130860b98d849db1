"""Which autoscalers select the same pods: the check behind ScalingActive False / AmbiguousSelector.

Kubernetes keeps the selector each HPA of a namespace had at its last sync (1.37:
hpa_selector_store.go; a BiMultimap before) and, before it reads any metric, asks which of them
match some pod this HPA selects. More than one (this one included) and it stops, naming them, so
that two autoscalers never take turns at the same pods. The caller (the controller) keeps the
selectors; these are the pure parts: who matches, and the words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from promscaler.selectors import Selector

from .model import SelectorOverlap

__all__ = ["ambiguous_message", "overlap", "selecting"]

K = TypeVar("K")


def selecting(pod_labels: Iterable[Mapping[str, str]], selectors: Mapping[K, Selector]) -> list[K]:
    """The keys of the selectors that match at least one of the pods, in the mapping's order. Pods
    of one ReplicaSet share their labels: each distinct label set is matched once; a selector
    requiring a label=value no pod has is passed over without matching (most, in a namespace of
    many autoscalers: one sync costs a set lookup per other autoscaler)."""
    distinct = list({tuple(sorted(labels.items())): labels for labels in pod_labels}.values())
    present = {item for labels in distinct for item in labels.items()}
    out = []
    for key, sel in selectors.items():
        needed = sel.pinned()
        if needed is not None and needed not in present:
            continue
        if any(sel.matches(labels) for labels in distinct):
            out.append(key)
    return out


def overlap(selector: str, pod_labels: Iterable[Mapping[str, str]],
            selectors: Mapping[str, Selector]) -> SelectorOverlap:
    """The autoscalers ("namespace/name" -> selector) selecting these pods, the pods the scale's
    `selector` selects."""
    return SelectorOverlap(selector, tuple(sorted(selecting(pod_labels, selectors))))


def ambiguous_message(found: SelectorOverlap) -> str:
    """horizontal.go's words: the scale's selector as written, the keys as Go prints a slice of them."""
    return (f"pods by selector {found.selector} are controlled by multiple HPAs: "
            f"[{' '.join(found.autoscalers)}]")
