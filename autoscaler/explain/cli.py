"""`autoscaler explain [-n NAMESPACE] NAME`: the decision the controller would make now, explained
as `simulate` explains it, and compared with the object's status.

Exit status: 0 explained (differences from the status are reported, not failures), 1 the moment
could not be read (one line naming the object and the API), 2 usage."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

from autoscaler.commandline import ArgError, Parser, add_controller_flags, controller_config
from autoscaler.decision import ControllerConfig, Decision, DecisionInput, History, MetricFailure, SpecError, decide
from autoscaler.decision.controls import failures_so_far, parse_pause
from autoscaler.simulate.shorten import short_form
from promscaler.kubeconfig import context_namespace

from .capture import scenario
from .compare import Difference, assumptions, compare
from .gather import KINDS, GatherError, Moment, gather

__all__ = ["explain", "main"]



def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="promscaler-autoscaler explain",
               description="Why does this autoscaler scale (or not) right now? Read live, as the controller reads.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--namespace", help="the autoscaler's namespace (default: the kubeconfig context's, as "
                                              "kubectl's, else default)")
    p.add_argument("--kind", choices=sorted(KINDS), default="horizontalautoscaler",
                   help="a promscaler HorizontalAutoscaler (default) or a native autoscaling/v2 HPA")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service "
                                        "account, else ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the kubeconfig's current context)")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                   help="text for people; json and yaml carry the same content for programs")
    p.add_argument("--capture", metavar="FILE",
                   help="write this moment as a simulate scenario (with expect:) (default: none)")
    add_controller_flags(p)
    return p


def decide_moment(m: Moment, config: ControllerConfig) -> Decision:
    """The controller's decide() on this moment, with the assumed (empty) history, the failed syncs
    so far from the status, and the pause annotations of a HorizontalAutoscaler (docs/controls.md).
    Raises SpecError naming a pause annotation that is not understood."""
    status = m.obj.get("status") or {}
    paused = parse_pause(m.kind, (m.obj.get("metadata") or {}).get("annotations"))
    return decide(DecisionInput(
        spec=m.spec, current_replicas=m.scale.replicas, status_replicas=m.scale.status_replicas, pods=m.pods,
        readings=m.readings, now=m.now, config=config, paused=paused,
        history=History(recommendations=(), failures=failures_so_far(m.spec, status)),
        scaled_to_zero=any(c.get("type") == "ScaledToZero" and c.get("status") == "True"
                           for c in status.get("conditions") or ()),
        selector_error=None if m.scale.selector else "the HPA target's scale is missing a selector",
        namespace=m.namespace, native=m.kind == "HorizontalPodAutoscaler",
    ))


async def explain(kubeconfig: str | None, context: str | None, kind: str, namespace: str, name: str,
                  config: ControllerConfig) -> tuple[Moment, Decision, list[Difference]]:
    from promscaler.kubeapi import Kube, load_configuration  # cluster libraries only for this command

    try:
        cfg = await load_configuration(kubeconfig, context)
    except Exception as exc:  # kubeconfig problems of any kind: one line
        label = f"{KINDS[kind][0]} {namespace}/{name}"
        raise GatherError(f"{label}: cannot load the cluster configuration: {exc}") from None
    kube = Kube(cfg)
    try:
        moment = await gather(kube, kind, namespace, name, datetime.now(UTC))
        moment.owners = await shard_owners(kube, namespace, name)
    except GatherError:
        raise
    except Exception as exc:  # connection refused, TLS: the API server itself
        raise GatherError(f"{KINDS[kind][0]} {namespace}/{name}: the API server at {cfg.host}: "
                          f"{type(exc).__name__}: {exc}") from None
    finally:
        await kube.close()
    try:
        decision = decide_moment(moment, config)
    except SpecError as exc:
        raise GatherError(f"{moment.label}: {exc}") from None
    diffs = compare(moment.obj, moment.spec, decision, moment.scale.replicas, moment.now,
                    config.downscale_stabilization_window)
    return moment, decision, diffs


async def shard_owners(kube: Any, namespace: str, name: str) -> dict[str, tuple[str, int]]:
    """Which controller replica owns the object, per shard group (controllers run with --sharding);
    empty when none runs sharded or the Leases cannot be listed."""
    from autoscaler.controller.shards import GROUP_LABEL, owners
    from promscaler.kubeapi import ApiError, query

    try:
        body = await kube.get("/apis/coordination.k8s.io/v1/leases", query(labelSelector=GROUP_LABEL))
    except ApiError:
        return {}
    return owners(body.get("items") or [], namespace, name)


def document(m: Moment, d: Decision, diffs: Sequence[Difference], config: ControllerConfig) -> dict[str, Any]:
    from autoscaler.simulate.output import decision_json

    status = m.obj.get("status") or {}
    ref = m.spec.scale_target_ref
    return {
        "object": {"kind": m.kind, "namespace": m.namespace, "name": m.name},
        "now": m.now.isoformat().replace("+00:00", "Z"),
        "target": {"kind": ref.kind, "name": ref.name, "replicas": m.scale.replicas,
                   "statusReplicas": m.scale.status_replicas, "selector": m.scale.selector, "pods": len(m.pods)},
        "assumed": assumptions(m.spec, config.downscale_stabilization_window),
        "decision": decision_json(d),
        "status": {"desiredReplicas": status.get("desiredReplicas"), "currentReplicas": status.get("currentReplicas"),
                   "lastScaleTime": status.get("lastScaleTime"),
                   "conditions": [{"type": c.get("type"), "status": c.get("status"), "reason": c.get("reason")}
                                  for c in status.get("conditions") or ()]},
        "differences": [{"field": x.field, "recomputed": x.ours, "status": x.status, "reasons": list(x.reasons)}
                        for x in diffs],
        "ownedBy": [{"shardGroup": g, "replica": who, "members": n} for g, (who, n) in m.owners.items()],
    }


def _text(m: Moment, d: Decision, diffs: Sequence[Difference], config: ControllerConfig, out: TextIO) -> None:
    from autoscaler.decision import DecisionInput
    from autoscaler.simulate.report import render

    inp = DecisionInput(spec=m.spec, current_replicas=m.scale.replicas, status_replicas=m.scale.status_replicas,
                        pods=m.pods, readings=m.readings, now=m.now, config=config)
    render([(f"{m.label} (live)", inp, d)], out)
    in_force = d.controls.summary() if d.controls is not None else ""
    if in_force:
        out.write(f"  control in force: {in_force}\n")
    out.write("  assumed:\n")
    for line in assumptions(m.spec, config.downscale_stabilization_window):
        out.write(f"    {line}\n")
    for group, (who, n) in m.owners.items():
        out.write(f"  owned by replica {who} (shard group {group}, {n} members)\n")
    status = m.obj.get("status") or {}
    if not diffs:
        out.write(f"  status agrees: desiredReplicas {status.get('desiredReplicas')}, same conditions\n")
    else:
        out.write("  compared with the status:\n")
        for x in diffs:
            out.write(f"    {x.line()}\n")


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except ArgError as exc:
        print(f"autoscaler explain: {exc}", file=err)
        return 2
    config = controller_config(args)
    namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
    try:
        m, d, diffs = asyncio.run(explain(args.kubeconfig, args.context, args.kind, namespace, args.name, config))
    except GatherError as exc:
        print(f"autoscaler explain: {exc}", file=err)
        return 1
    for ms, reading in zip(m.spec.metrics, m.readings, strict=False):
        if isinstance(reading, MetricFailure):
            print(f"autoscaler explain: {m.label}: {ms.type} metric {ms.name}: {reading.message}", file=err)
    if args.capture:
        try:
            with open(args.capture, "w", encoding="utf-8") as f:
                # the short form (pods by count, values per metric) when it decides the same
                yaml.safe_dump(short_form(scenario(m, d, config)), f, sort_keys=False)
        except OSError as exc:
            print(f"autoscaler explain: --capture {args.capture}: {exc.strerror or exc}", file=err)
            return 1
    if args.output == "json":
        out.write(json.dumps(document(m, d, diffs, config), indent=2) + "\n")
    elif args.output == "yaml":
        yaml.safe_dump(document(m, d, diffs, config), out, sort_keys=False)
    else:
        _text(m, d, diffs, config, out)
    return 0
