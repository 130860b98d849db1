"""Counters of authentication and authorization outcomes, on the adapter's `/metrics` registry."""

from __future__ import annotations

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
