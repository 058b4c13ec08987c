"""Reusable formulation blocks (scheduling: precedence, disjunctions, memory, periodic rows)."""
