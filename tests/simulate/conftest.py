"""`simulate` CLI tests: the shared example scenarios sit beside the checkout as ../shared."""

import pytest


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Human output without colour and at a fixed width, whatever terminal runs the tests."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
