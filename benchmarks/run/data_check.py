"""Whether a dataset is here and readable: the check ``attnbench data`` prints, and the one the
driver makes once per dataset before any cell of a run (a missing dataset then costs one clear
line, not one failed record per cell)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from benchmarks.config.schema import CliError

__all__ = ["check_dataset", "check_run_data", "one_line"]


def one_line(err: BaseException) -> str:
    """A message on one line (third-party errors embed newlines, e.g. every URL tried)."""
    return " ".join(str(err).split())


def check_dataset(task: str, dataset: str, params: dict[str, Any], data_dir: Path | None,
                  cache: Path) -> tuple[str, str]:
    """Load ``task/dataset`` with ``params`` as a cell would (fetching it where a download is
    known); returns ``(status, text)``: ``ok`` with its sizes and checksum, or ``MISSING``,
    ``CORRUPT`` or ``INVALID`` with the reason on one line."""
    from tasks.common.data import DataCorrupt
    from tasks.common.registry import get_task

    ds = get_task(task).datasets.get(dataset)
    try:
        dm = ds.build(data_dir, cache, 0, **params)
        dm.prepare_data()
        dm.setup("fit")
        info = {k: v for k, v in dm.info.items() if isinstance(v, (int, float, str))}
        kind = "synthetic" if ds.synthetic else "real"
        return "ok", f"({kind}): {info}  {dm.checksum()}"
    except FileNotFoundError as err:  # DataMissing is one: an expected file is absent
        return "MISSING", one_line(err)
    except DataCorrupt as err:
        return "CORRUPT", one_line(err)
    except ValueError as err:  # a refused parameter (a path escaping the cache, ...), not bad data
        return "INVALID", one_line(err)
    except Exception as err:  # noqa: BLE001 - present but unreadable: reported, never a traceback
        return "CORRUPT", one_line(err) or type(err).__name__


def check_run_data(cells: Iterable[Any], data_dir: Path | None, cache: Path) -> None:
    """Every real dataset ``cells`` need, checked once each (synthetic ones are made in code);
    the first one that is not usable is a :class:`CliError` naming it, before any cell runs."""
    from tasks.common.registry import get_task

    seen: list[tuple[str, str, dict]] = []
    for c in cells:
        key = (c.task, c.dataset, dict(c.config.get("dataset_params") or {}))
        if key in seen or get_task(c.task).datasets.get(c.dataset).synthetic:
            continue
        seen.append(key)
        status, text = check_dataset(*key, data_dir, cache)
        if status != "ok":
            where = f"--data-dir {data_dir}" if data_dir else "no --data-dir ($ATTNBENCH_DATA unset)"
            raise CliError(f"dataset {c.task}/{c.dataset} is {status.lower()} ({where}): {text}; checked before any "
                           "cell, nothing ran (attnbench data CONFIG --data-dir DIR checks every dataset of a config)")
