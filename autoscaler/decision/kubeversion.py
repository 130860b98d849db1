"""Which Kubernetes release's HPA controller a decision follows.

1.36 and 1.37 decide and write differently (scale to zero on by default, tolerance GA, generations,
messages: docs/controls.md lists every difference). The controller reads the cluster's `/version`;
offline commands default to the current release or take the one the user names.
"""

from __future__ import annotations

from typing import NamedTuple

from promscaler.kubeversion import CURRENT, KubeVersion, parse_kube_version

__all__ = ["CURRENT", "SUPPORTED", "Features", "KubeVersion", "features", "parse_kube_version", "supported_version"]


SUPPORTED = (KubeVersion(1, 36), CURRENT)
"""The releases a decision can follow; another is refused by name (`supported_version`)."""


class Features(NamedTuple):
    """What a release's HPA controller does by default (its feature gates at their defaults), as the
    decision reads it. docs/controls.md#kubernetes-136-and-137 has the tables, one row per field."""

    # HPAScaleToZero on (1.36: alpha, off; 1.37: beta, on, #139648): minReplicas 0 is valid with an
    # Object or External metric, the controller writes ScaledToZero and scales up from zero.
    scale_to_zero: bool
    # HPAConfigurableTolerance (beta and on since 1.35, GA in 1.37, #140107): behavior.scale{Up,Down}.
    # tolerance is honoured. On by default in both releases: the same decisions.
    configurable_tolerance: bool
    # #139029: an Object metric's failure reads "unable to get metric M on Kind ns/name: error"; before,
    # the format's arguments were out of order ("unable to get metric M: Kind on ns name/error").
    object_error_in_order: bool
    # The controller loop's own differences (controller/releases.py reads the release):
    # kubernetes#138294: a new autoscaler, and one whose spec changed (a new generation), is synced at
    # once; before, every add and update waited out the resync period (the queue's AddRateLimited).
    reconcile_at_once: bool
    # kubernetes#138228, #138653: status.observedGeneration and each condition's observedGeneration.
    generations: bool
    # kubernetes#139025 (StaleControllerConsistencyHPA, beta, on): a sync is deferred until the informer
    # has seen the controller's own last status write.
    read_own_writes: bool


def features(version: KubeVersion) -> Features:
    """The defaults of `version` (1.36 or 1.37; a later one decides as 1.37)."""
    at_least_137 = version >= (1, 37)
    return Features(scale_to_zero=at_least_137, configurable_tolerance=version >= (1, 35),
                    object_error_in_order=at_least_137, reconcile_at_once=at_least_137,
                    generations=at_least_137, read_own_writes=at_least_137)


def supported_version(text: str) -> KubeVersion:
    """`parse_kube_version`, refusing a release promscaler does not decide as (ValueError, one line)."""
    version = parse_kube_version(text)
    if version not in SUPPORTED:
        names = " or ".join(str(v) for v in SUPPORTED)
        raise ValueError(f"Kubernetes {version} is not one promscaler decides as (want {names}): {text!r}")
    return version
