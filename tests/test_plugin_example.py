"""The example plug-in (``examples/attnbench-plugin-example``): its sigmoid attention against a
dense reference of its maths, and a tiny suite using it on two domains through the local pool,
with the package found only through its ``attnbench.plugins`` entry point (driver and workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from tests.helpers.suites import config_text

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "attnbench-plugin-example"


@pytest.fixture(scope="module")
def sigmoid():
    """The example's module, registered (and unregistered after the tests)."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        import attnbench_plugin_example as mod

        import attn_core

        mod.register()
        mod.register()  # idempotent
        yield mod
        attn_core.unregister_pattern(mod.PATTERN)
    finally:
        sys.path.remove(str(EXAMPLE))


def _dense(q, k, v, mask, bias):
    """The maths written out: out_i = sum_j [mask_ij] sigmoid(q_i . k_j / sqrt(d) + bias) v_j."""
    b, h, lq, d = q.shape
    out = torch.zeros(b, h, lq, v.shape[-1], dtype=q.dtype)
    for i in range(lq):
        for j in range(k.shape[2]):
            w = torch.sigmoid((q[:, :, i] * k[:, :, j]).sum(-1) / d**0.5 + bias)  # (B, H)
            out[:, :, i] += (w * mask[:, None, i, j].to(q.dtype))[..., None] * v[:, :, j]
    return out


@pytest.mark.parametrize("causal,padded,lk", [(False, False, 5), (True, False, 5), (False, True, 7), (True, True, 5)])
def test_sigmoid_matches_the_dense_reference(sigmoid, causal, padded, lk):
    g = torch.Generator().manual_seed(0)
    lq = 5 if causal else 4
    q, k, v = (torch.randn(2, 3, n, 4, generator=g, dtype=torch.float64, requires_grad=True) for n in (lq, lk, lk))
    kpm = torch.ones(2, lk, dtype=torch.bool)
    if padded:
        kpm[1, -2:] = False
    mask = torch.ones(2, lq, lk, dtype=torch.bool) & kpm[:, None, :]
    if causal:
        mask &= torch.ones(lq, lk, dtype=torch.bool).tril()
    out = sigmoid.sigmoid_attention(q, k, v, causal=causal, key_padding_mask=kpm if padded else None)
    import math

    ref = _dense(q, k, v, mask, -math.log(lk))
    torch.testing.assert_close(out, ref)
    for a, b in zip(torch.autograd.grad(out.square().sum(), (q, k, v)), torch.autograd.grad(ref.square().sum(), (q, k, v))):
        torch.testing.assert_close(a, b)


def test_sigmoid_is_a_pattern_of_multihead_attention(sigmoid):
    import attn_core

    torch.manual_seed(0)
    mha = attn_core.MultiHeadAttention(8, 2, pattern="sigmoid", pattern_params={"bias": -1.0}, causal=True)
    x = torch.randn(2, 6, 8)
    out, w = mha(x, need_weights=True)
    assert out.shape == (2, 6, 8) and torch.all(w.triu(1) == 0)
    assert attn_core.get_pattern("sigmoid").fn is sigmoid.sigmoid_attention
    with pytest.raises(ValueError, match="bias='x' is invalid"):
        attn_core.MultiHeadAttention(8, 2, pattern="sigmoid", pattern_params={"bias": "x"})


# --------------------------------------------------------------------------- through the local pool
def _install(target: Path) -> None:
    """What ``pip install --target`` leaves: the package and a ``.dist-info`` whose
    ``entry_points.txt`` comes from the example's ``pyproject.toml`` (no build, no network)."""
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    pkg = "attnbench_plugin_example"
    (target / pkg).mkdir(parents=True)
    (target / pkg / "__init__.py").write_text((EXAMPLE / pkg / "__init__.py").read_text())
    info = target / f"{pkg}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    eps = meta["entry-points"]["attnbench.plugins"]
    (info / "entry_points.txt").write_text("[attnbench.plugins]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))


SUITE = config_text("plugin_example.yaml")


def test_a_suite_uses_the_plugin_pattern_on_two_domains_through_the_pool(tmp_path):
    site = tmp_path / "site"
    _install(site)
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(SUITE)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    env.pop("ATTNBENCH_PLUGINS", None)
    # One fresh interpreter (~9 s of imports each) runs the suite, then ``list``: the CLI loads the entry
    # points in main() for every command; that ``list`` loads them itself is the broken plug-in test's check.
    code = ("import sys; from benchmarks.cli import main\n"
            "run = main(['run', sys.argv[1], '--out', sys.argv[2], '--jobs', '2', '--no-report'])\n"
            "print(f'=== run exit {run}', flush=True)\n"
            "sys.exit(run or main(['list']))\n")
    res = subprocess.run([sys.executable, "-c", code, str(cfg), str(out)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "=== run exit 0" in res.stdout, res.stdout + res.stderr
    recs = [json.loads(p.read_text()) for p in (out / "runs").rglob("*.json")]
    assert sorted((r["task"], r["pattern"], r["status"]) for r in recs) == [
        ("pos_tagging", "sigmoid", "ok"), ("vision", "sigmoid", "ok")]
    listing = res.stdout.split("=== run exit 0", 1)[1].splitlines()
    line = next(ln for ln in listing if ln.strip().startswith("sigmoid "))
    assert "[plug-in entry point 'sigmoid']" in line
    assert "[built-in]" in next(ln for ln in listing if ln.strip().startswith("performer "))


def test_a_broken_plugin_is_one_line_naming_it(tmp_path):
    site = tmp_path / "site"
    _install(site)
    (site / "attnbench_plugin_example" / "__init__.py").write_text("raise ImportError('no sigmoid today')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    res = subprocess.run([sys.executable, "-m", "benchmarks", "list"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "attnbench: error: plug-in entry point 'sigmoid' (attnbench_plugin_example of attnbench-plugin-example) "
        "could not be loaded: ImportError: no sigmoid today"]
