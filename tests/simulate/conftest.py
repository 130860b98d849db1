"""`simulate` CLI tests: the example scenarios are the project's own, in examples/scenarios/."""

import pytest


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Human output without colour and at a fixed width, whatever terminal runs the tests."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
