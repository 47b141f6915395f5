"""``attnbench list``: the tasks with their datasets and models, the attention patterns, the
loaded plug-ins, the micro-benchmarks, and every shipped config with its description, device,
size (cells, or the ``attnbench bench`` command of a micro-benchmark config) and wall time.

A config's wall time is its header's ``# wall:`` comment line, in one fixed form (see
:data:`WALL_LINE`)::

    # wall: 46 min, measured 2026-11-21 on a 2-core AMD EPYC
    # wall: ~3 h, estimated for one H100 (not measured)

so that a measured time and an estimate never read alike; a config without one says ``not stated``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cli.options import bench_command, micro_benchmark_of
from benchmarks.config import CONFIG_DIR

__all__ = ["add_list", "cmd_list", "print_tasks", "print_patterns", "print_configs", "config_summary",
           "ConfigSummary", "WALL_LINE", "wall_of"]

#: a config header's wall-time line: the time, then ``measured <when and where>`` or ``estimated ...``
WALL_LINE = re.compile(r"^#\s*wall:\s*(?P<time>[^,]+?)\s*,\s*(?P<kind>measured|estimated)\b(?P<rest>.*)$")


def add_list(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list tasks, datasets, models, attention patterns, micro-benchmarks and shipped "
                       "configs (with description, device, cells and wall time)")
    p.set_defaults(handler=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    from benchmarks.config.micro import MICRO_BENCHMARKS

    print_tasks()
    w = max(len(n) for n in MICRO_BENCHMARKS)
    print("micro-benchmarks (attnbench bench NAME):")
    for b in MICRO_BENCHMARKS.values():
        print(f"  {b.name:<{w}}  {b.summary}")
        print(f"  {'':<{w}}  configs: {', '.join(b.configs)} (default {b.default_config})")
    print_configs()
    return 0


def print_tasks() -> None:
    """Tasks, their datasets and models, the attention patterns and the loaded plug-ins, each
    name with where it comes from (``built-in`` or the plug-in that registered it)."""
    from benchmarks.config.plugins import loaded_plugins, origin
    from tasks.common.registry import available_tasks, get_task

    names = available_tasks()
    print("tasks (attnbench run CONFIG; config keys task/dataset/models):")
    if not names:
        print("  (none yet)")
    for tname in names:
        task = get_task(tname)
        print(f"  {tname}  (metric: {task.metric}, {'higher' if task.mode == 'max' else 'lower'} is better)"
              f"  [{origin(task.make_module)}]")
        for dname, ds in task.datasets.items():
            kind = "synthetic" if ds.synthetic else "real"
            print(f"    dataset {dname:<14} {kind:<9} defaults {ds.params}  [{origin(ds.build)}]")
        for mname, spec in task.models.items():
            pattern = f", pattern {spec.pattern}" if spec.pattern else ""
            print(f"    model   {mname:<22} {spec.family}{pattern}  [{origin(spec.build)}]")
    print_patterns()
    plugins = loaded_plugins()
    print("plug-ins (entry points of 'attnbench.plugins', --plugin, a config's plugins:, $ATTNBENCH_PLUGINS):")
    for p in plugins:
        print(f"  {p.label:<28} module {p.module}  ({p.source})")
    if not plugins:
        print("  (none loaded)")


def print_patterns() -> None:
    """The registered attention patterns: what each supports (decoding from a key/value
    ``cache`` or a ``recurrent`` state too), its cost, parameters and origin."""
    import attn_core
    from benchmarks.config.plugins import origin

    print("attention patterns (model_params: {MODEL: {pattern: NAME, pattern_params: {...}}}):")
    for name in attn_core.list_patterns(kind=None):
        p = attn_core.get_pattern(name)
        can = ",".join(w for w, on in (("causal", p.causal), ("padding", p.padding), ("cross", p.cross),
                                       ("cache", p.incremental), ("recurrent", p.recurrence is not None)) if on)
        print(f"  {name:<14} {p.kind:<8} {can or '-':<36} {p.complexity:<8} params {dict(p.params)}  [{origin(p.fn)}]")


# ----------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class ConfigSummary:
    """One shipped config as ``list`` shows it: ``size`` is ``"50 cells"`` (plus its suite's
    micro-benchmarks) or ``"bench NAME"`` for a micro-benchmark config, whose ``description`` then
    ends with the command that runs it."""

    name: str
    description: str
    device: str
    size: str
    wall: str


def wall_of(text: str) -> str:
    """The wall time a config's header states on its ``# wall:`` line (:data:`WALL_LINE`), or
    ``not stated``. Only the leading comment block counts."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        if re.match(r"^#\s*wall:", line):
            m = WALL_LINE.match(line.strip())
            if m is None:
                return "not stated (its '# wall:' line says neither measured nor estimated)"
            return f"{m['time']}, {m['kind']}{m['rest'].rstrip()}"
    return "not stated"


def _device(accelerators: set[str], name: str) -> str:
    """``gpu`` (asks for CUDA: ``gpu``/``cuda``, or a ``*_gpu`` config), ``cpu``, or ``auto``
    (CUDA when present, else the CPU)."""
    if accelerators & {"gpu", "cuda"} or name.endswith("_gpu"):
        return "gpu"
    return "cpu" if accelerators == {"cpu"} else "auto"


def config_summary(path: Path) -> ConfigSummary:
    """What ``list`` says about one config: a suite is loaded and expanded as ``run --dry-run``
    does (:func:`benchmarks.config.suite.load_suite_with_notices` + ``expand``); a micro-benchmark
    config (``benchmark: NAME``) gets the head of the benchmark's summary and the command that runs it."""
    import yaml

    from benchmarks.config.micro import MICRO_BENCHMARKS
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import expand, load_suite_with_notices

    text = path.read_text(encoding="utf-8")
    wall = wall_of(text)
    bench = micro_benchmark_of(path, text)
    if bench is not None:
        raw: Any = yaml.safe_load(text) or {}
        what = MICRO_BENCHMARKS[bench].summary.split(":")[0]
        return ConfigSummary(path.stem, f"{what} (run: {bench_command(bench, path)})",
                             _device({str(raw.get("device", "auto"))}, path.stem), f"bench {bench}", wall)
    try:
        cfg, _ = load_suite_with_notices(path)
        cells = expand(cfg, str(path))
    except ConfigError:
        return ConfigSummary(path.stem, "", "?", f"invalid here (attnbench run {path.stem} --dry-run says why)", wall)
    accelerators = {str((c.config.get("trainer") or {}).get("accelerator", "auto")) for c in cells}
    micro = "".join(f" + bench {m}" for m in cfg.get("micro_benchmarks") or [])
    return ConfigSummary(path.stem, str(cfg.get("description") or ""), _device(accelerators, path.stem),
                         f"{len(cells)} cells{micro}", wall)


def print_configs(config_dir: Path = CONFIG_DIR) -> None:
    """Every config of ``config_dir``: one aligned line (name, device, size, wall time), its
    description indented below."""
    rows = [config_summary(p) for p in sorted(config_dir.glob("*.yaml"))]
    print(f"configs ({config_dir}; a suite: attnbench run NAME; device auto = CUDA when present, else CPU):")
    if not rows:
        print("  (none)")
        return
    wn, ws = max(len(r.name) for r in rows), max(len(r.size) for r in rows)
    print(f"  {'name':<{wn}}  {'device':<6}  {'cells':<{ws}}  wall time")
    for r in rows:
        print(f"  {r.name:<{wn}}  {r.device:<6}  {r.size:<{ws}}  {r.wall}")
        if r.description:
            print(f"  {'':<{wn}}  {r.description}")
