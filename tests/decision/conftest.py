"""Decision-engine tests: pure functions, no processes. The builders live in decision_helpers.py."""
