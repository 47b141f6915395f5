"""Running cells: the runner, worker, launchers (local pool, Slurm, Ray), measurement, claims and records."""
