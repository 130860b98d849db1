"""Counters of authentication and authorization outcomes, on the adapter's `/metrics` registry."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter

__all__ = ["SecurityMetrics"]


class SecurityMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.authn = Counter(
            "promscaler_adapter_authentication_attempts_total",
            "Authentication outcomes by result (success, failure, error) and authenticator",
            ["result", "authenticator"], registry=self.registry,
        )
        self.authz = Counter(
            "promscaler_adapter_authorization_decisions_total",
            "Authorization outcomes by decision (allowed, denied, error, always-allow-path) and source",
            ["decision", "source"], registry=self.registry,
        )
        self.tls_reloads = Counter(
            "promscaler_adapter_tls_reloads_total", "Serving TLS configuration reloads", registry=self.registry,
        )
        self._children: dict[tuple[str, str, str], Any] = {}

    def count(self, counter: str, outcome: str, source: str) -> None:
        """One more `outcome` from `source` on `counter` ("authn" or "authz"); labels() takes a lock
        and validates: once per label pair, not per request (as adapter.selfmetrics)."""
        key = (counter, outcome, source)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = getattr(self, counter).labels(outcome, source)
        child.inc()
