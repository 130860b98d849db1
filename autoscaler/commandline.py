"""What the offline commands (simulate, explain, backtest, tune) share on their command lines: usage
errors as one line (the caller prints it and exits 2, without argparse's exit), the Kubernetes release
the decisions follow, and kube-controller-manager's HPA settings, by its flag names and defaults."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from autoscaler.decision import ControllerConfig
from autoscaler.decision.kubeversion import CURRENT, SUPPORTED, KubeVersion, supported_version
from promscaler import flags
from promscaler.logs import HelpFormatter, add_version_flag

__all__ = ["ArgError", "Parser", "add_controller_flags", "add_kube_version_flag", "controller_config"]


class ArgError(Exception):
    """A usage error: one line naming the flag or argument."""


class Parser(argparse.ArgumentParser):
    """Every flag's help shows its default, and `--version`, as on `run` and the adapter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        add_version_flag(self, "promscaler-autoscaler")

    def error(self, message: str) -> NoReturn:
        raise ArgError(message)


def _kube_version(text: str) -> KubeVersion:
    try:
        return supported_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_kube_version_flag(p: argparse.ArgumentParser) -> None:
    """`--kubernetes-version`: the release whose HPA controller the decisions follow (docs/controls.md
    lists what differs)."""
    p.add_argument("--kubernetes-version", type=_kube_version, default=CURRENT, metavar="VERSION",
                   help=f"decide as this Kubernetes release's HPA controller ({' or '.join(map(str, SUPPORTED))})")


def add_controller_flags(p: argparse.ArgumentParser) -> None:
    add_kube_version_flag(p)
    g = p.add_argument_group("the controller's settings (kube-controller-manager names and defaults)")
    g.add_argument("--horizontal-pod-autoscaler-tolerance", type=flags.non_negative_float, default=0.1, metavar="RATIO",
                   help="minimum change in the desired-to-actual metric ratio to scale")
    g.add_argument("--horizontal-pod-autoscaler-cpu-initialization-period", type=flags.duration, default=300.0,
                   metavar="DURATION", help="after pod start, CPU samples may be skipped")
    g.add_argument("--horizontal-pod-autoscaler-initial-readiness-delay", type=flags.duration, default=30.0,
                   metavar="DURATION", help="after pod start, readiness changes count as initial readiness")
    g.add_argument("--horizontal-pod-autoscaler-downscale-stabilization", type=flags.duration, default=300.0,
                   metavar="DURATION", help="scale-down looks back this far and takes the highest recommendation")


def controller_config(args: argparse.Namespace) -> ControllerConfig:
    """The settings `add_controller_flags` parsed."""
    return ControllerConfig(
        tolerance=float(args.horizontal_pod_autoscaler_tolerance),
        cpu_initialization_period=float(args.horizontal_pod_autoscaler_cpu_initialization_period),
        initial_readiness_delay=float(args.horizontal_pod_autoscaler_initial_readiness_delay),
        downscale_stabilization_window=float(args.horizontal_pod_autoscaler_downscale_stabilization),
        kube_version=args.kubernetes_version,
    )
