"""Command-line flags -> one typed `Settings`.

Flag names are prometheus-adapter's and the Kubernetes apiserver libraries', so an existing
deployment's arguments carry over; unknown flags are an error (argparse exits 2 naming it).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from promscaler import flags, logs
from promscaler.kubeconfig import SERVICE_ACCOUNT_DIR

__all__ = ["Settings", "build_parser", "parse_settings"]


@dataclass(frozen=True)
class Settings:
    # Prometheus
    prometheus_url: str = "http://127.0.0.1:9090"
    prometheus_auth_config: str | None = None
    prometheus_token_file: str | None = None
    prometheus_ca_file: str | None = None
    prometheus_client_tls_cert_file: str | None = None
    prometheus_client_tls_key_file: str | None = None
    prometheus_insecure_skip_tls_verify: bool = False
    prometheus_headers: tuple[tuple[str, str], ...] = ()
    prometheus_query_params: tuple[tuple[str, str], ...] = ()
    prometheus_timeout: float = 10.0
    prometheus_verb: str = "GET"
    prometheus_max_response_bytes: int = 16 << 20
    prometheus_max_series: int = 50_000
    query_cache_ttl: float | None = None  # None: 1/30 of the rule's rate range (<= 5s), else 1s
    query_refresh_ahead: bool = True
    query_freshness: float | None = None  # None: 1/3 of the rule's rate range (<= 15s), else 5s
    # rules and discovery
    config: str | None = None
    metrics_relist_interval: float = 60.0
    metrics_max_age: float | None = None
    metrics_discovery: str = "aggregate"  # or "series": the exact /api/v1/series listing
    config_check_interval: float = 5.0
    disable_custom_metrics: bool = False
    disable_external_metrics: bool = False
    fail_on_prometheus_unavailable: bool = False
    # Kubernetes (object labels for `*` + labelSelector)
    kubeconfig: str | None = None
    in_cluster: bool = False
    # serving
    insecure: bool = False
    port: int = 8080
    secure_port: int = 6443
    bind_address: str | None = None
    request_timeout: float = 30.0
    verbosity: int = 0  # klog -v
    log_format: str = "text"
    # security (implemented in adapter/security/; parsed and stored here)
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    cert_dir: str = "apiserver.local.config/certificates"
    tls_min_version: str | None = None
    tls_cipher_suites: tuple[str, ...] = ()
    client_ca_file: str | None = None
    requestheader_client_ca_file: str | None = None
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ("X-Remote-User",)
    requestheader_group_headers: tuple[str, ...] = ("X-Remote-Group",)
    requestheader_extra_headers_prefix: tuple[str, ...] = ("X-Remote-Extra-",)
    authentication_kubeconfig: str | None = None
    authorization_kubeconfig: str | None = None
    authentication_skip_lookup: bool = False
    authentication_token_webhook_cache_ttl: float = 10.0
    authorization_webhook_cache_authorized_ttl: float = 10.0
    authorization_webhook_cache_unauthorized_ttl: float = 10.0
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
    authentication_tolerate_lookup_failure: bool = False
    anonymous_auth: bool = True

    @property
    def listen_host(self) -> str:
        if self.bind_address:
            return self.bind_address
        return "127.0.0.1" if self.insecure else "0.0.0.0"

    @property
    def listen_port(self) -> int:
        return self.port if self.insecure else self.secure_port


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        self.exit(2, f"promscaler-adapter: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="promscaler-adapter", allow_abbrev=False, formatter_class=logs.HelpFormatter,
                description="Kubernetes custom/external metrics API server backed by Prometheus")
    logs.add_version_flag(p, "promscaler-adapter")
    # --flag or --flag=false, Go style
    b: dict[str, Any] = {"nargs": "?", "const": True, "type": flags.boolean, "metavar": "BOOL"}
    g = p.add_argument_group("prometheus")
    g.add_argument("--prometheus-url", default=Settings.prometheus_url,
                   help="URL of Prometheus or a Prometheus-compatible API (with scheme, and any path prefix)")
    g.add_argument("--prometheus-auth-config", help="kubeconfig-style file with credentials for Prometheus")
    g.add_argument("--prometheus-auth-incluster", **b, default=False,
                   help="authenticate to Prometheus with the pod's service-account token and CA "
                        f"({SERVICE_ACCOUNT_DIR}/token and ca.crt)")
    g.add_argument("--prometheus-token-file", help="file with a bearer token for Prometheus, re-read when it changes")
    g.add_argument("--prometheus-ca-file", help="CA bundle that verifies Prometheus' certificate (default: system CAs)")
    g.add_argument("--prometheus-client-tls-cert-file", help="client certificate for Prometheus (with the key file)")
    g.add_argument("--prometheus-client-tls-key-file", help="client key for Prometheus (with the certificate file)")
    g.add_argument("--prometheus-insecure-skip-tls-verify", **b, default=False,
                   help="do not verify Prometheus' certificate")
    g.add_argument("--prometheus-header", type=flags.key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="extra HTTP header on every request to Prometheus (repeatable)")
    g.add_argument("--prometheus-query-param", type=flags.key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="extra query parameter on every query, e.g. dedup=true, partial_response=false")
    g.add_argument("--prometheus-timeout", type=flags.duration, default=Settings.prometheus_timeout,
                   help="longest a call to Prometheus may take")
    g.add_argument("--prometheus-verb", choices=("GET", "POST"), default="GET",
                   help="HTTP method of queries (POST for very long label selectors)")
    g.add_argument("--prometheus-max-response-bytes", type=flags.positive_int,
                   default=Settings.prometheus_max_response_bytes,
                   help="largest Prometheus answer read, decompressed (default 16 MiB); a larger one fails "
                        "the request with 503 (raise it for --metrics-discovery=series on very large clusters)")
    g.add_argument("--prometheus-max-series", type=flags.positive_int, default=Settings.prometheus_max_series,
                   help="most series one metrics query may answer; more fails the request with 503")
    g.add_argument("--query-cache-ttl", type=flags.duration, default=None,
                   help="how long a query answer may be reused (0 disables); default: 1/30 of the "
                        "rule's rate range (2s for [1m]), at most 5s, or 1s for rules without a range")
    g.add_argument("--query-refresh-ahead", **b, default=Settings.query_refresh_ahead,
                   help="keep the answers of recently asked metric queries warm: re-query Prometheus in the "
                        "background shortly before they stop being fresh, while somebody asked within two "
                        "periods (default true)")
    g.add_argument("--query-freshness", type=flags.duration, default=None,
                   help="with --query-refresh-ahead, the oldest an answer may be; default: a third of the rule's "
                        "rate range (20s for [1m] -> 15s cap), at most 15s, or 5s for rules without a range")
    g = p.add_argument_group("rules and discovery")
    g.add_argument("--config", "-c", help="prometheus-adapter rules file (required)")
    g.add_argument("--metrics-relist-interval", type=flags.duration, default=Settings.metrics_relist_interval,
                   help="how often the series behind the rules are listed again")
    g.add_argument("--metrics-max-age", type=flags.duration, default=None,
                   help="a metric is listed while it has samples this recent (default: --metrics-relist-interval)")
    g.add_argument("--metrics-discovery", choices=("aggregate", "series"), default=Settings.metrics_discovery,
                   help="aggregate: Prometheus groups series by name and resource labels (cost independent of "
                        "the number of series); series: list every series with /api/v1/series")
    g.add_argument("--config-check-interval", type=flags.duration, default=Settings.config_check_interval,
                   help="how often the rules file is checked for changes")
    g.add_argument("--disable-custom-metrics", **b, default=False, help="do not serve custom.metrics.k8s.io")
    g.add_argument("--disable-external-metrics", **b, default=False, help="do not serve external.metrics.k8s.io")
    g.add_argument("--fail-on-prometheus-unavailable", **b, default=False,
                   help="exit at start-up when Prometheus does not answer, instead of waiting for it")
    g = p.add_argument_group("kubernetes")
    g.add_argument("--kubeconfig", "--lister-kubeconfig", dest="kubeconfig",
                   help="kubeconfig of the cluster whose objects labelSelectors select; default: $KUBECONFIG, "
                        "else the in-cluster service account, else ~/.kube/config, else none (offline)")
    g.add_argument("--in-cluster", **b, default=False, help="use the in-cluster service account config only")
    g = p.add_argument_group("serving")
    g.add_argument("--insecure", **b, default=False, help="plain HTTP without authentication (local use, tests)")
    g.add_argument("--port", type=int, default=Settings.port, help="port for --insecure")
    g.add_argument("--secure-port", type=int, default=Settings.secure_port, help="HTTPS port")
    g.add_argument("--bind-address", help="address to listen on (default: 0.0.0.0, or 127.0.0.1 with --insecure)")
    g.add_argument("--request-timeout", type=flags.duration, default=Settings.request_timeout,
                   help="longest a metrics request may wait on Prometheus (caps --prometheus-timeout)")
    g = p.add_argument_group("logging")
    logs.add_logging_flags(g)
    g.add_argument("--logtostderr", **b, default=True, help="accepted for compatibility (logs always go to stderr)")
    g = p.add_argument_group("security")
    g.add_argument("--tls-cert-file", help="serving certificate (default: a self-signed one in --cert-dir)")
    g.add_argument("--tls-private-key-file", help="key of --tls-cert-file")
    g.add_argument("--cert-dir", default=Settings.cert_dir,
                   help="where the self-signed serving certificate is kept when --tls-cert-file is not given")
    g.add_argument("--tls-min-version", help="lowest TLS version served, e.g. VersionTLS12 (default: TLS 1.2)")
    g.add_argument("--tls-cipher-suites", type=flags.csv, default=(),
                   help="comma-separated cipher suites (Go names); default: Python's secure defaults")
    g.add_argument("--client-ca-file", help="CA that verifies client certificates")
    g.add_argument("--requestheader-client-ca-file",
                   help="CA that verifies the aggregator's client certificate (front-proxy)")
    g.add_argument("--requestheader-allowed-names", type=flags.csv, default=(),
                   help="common names allowed to pass the user in request headers (default: any)")
    g.add_argument("--requestheader-username-headers", type=flags.csv, default=Settings.requestheader_username_headers,
                   help="headers that carry the user name")
    g.add_argument("--requestheader-group-headers", type=flags.csv, default=Settings.requestheader_group_headers,
                   help="headers that carry the groups")
    g.add_argument("--requestheader-extra-headers-prefix", type=flags.csv,
                   default=Settings.requestheader_extra_headers_prefix, help="header prefixes of extra user info")
    g.add_argument("--authentication-kubeconfig", help="kubeconfig for TokenReviews (default: in-cluster)")
    g.add_argument("--authorization-kubeconfig", help="kubeconfig for SubjectAccessReviews (default: in-cluster)")
    g.add_argument("--authentication-skip-lookup", **b, default=False,
                   help="do not read the requestheader CA from the extension-apiserver-authentication ConfigMap")
    g.add_argument("--authentication-token-webhook-cache-ttl", type=flags.duration, default=10.0,
                   help="how long TokenReview answers are cached")
    g.add_argument("--authorization-webhook-cache-authorized-ttl", type=flags.duration, default=10.0,
                   help="how long an allowed SubjectAccessReview is cached")
    g.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=flags.duration, default=10.0,
                   help="how long a denied SubjectAccessReview is cached")
    g.add_argument("--authorization-always-allow-paths", type=flags.csv,
                   default=Settings.authorization_always_allow_paths, help="paths served without authorization")
    g.add_argument("--authentication-tolerate-lookup-failure", **b, default=False,
                   help="start even when the authentication ConfigMap cannot be read")
    g.add_argument("--anonymous-auth", **b, default=True, help="serve requests without credentials as anonymous")
    return p


def parse_settings(argv: list[str] | None = None, service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> Settings:
    ns = build_parser().parse_args(argv)
    d = vars(ns)
    d["verbosity"] = d.pop("v")
    d.pop("logtostderr")
    if d.pop("prometheus_auth_incluster"):  # prometheus-adapter: the in-cluster rest config's token and CA
        d["prometheus_token_file"] = d["prometheus_token_file"] or str(service_account_dir / "token")
        d["prometheus_ca_file"] = d["prometheus_ca_file"] or str(service_account_dir / "ca.crt")
    url = urlsplit(d["prometheus_url"])
    if url.scheme not in ("http", "https") or not url.netloc:
        build_parser().error(f"--prometheus-url {d['prometheus_url']!r}: not an http:// or https:// URL "
                             f"(for example http://{d['prometheus_url'].split('://')[-1] or '127.0.0.1:9090'})")
    d["prometheus_headers"] = tuple(d.pop("prometheus_header"))
    d["prometheus_query_params"] = tuple(d.pop("prometheus_query_param"))
    if (d["prometheus_client_tls_cert_file"] and not d["prometheus_client_tls_key_file"]) or (
        d["prometheus_client_tls_key_file"] and not d["prometheus_client_tls_cert_file"]
    ):
        build_parser().error("--prometheus-client-tls-cert-file and --prometheus-client-tls-key-file go together")
    if d["metrics_relist_interval"] <= 0:
        build_parser().error("--metrics-relist-interval must be positive")
    return Settings(**d)
