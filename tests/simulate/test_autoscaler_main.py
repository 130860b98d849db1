"""`python -m autoscaler`: subcommand dispatch, with clear errors for unknown or absent commands."""

from __future__ import annotations

import autoscaler.__main__ as cli


def test_unknown_command(capsys) -> None:
    assert cli.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'frobnicate'" in err and len(err.strip().splitlines()) == 1


def test_missing_module_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setitem(cli.COMMANDS, "run", ("autoscaler.not_built_yet", "main", "x"))
    assert cli.main(["run", "--help"]) == 2
    err = capsys.readouterr().err
    assert "'run' command is not available" in err and "Traceback" not in err


def test_dispatches_lazily_with_arguments(monkeypatch) -> None:
    seen = []
    import sys
    import types
    module = types.ModuleType("autoscaler_fake_cmd")
    module.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autoscaler_fake_cmd", module)
    monkeypatch.setitem(cli.COMMANDS, "demo", ("autoscaler_fake_cmd", "main", "x"))
    assert cli.main(["demo", "--duration", "5"]) == 0
    assert seen == [["--duration", "5"]]


def test_help(capsys) -> None:
    assert cli.main(["--help"]) == 0
    assert "simulate" in capsys.readouterr().out
