"""`python -m autoscaler` / `promscaler-autoscaler`: simulate | run | demo.

Subcommands are imported lazily: `simulate` needs no cluster libraries, and a missing `run` or
`demo` module is a one-line error rather than a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

# Modules a production installation (the container image) leaves out: the sandbox, and the demo
# extra's libraries (the demo's view and timeline, simulate's table).
_OPTIONAL = ("kubesim", "rich", "matplotlib")
_NO_DEMO = ("not part of this installation ({missing} is missing; the container image runs only the adapter and "
            "the controller): run the demo from a checkout with ./scripts/demo.sh")
_NO_EXTRA = "it needs the demo extra: pip install 'promscaler[demo]'"

COMMANDS = {
    "simulate": ("autoscaler.simulate.cli", "main", "what the HPA controller would do with a scenario file"),
    "run": ("autoscaler.controller.cli", "main", "run the autoscaler controller against a cluster"),
    "demo": ("autoscaler.demo", "main", "a sandboxed demo: simulated cluster, Prometheus and workloads"),
    "explain": ("autoscaler.explain.cli", "main", "why a live autoscaler scales (or not) now, vs. its status"),
    "backtest": ("autoscaler.backtest.cli", "main", "replay autoscaler specs over Prometheus history"),
    "tune": ("autoscaler.backtest.tunecli", "main", "the spec settings that would have served this history best"),
}


def _usage() -> str:
    lines = ["usage: promscaler-autoscaler [--version] {" + ",".join(COMMANDS) + "} ...", "", "commands:"]
    lines += [f"  {name:<9} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def lean(name: str) -> None:
    """For a command run as its own process: the kubernetes client's parent packages unexecuted, as
    in the adapter (promscaler.kubepackages: ~180 ms of the controller's start, ~0.5 s of `explain`'s).
    Not for the demo, whose in-process sandbox may use the synchronous client."""
    if name != "demo":
        from promscaler.kubepackages import lean_packages

        lean_packages()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        from promscaler.logs import version

        print(f"promscaler-autoscaler {version()}")
        return 0
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"autoscaler: unknown command {name!r} (use {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    module_name, func, _ = COMMANDS[name]
    if argv is None:  # this process's own command line (the console script, `python -m`), not a caller's
        lean(name)
    try:
        module = importlib.import_module(module_name)
        entry = getattr(module, func, None)
        if entry is None:
            print(f"autoscaler: the {name!r} command is not available ({module_name}.{func} is missing)",
                  file=sys.stderr)
            return 2
        result = entry(rest)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing in _OPTIONAL:
            reason = _NO_DEMO.format(missing=missing) if name == "demo" else _NO_EXTRA
            hint = " (or -o json)" if name == "simulate" else ""
            print(f"autoscaler: {name}: {reason}{hint}", file=sys.stderr)
            return 2
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            print(f"autoscaler: the {name!r} command is not available in this installation ({module_name} is missing)",
                  file=sys.stderr)
            return 2
        raise
    except BrokenPipeError:  # the reader went away (`... -o json | head`): no traceback, nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
