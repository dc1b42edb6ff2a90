"""Rewards: the unified reward of docs/design.md and the host-callback bridge to the harness."""
