"""The real-data homophily axis (issue 52): Planetoid edges rewired to a target edge homophily by
degree-preserving double-edge swaps (tasks/graphs/rewire.py, the planetoid dataset's ``homophily``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tasks.common.registry import get_task
from tasks.graphs import data as gdata
from tasks.graphs.data import PlanetoidDataModule, make_sbm
from tasks.graphs.rewire import edge_homophily, random_homophily, rewire_homophily
from tests.conftest import shared_data_root

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def graph():
    """A small homophilous graph: 600 nodes, 4 classes, ~1600 undirected edges, homophily ~0.8."""
    return make_sbm(num_nodes=600, num_classes=4, p_in=0.03, p_out=0.0025, data_seed=3)


def _undirected(ei: torch.Tensor) -> set[tuple[int, int]]:
    return {(a, b) for a, b in ei.T.tolist() if a < b}


def _check_simple_undirected(ei: torch.Tensor, num_edges: int) -> None:
    pairs = ei.T.tolist()
    assert ei.shape == (2, num_edges) and ei.dtype == torch.long
    assert not (ei[0] == ei[1]).any(), "a self-loop"
    assert len(set(map(tuple, pairs))) == len(pairs), "a duplicate edge"
    assert set(map(tuple, pairs)) == {(b, a) for a, b in pairs}, "an edge without its reverse"


def _degrees(ei: torch.Tensor, n: int) -> torch.Tensor:
    return torch.bincount(ei[0], minlength=n)


@pytest.mark.parametrize("target", [0.0, 0.1, 0.25, 0.5, 0.7, 0.95])
def test_reaches_the_target_keeping_edges_and_degrees(graph, target):
    ei, y = graph.edge_index, graph.y
    before = edge_homophily(ei, y)
    assert 0.75 < before < 0.9  # the fixture is what the test means
    out = rewire_homophily(ei, y, target, seed=0)
    assert abs(edge_homophily(out, y) - target) <= 0.02
    _check_simple_undirected(out, ei.shape[1])
    assert torch.equal(_degrees(out, y.numel()), _degrees(ei, y.numel()))
    key = out[1] * y.numel() + out[0]
    assert bool((key[1:] > key[:-1]).all())  # coalesced: by target, then source, as PyG's Planetoid


def test_it_changes_no_more_than_the_target_needs(graph):
    ei, y = graph.edge_index, graph.y
    e = ei.shape[1] // 2
    out = rewire_homophily(ei, y, 0.5, seed=0)
    changed = len(_undirected(ei) - _undirected(out))
    removed_same = round(edge_homophily(ei, y) * e) - round(0.5 * e)
    # every swap replaces two edges and removes one or two same-class edges
    assert removed_same <= changed <= 2 * removed_same
    near = rewire_homophily(ei, y, edge_homophily(ei, y) - 2 / e, seed=0)
    assert 1 <= len(_undirected(ei) - _undirected(near)) <= 4


def test_deterministic_per_seed_and_different_across_seeds(graph):
    ei, y = graph.edge_index, graph.y
    a, b = rewire_homophily(ei, y, 0.3, seed=1), rewire_homophily(ei, y, 0.3, seed=1)
    c = rewire_homophily(ei, y, 0.3, seed=2)
    assert torch.equal(a, b)
    assert not torch.equal(a, c) and abs(edge_homophily(c, y) - edge_homophily(a, y)) <= 2 / ei.shape[1]


def test_already_there_is_the_same_tensor_and_bad_targets_raise(graph):
    ei, y = graph.edge_index, graph.y
    e = ei.shape[1] // 2
    here = round(edge_homophily(ei, y) * e) / e
    assert rewire_homophily(ei, y, here, seed=0) is ei
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="must be in"):
            rewire_homophily(ei, y, bad)
    with pytest.raises(ValueError, match="undirected"):
        rewire_homophily(ei[:, ei[0] < ei[1]], y, 0.5)
    with pytest.raises(ValueError, match="self-loop"):
        rewire_homophily(torch.cat([ei, torch.tensor([[0], [0]])], 1), y, 0.5)
    # two classes of one node each and a path: no swap can add a same-class edge
    path = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    with pytest.raises(ValueError, match="out of reach"):
        rewire_homophily(path, torch.tensor([0, 1, 0]), 1.0, patience=5)


def test_random_homophily_is_the_degree_weighted_class_share():
    # classes 0, 0, 1 on a triangle: degrees 2, 2, 2 -> class degree shares 2/3, 1/3
    tri = torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
    assert random_homophily(tri, torch.tensor([0, 0, 1])) == pytest.approx(4 / 9 + 1 / 9)


# --------------------------------------------------------------------------- the planetoid dataset
@pytest.fixture
def fake_planetoid(monkeypatch, graph, tmp_path):
    """PlanetoidDataModule reading ``graph`` in place of the raw files (no data dir needed)."""
    monkeypatch.setattr(gdata, "materialize", lambda *a, **k: tmp_path)
    monkeypatch.setattr(gdata, "read_planetoid", lambda raw, name: graph.clone())
    return graph


def test_planetoid_homophily_null_leaves_the_graph_and_its_checksum(fake_planetoid, tmp_path):
    spec = get_task("graphs").datasets.get("planetoid")
    assert spec.params["homophily"] is None and spec.params["data_seed"] == 0
    plain = PlanetoidDataModule("Cora", cache_dir=tmp_path)
    null = spec.build(None, str(tmp_path), 0, **spec.params)
    assert torch.equal(null.data.edge_index, fake_planetoid.edge_index)
    assert null.checksum() == plain.checksum() and "edge_homophily" not in null.info
    rewired = spec.build(None, str(tmp_path), 0, **{**spec.params, "homophily": 0.3})
    assert rewired.info["edge_homophily"] == pytest.approx(0.3, abs=0.02)
    assert rewired.info["num_edges"] == null.info["num_edges"] and rewired.checksum() != null.checksum()
    for key in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(rewired.data, key), getattr(null.data, key)), key
    again = spec.build(None, str(tmp_path), 7, **{**spec.params, "homophily": 0.3})  # the run seed: unused
    other = spec.build(None, str(tmp_path), 0, **{**spec.params, "homophily": 0.3, "data_seed": 1})
    assert again.checksum() == rewired.checksum() and other.checksum() != rewired.checksum()
    assert not torch.equal(other.data.edge_index, rewired.data.edge_index)


def test_cell_ids_of_planetoid_configs_do_not_change():
    """graphs.yaml's cells still have the ids of the committed reference records (homophily and
    data_seed are left out of a cell's parameters at their defaults)."""
    from benchmarks.config import CONFIG_DIR
    from benchmarks.config.suite import expand, load_suite

    runs = REPO / "results" / "reference" / "cpu-2core-intel-xeon-processor-avx512" / "graphs_tuned" / "runs" / "graphs" / "planetoid"
    if not runs.is_dir():
        pytest.skip(f"{runs} not in this checkout")
    cells = expand(load_suite(CONFIG_DIR / "graphs.yaml"))
    assert all(c.config["dataset_params"] == {"name": "Cora", "split": "public"} for c in cells)
    missing = [c.label for c in cells if not (runs / c.model / f"seed{c.seed}-{c.cell_id}.json").is_file()]
    assert not missing


