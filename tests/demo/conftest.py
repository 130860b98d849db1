"""Fixtures for the demo's tests (none shared yet: each test builds what it needs)."""
