"""Rewards: the unified reward of DESIGN.md and the host-callback bridge to the harness."""
