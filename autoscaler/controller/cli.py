"""`python -m autoscaler run`: flags (kube-controller-manager's names and defaults), logging,
signals. Everything else lives in controller.py."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from autoscaler.decision.kubeversion import KubeVersion, parse_kube_version
from autoscaler.decision.model import ControllerConfig
from promscaler import flags, logs
from promscaler.kubeapi import Kube
from promscaler.kubeconfig import SERVICE_ACCOUNT_DIR, ConfigNotFound, load_configuration, locate

from .controller import Controller, Settings
from .leases import check_timings

SA_NAMESPACE = SERVICE_ACCOUNT_DIR / "namespace"

NATIVE_HELP = (
    "also reconcile native autoscaling/v2 HorizontalPodAutoscalers. Off by default: kube-controller-manager's own "
    "HPA controller already reconciles them, and two controllers writing the same /scale would fight. Enable only "
    "where kube-controller-manager runs with the HPA controller disabled (--controllers=-horizontalpodautoscaling), "
    "or together with --dry-run to compare decisions without writing anything"
)


def _default_lease_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SA_NAMESPACE.read_text().strip() or "kube-system"
    except OSError:
        return "kube-system"


def _release(text: str) -> KubeVersion:
    try:
        return parse_kube_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="promscaler-autoscaler run", formatter_class=logs.HelpFormatter,
        description="Reconcile HorizontalAutoscalers (promscaler.io/v1alpha1) against a Kubernetes API server.")
    logs.add_version_flag(p, "promscaler-autoscaler")
    p.add_argument("--kubeconfig", help="kubeconfig file; default: $KUBECONFIG, else the in-cluster service account, "
                                        "else ~/.kube/config")
    p.add_argument("--context", help="kubeconfig context (default: the current context)")
    p.add_argument("--namespace", help="only watch autoscalers and pods in this namespace (default: all namespaces)")
    p.add_argument("--dry-run", action="store_true",
                   help="shadow mode: decide but never write /scale; own autoscalers still get status and events, "
                        "native HPAs get nothing written (their decision is exported on /metrics and logged next to "
                        "the cluster's)")
    p.add_argument("--reconcile-native-hpas", action="store_true", help=NATIVE_HELP)
    g = p.add_argument_group("horizontal pod autoscaler (kube-controller-manager names and defaults)")
    g.add_argument("--kubernetes-version", type=_release, default=None, metavar="VERSION",
                   help="follow the HPA controller of this Kubernetes release, e.g. 1.36 (default: the cluster's own, "
                        "read from /version at start): when a new or changed autoscaler is synced, what status "
                        "carries, and the decisions")
    g.add_argument("--horizontal-pod-autoscaler-sync-period", type=flags.duration, default=15.0, metavar="DURATION",
                   help="how often every autoscaler is re-synced")
    g.add_argument("--concurrent-horizontal-pod-autoscaler-syncs", type=flags.positive_int, default=20, metavar="N",
                   help="autoscalers synced concurrently (default 20: kube-controller-manager's 5 goroutines wait on "
                        "the network, so do these coroutines; 20 keep 1,000 autoscalers on a 15s period)")
    g.add_argument("--horizontal-pod-autoscaler-tolerance", type=flags.non_negative_float, default=0.1, metavar="RATIO",
                   help="minimum change in the desired-to-actual metric ratio to scale")
    g.add_argument("--horizontal-pod-autoscaler-cpu-initialization-period", type=flags.duration, default=300.0,
                   metavar="DURATION",
                   help="after pod start, CPU samples may be skipped")
    g.add_argument("--horizontal-pod-autoscaler-initial-readiness-delay", type=flags.duration, default=30.0,
                   metavar="DURATION",
                   help="after pod start, readiness changes count as initial readiness")
    g.add_argument("--horizontal-pod-autoscaler-downscale-stabilization", type=flags.duration, default=300.0,
                   metavar="DURATION",
                   help="scale-down looks back this far and takes the highest recommendation")
    c = p.add_argument_group("API client (kube-controller-manager names)")
    c.add_argument("--kube-api-qps", type=flags.non_negative_float, default=500.0, metavar="QPS",
                   help="requests per second to the API server, metrics APIs included (default 500: 1,000 autoscalers "
                        "with two metrics each keep a 15s period; 0: no limit)")
    c.add_argument("--kube-api-burst", type=flags.positive_int, default=1000, metavar="N",
                   help="requests allowed above --kube-api-qps in a burst")
    le = p.add_argument_group("leader election and sharding (kube-controller-manager names and defaults; "
                              "sharding uses the same lease timings)")
    le.add_argument("--leader-elect", type=flags.boolean, default=None, nargs="?", const=True, metavar="BOOL",
                    help="elect a leader on a Lease before syncing, so several replicas are safe "
                         "(default true; false with --dry-run, which writes no Lease, or with --sharding)")
    le.add_argument("--sharding", type=flags.boolean, default=False, nargs="?", const=True, metavar="BOOL",
                    help="every replica syncs: each autoscaler is owned by one live replica (a Lease per replica "
                         "named <resource-name>-<identity>, rendezvous hashing of namespace/name over the members); "
                         "excludes --leader-elect (default false: one replica syncs everything)")
    le.add_argument("--leader-elect-lease-duration", type=flags.duration, default=15.0, metavar="DURATION",
                    help="how long a non-leader waits after the last renewal before taking the lease "
                         "(sharding: before expelling a member that stopped renewing)")
    le.add_argument("--leader-elect-renew-deadline", type=flags.duration, default=10.0, metavar="DURATION",
                    help="how long the leader keeps trying to renew before it stops leading "
                         "(sharding: before a member stops syncing)")
    le.add_argument("--leader-elect-retry-period", type=flags.duration, default=2.0, metavar="DURATION",
                    help="how often candidates try to acquire or renew the lease")
    le.add_argument("--leader-elect-resource-name", default="promscaler-autoscaler",
                    help="name of the Lease (sharding: the members' Lease name prefix and shard group label)")
    le.add_argument("--leader-elect-resource-namespace", default=None,
                    help="namespace of the Lease (default: the pod's namespace, else kube-system)")
    o = p.add_argument_group("serving and logging")
    o.add_argument("--http-address", default="0.0.0.0", help="bind address of /healthz, /readyz, /metrics")
    o.add_argument("--http-port", type=int, default=8080,
                   help="port of /healthz, /readyz, /metrics (0: any free port; -1: off)")
    logs.add_logging_flags(o, default_format="json")
    return p


def settings_from_args(args: argparse.Namespace) -> Settings:
    try:
        check_timings(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                      args.leader_elect_retry_period)
    except ValueError:  # the same rule, said in the flags' names
        raise ValueError("--leader-elect-lease-duration must exceed --leader-elect-renew-deadline, "
                         "which must exceed --leader-elect-retry-period") from None
    if args.sharding and args.leader_elect:
        raise ValueError("--sharding and --leader-elect are mutually exclusive: with sharding every replica syncs "
                         "its own share, with leader election one replica syncs everything")
    return Settings(
        sync_period=args.horizontal_pod_autoscaler_sync_period,
        workers=args.concurrent_horizontal_pod_autoscaler_syncs,
        config=ControllerConfig(
            tolerance=args.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period=args.horizontal_pod_autoscaler_cpu_initialization_period,
            initial_readiness_delay=args.horizontal_pod_autoscaler_initial_readiness_delay,
            downscale_stabilization_window=args.horizontal_pod_autoscaler_downscale_stabilization,
        ),
        kube_version=args.kubernetes_version,
        dry_run=args.dry_run,
        reconcile_native_hpas=args.reconcile_native_hpas,
        namespace=args.namespace,
        leader_elect=(not args.dry_run and not args.sharding) if args.leader_elect is None else args.leader_elect,
        sharding=args.sharding,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        lease_name=args.leader_elect_resource_name,
        lease_namespace=args.leader_elect_resource_namespace or _default_lease_namespace(),
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        http_host=args.http_address,
        http_port=None if args.http_port < 0 else args.http_port,
    )


async def run(settings: Settings, kubeconfig: str | None, context: str | None) -> int:
    source = locate(kubeconfig)
    try:
        configuration, source = await load_configuration(kubeconfig, context, source=source)
    except ConfigNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # one line: the file, and what is wrong with it
        print(f"error: cannot load Kubernetes configuration from {source}: {exc}", file=sys.stderr)
        return 1
    logs.vlog(logging.getLogger(__name__), 1, "Kubernetes configuration from %s: %s", source, configuration.host)
    kube = Kube(configuration)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await Controller(kube, settings).run(stop)
    finally:
        await kube.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    logs.setup(args.v, args.log_format)
    return asyncio.run(run(settings, args.kubeconfig, args.context))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
