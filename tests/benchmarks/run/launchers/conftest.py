"""Fixtures of the launcher tests: a single-node Slurm (:mod:`tests.helpers.slurm`)."""

from tests.helpers.slurm import local_slurm  # noqa: F401 - a fixture, used by name
