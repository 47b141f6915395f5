"""Shared test fixtures and scripts (a throw-away single-node Slurm, ...)."""
