"""`python -m kubesim`: run the sandbox API server on its own (in its own process, e.g. for a
benchmark or to poke at it with kubectl) until Ctrl-C."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading

from kubesim.apiserver import KubeSim
from kubesim.views import KUBE_VERSION, parse_version
from promscaler import wire


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--token", default="sandbox-token", help="bearer token written into the kubeconfig")
    p.add_argument("--ready-delay", type=float, default=1.0, help="seconds from pod start to Ready")
    p.add_argument("--kubeconfig-out", help="also copy the kubeconfig to this path")
    p.add_argument("--adapter", help="URL of a metrics adapter to serve custom and external metrics through")
    p.add_argument("--no-aggregated-discovery", dest="aggregated_discovery", action="store_false",
                   help="serve the legacy discovery documents only, as a kube-apiserver before 1.30")
    p.add_argument("--kube-version", default=KUBE_VERSION,
                   help=f"the Kubernetes release to serve as, MAJOR.MINOR (default {KUBE_VERSION})")
    args = p.parse_args(argv)
    if args.ready_delay < 0:
        p.error("--ready-delay: must not be negative")
    try:
        parse_version(args.kube_version)
    except ValueError as exc:
        p.error(f"--kube-version: {str(exc).split(': ', 1)[1]}")

    sim = KubeSim(args.token, ready_delay=args.ready_delay, port=args.port,
                  aggregated_discovery=args.aggregated_discovery, kube_version=args.kube_version)
    try:
        sim.start()
    except (OSError, RuntimeError) as exc:
        print(f"kubesim: cannot start: {exc}", file=sys.stderr)
        return 1
    if args.adapter:
        for group in (wire.CUSTOM_GROUP, wire.EXTERNAL_GROUP):
            sim.set_aggregated_api(group, args.adapter)
    if args.kubeconfig_out:
        shutil.copyfile(sim.kubeconfig_path, args.kubeconfig_out)
    print(f"kubesim serving on {sim.url}; kubeconfig: {args.kubeconfig_out or sim.kubeconfig_path}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
