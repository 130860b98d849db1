"""Decision-engine tests: pure functions, no processes. The builders live in decision_helpers.py
(imported by name; pytest puts this directory on sys.path)."""
