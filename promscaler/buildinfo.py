"""`promscaler_build_info`, the conventional constant-1 series naming the running build, and the
exposition settings both components share (no `_created` companion series)."""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Gauge, disable_created_metrics

from promscaler import __version__ as VERSION

__all__ = ["VERSION", "register_build_info"]

disable_created_metrics()  # `_created` samples double the series count and no dashboard reads them


def register_build_info(registry: CollectorRegistry, component: str) -> Gauge:
    info = Gauge("promscaler_build_info", "A constant 1 labelled with the running build.",
                 ["component", "version", "python_version"], registry=registry)
    info.labels(component, VERSION, platform.python_version()).set(1)
    return info
