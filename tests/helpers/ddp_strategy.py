"""Test plug-in (``ATTNBENCH_PLUGINS=tests.helpers.ddp_strategy``): gives every cell process
the Trainer strategy of :func:`benchmarks.run.distributed.strategy_kwargs`, as the runner's
``_trainer_kwargs`` does once it calls it (until then Lightning's own default, DDP over gloo
on CPU, is what a multi-device cell gets). Idempotent; single-device cells are unchanged."""

from __future__ import annotations

from typing import Any


def register() -> None:
    import benchmarks.run.cell as runner
    from benchmarks.run import distributed as D
    inner = runner._trainer_kwargs
    if getattr(inner, "_with_strategy", False):
        return

    def trainer_kwargs(*args: Any, **kwargs: Any) -> dict[str, Any]:
        kw = inner(*args, **kwargs)
        if "strategy" not in kw:
            kw.update(D.strategy_kwargs(kw["accelerator"], kw["devices"]))
        if "strategy" in kw:
            print(f"strategy: {type(kw['strategy']).__name__} over "
                  f"{kw['strategy']._process_group_backend}", flush=True)
        return kw

    trainer_kwargs._with_strategy = True  # type: ignore[attr-defined]
    runner._trainer_kwargs = trainer_kwargs