def test_when_real_sweeps_the_planetoid_homophily():
    from benchmarks.config import CONFIG_DIR
    from benchmarks.config.suite import expand, load_suite

    cfg = load_suite(CONFIG_DIR / "when_real.yaml")
    cells = expand(cfg)
    values = sorted({c.config["dataset_params"]["homophily"] for c in cells})
    assert len(values) >= 5 and values[0] <= 0.1 and 0.81 in values
    assert any(abs(v - 0.17) <= 0.01 for v in values)  # Cora's class-random level (degree-weighted)
    assert {c.dataset for c in cells} == {"planetoid"} and {c.config.get("diagnostic") for c in cells} == {"homophily"}
    assert cfg["diagnostics"]["homophily"]["sweep"] == "homophily"


# --------------------------------------------------------------------------- real Cora
@pytest.mark.data
def test_real_cora(tmp_path):
    root = shared_data_root()
    if root is None or not (root / "planetoid" / "Cora" / "raw").is_dir():
        pytest.skip("shared data ($ATTNBENCH_DATA or ../shared/data) with planetoid/Cora not found")
    spec = get_task("graphs").datasets.get("planetoid")
    orig = spec.build(str(root), str(tmp_path), 0, **spec.params)
    ei, y = orig.data.edge_index, orig.data.y
    assert ei.shape[1] == 2 * 5278 and edge_homophily(ei, y) == pytest.approx(0.81, abs=0.001)
    assert random_homophily(ei, y) == pytest.approx(0.170, abs=0.001)
    for target in (0.1, 0.17, 0.4, 0.6):
        dm = spec.build(str(root), str(tmp_path), 0, **{**spec.params, "homophily": target})
        out = dm.data.edge_index
        assert abs(dm.info["edge_homophily"] - target) <= 0.001
        _check_simple_undirected(out, ei.shape[1])
        assert torch.equal(_degrees(out, y.numel()), _degrees(ei, y.numel()))
        assert torch.equal(dm.data.x, orig.data.x) and torch.equal(dm.data.test_mask, orig.data.test_mask)
    # 0.81 is Cora's own level: nothing to rewire, the same edges
    assert torch.equal(spec.build(str(root), str(tmp_path), 0, **{**spec.params, "homophily": 0.81}).data.edge_index, ei)
    recs = sorted((REPO / "results" / "reference" / "cpu-2core-amd-epyc" / "graphs" / "runs").rglob("*.json"))
    if recs:  # the records' checksum of the original graph is unchanged
        assert json.loads(recs[0].read_text())["data"]["checksum"] == orig.checksum()
