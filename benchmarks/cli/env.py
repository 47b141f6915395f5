"""``attnbench env``: what a record would store about this machine (versions, CPU and GPU
identity, threads) and a fresh speed fingerprint, in the spirit of
``python -m torch.utils.collect_env``. With ``--reference NAME``: the scale a calibrated time
budget would get here."""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks.run import budget as B
from benchmarks.run import fingerprint as F
def add_env(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="this machine as a record would describe it, with a fresh speed fingerprint")
    p.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available, else cpu)")
    p.add_argument("--precision", default="32-true", help="a trainer.precision: the fingerprint's dtype (default 32-true)")
    p.add_argument("--threads", type=int, default=None, help="torch threads for the fingerprint (default: torch's)")
    p.add_argument("--seconds", type=float, default=None,
                   help=f"measuring time (default ${F.FINGERPRINT_ENV} or {F.DEFAULT_SECONDS:g})")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.set_defaults(handler=cmd_env)


def _check(args: argparse.Namespace) -> None:
    """One line per bad option: the option, its value and what is allowed."""
    from benchmarks.config.schema import CliError
    from benchmarks.config.suite import TRAINER_FIELDS

    choices = TRAINER_FIELDS["precision"].choices or ()
    if args.precision not in choices:
        raise CliError(f"--precision {args.precision!r}: expected one of {', '.join(choices)}")
    if args.threads is not None and args.threads < 1:
        raise CliError(f"--threads {args.threads}: expected a count >= 1")
    if args.seconds is not None and not 0 < args.seconds <= 60:
        raise CliError(f"--seconds {args.seconds}: expected seconds in (0, 60]")
    if args.device is not None and not (args.device == "cpu" or args.device.split(":")[0] == "cuda"):
        raise CliError(f"--device {args.device!r}: expected cpu, cuda or cuda:N")


def collect(device: str | None, precision: str, threads: int | None, seconds: float | None) -> dict[str, Any]:
    """The environment block a record would get on ``device``, with a fingerprint measured now,
    and the scale each reference machine's calibrated budgets would get here."""
    import torch

    from benchmarks.run.records import environment

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    fp = F.measure(dev.split(":")[0] if dev.startswith("cuda") else "cpu", F.dtype_for(precision), threads,
                   seconds if seconds is not None else (F.configured_seconds() or F.DEFAULT_SECONDS))
    env = environment(dev, fingerprint=fp)
    scales = {name: round(B.scale_factor(fp, ref), 4) for name, ref in B.REFERENCES.items() if B.comparable(fp, ref)}
    return {**env, "calibrated_budget_scale": scales}


def cmd_env(args: argparse.Namespace) -> int:
    _check(args)
    env = collect(args.device, args.precision, args.threads, args.seconds)
    if args.json:
        print(json.dumps(env, indent=2, default=str))
        return 0
    skip = {"fingerprint", "argv", "calibrated_budget_scale"}
    width = max(len(k) for k in env)
    for key, value in env.items():
        if key not in skip:
            print(f"{key:<{width}}  {' '.join(map(str, value)) if isinstance(value, list) else value}")
    print(f"{'fingerprint':<{width}}  {F.format_fingerprint(env['fingerprint'])} in {env['fingerprint']['seconds']} s")
    for name, scale in env["calibrated_budget_scale"].items():
        print(f"{'budget scale':<{width}}  {{seconds: S, reference: {name}}} -> {scale:g} x S seconds here")
    return 0
