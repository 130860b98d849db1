"""Which Kubernetes release the controller loop follows, and what it does differently by release.

The decision engine reads the release from `ControllerConfig.kube_version`; the loop's own
differences (when a sync runs, what a status write carries) are `Features` fields with the rest
(decision/kubeversion.py), each with the kube-controller-manager change that made it. The release
is the cluster's own (`/version`, read once at start) unless `--kubernetes-version` names another.
"""

from __future__ import annotations

import asyncio
import logging

from autoscaler.decision.kubeversion import CURRENT, KubeVersion, parse_kube_version
from promscaler.kubeapi import Kube, Obj

from .apihealth import ApiHealth, describe, is_outage
from .stopping import wait_or_stop

log = logging.getLogger(__name__)

def release_of(info: Obj) -> KubeVersion:
    """The release in a `/version` answer: its gitVersion (`v1.37.0-gke.100`), else major.minor
    (`1`, `37+`); ValueError when neither reads."""
    git = info.get("gitVersion")
    if isinstance(git, str) and git:
        try:
            return parse_kube_version(git)
        except ValueError:
            pass
    return parse_kube_version(f"{info.get('major', '')}.{str(info.get('minor', '')).rstrip('+')}")


async def cluster_release(kube: Kube, health: ApiHealth, stop: asyncio.Event) -> KubeVersion | None:
    """The cluster's release from its `/version`, waiting out an API server that is away (None when
    stopped first); the current release, said once, when the answer is refused or names none."""
    while True:
        try:
            return release_of(await kube.get("/version"))
        except Exception as exc:
            if is_outage(exc):
                health.failed(exc)
                if await wait_or_stop(stop, health.wait_up()):
                    return None
                continue
            log.warning("cannot read the cluster's Kubernetes version from /version (%s): following Kubernetes %s; "
                        "--kubernetes-version names the release", describe(exc), CURRENT)
            return CURRENT
