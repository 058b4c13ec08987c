"""TRANSITION ALIAS package, removed before this session's last commit."""
