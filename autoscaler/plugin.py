"""`kubectl promscaler explain|simulate|backtest ...`: the `kubectl-promscaler` plugin.

kubectl runs a plugin with the words after its name and refuses flags before it, so kubectl's own
`-n/--namespace`, `--context` and `--kubeconfig` (and `$KUBECONFIG`, from the environment) reach
this program and may stand anywhere among its arguments (`kubectl promscaler -n shop explain web`).
They go to the command that reads them: `explain` takes all three (without `-n`, the context's
namespace, as kubectl); `backtest` takes `-n` (it reads Prometheus, not the cluster); `simulate`
reads scenario files only. A flag a command cannot use is a usage error, never silently ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from autoscaler import __main__ as commands

__all__ = ["main"]

# kubectl's global flags -> the commands' long names
_GLOBAL = {"-n": "--namespace", "--namespace": "--namespace", "--context": "--context", "--kubeconfig": "--kubeconfig"}
# which of them each command reads
_TAKES = {
    "explain": ("--namespace", "--context", "--kubeconfig"),
    "simulate": (),
    "backtest": ("--namespace",),
}
_WHY_NOT = {"backtest": "backtest replays Prometheus history (--prometheus-url) and reads no cluster",
            "simulate": "simulate reads scenario files and no cluster"}


class _Usage(Exception):
    pass


def _usage() -> str:
    return "\n".join([
        "usage: kubectl promscaler [-n NAMESPACE] [--context CONTEXT] [--kubeconfig FILE] "
        "{explain,simulate,backtest} ...",
        "",
        "commands:",
        *(f"  {name:<9} {commands.COMMANDS[name][2]}" for name in _TAKES),
        "",
        "kubectl's -n/--namespace, --context, --kubeconfig and $KUBECONFIG apply; 'kubectl promscaler COMMAND --help'",
        "lists each command's own flags.",
    ])


def split_globals(args: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """kubectl's global flags found anywhere before `--` ({long name: value}), and the other arguments."""
    found: dict[str, str] = {}
    rest: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "--":
            rest += [arg, *it]
            break
        name, eq, value = arg.partition("=")
        if name not in _GLOBAL and arg.startswith("-n") and not arg.startswith("--") and len(arg) > 2:
            name, eq, value = "-n", "=", arg[2:].removeprefix("=")  # -nshop, -n=shop
        if name not in _GLOBAL:
            rest.append(arg)
            continue
        if not eq:
            value = next(it, "")
            if not value:
                raise _Usage(f"flag needs an argument: {arg}")
        found[_GLOBAL[name]] = value
    return found, rest


def plugin_args(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(command, its arguments with the kubectl flags it reads); `_Usage` for what cannot run."""
    found, rest = split_globals(argv)
    command = next((a for a in rest if not a.startswith("-")), None)
    if command is None or command not in _TAKES:
        raise _Usage(f"unknown command {command!r} (use {', '.join(_TAKES)})" if command else "no command given")
    for flag in found:
        if flag not in _TAKES[command]:
            raise _Usage(f"{command}: {flag} does not apply: {_WHY_NOT[command]}")
    i = rest.index(command)
    before = rest[:i]  # anything but kubectl's flags before the command is the command's own
    extra = [x for flag, value in found.items() for x in (flag, value)]
    return command, [*before, *extra, *rest[i + 1:]]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        return commands.main(args)
    try:
        command, rest = plugin_args(args)
    except _Usage as exc:
        print(f"kubectl promscaler: {exc}", file=sys.stderr)
        return 2
    if argv is None:  # run by kubectl as its own process
        commands.lean(command)
    return commands.main([command, *rest])


if __name__ == "__main__":
    sys.exit(main())
