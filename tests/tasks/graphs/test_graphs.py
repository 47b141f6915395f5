"""The graphs task: registration, data (SBM, Planetoid from a data dir), models, module."""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

import pytest
import torch

from tasks.common.registry import FAMILIES, UnknownNameError, get_task
from tasks.graphs import data as gdata
from tasks.graphs.data import PlanetoidDataModule, SBMDataModule, make_sbm
from tasks.graphs.module import GraphNodeClassifier
from tests.conftest import shared_data_root
from tests.helpers.domains import GRAPHS_DATA as SMALL_SBM
from tests.helpers.training import train_loop

REPO = Path(__file__).resolve().parents[3]


def _shared_data() -> Path | None:
    root = shared_data_root()  # $ATTNBENCH_DATA or ../shared/data, as every other test
    return root if root is not None and (root / "planetoid" / "Cora" / "raw").is_dir() else None


@pytest.fixture(scope="module")
def task():
    return get_task("graphs")


@pytest.fixture(scope="module")
def sbm():
    return SBMDataModule(**SMALL_SBM)


def _train(task, name, dm, epochs, seed=0, **params):
    """Plain full-batch loop with the task's optimiser settings; returns (net, losses)."""
    torch.manual_seed(seed)
    spec = task.models.get(name)
    net = spec.build(dm.info, **{**spec.params, **params})
    module = task.make_module(net, dm.info, **task.module_params)
    return module, train_loop(module, module.configure_optimizers(), epochs, lambda: [dm.data])


def _test_acc(module, dm) -> float:
    with torch.no_grad():
        return float(module.step(dm.data, "test").metrics["acc"])


# --------------------------------------------------------------------------- registry
def test_task_registered(task):
    assert task.name == "graphs" and task.metric == "acc" and task.mode == "max"
    assert set(task.datasets.names()) == {"planetoid", "sbm"}
    assert task.datasets.get("sbm").synthetic and not task.datasets.get("planetoid").synthetic
    assert {"graph_attention", "full_attention", "gcn", "ggnn", "mlp"} <= set(task.models.names())
    families = {task.models.get(n).family for n in task.models.names()}
    assert families == set(FAMILIES)
    assert task.models.get("graph_attention").pattern == "graph"
    assert task.models.get("full_attention").pattern == "full"
    with pytest.raises(UnknownNameError, match="graph_attention"):
        task.models.get("gat")


# --------------------------------------------------------------------------- SBM
def test_sbm_deterministic_and_independent_of_run_seed(task):
    spec = task.datasets.get("sbm")
    a = spec.build(None, None, 0, **spec.params)
    b = spec.build(None, None, 123, **spec.params)  # the run seed does not change the graph
    assert a.checksum() == b.checksum() and a.checksum().startswith("sha256:")
    for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(a.data, key), getattr(b.data, key))
    c = spec.build(None, None, 0, **{**spec.params, "data_seed": 1})
    assert c.checksum() != a.checksum()
    info = a.info
    assert info["num_nodes"] == spec.params["num_nodes"] and info["num_classes"] == spec.params["num_classes"]
    assert info["num_features"] == spec.params["feature_dim"] and info["num_edges"] == a.data.edge_index.shape[1]


def test_sbm_graph_split_and_homophily(sbm):
    d = sbm.data
    ei = d.edge_index
    assert (ei[0] != ei[1]).all()  # no self-loops
    adj = torch.zeros(d.num_nodes, d.num_nodes, dtype=torch.bool)
    adj[ei[0], ei[1]] = True
    assert torch.equal(adj, adj.T)  # undirected: both directions stored
    assert sbm.homophily() > 0.7
    # masks: disjoint, 20 per class for training
    m = d.train_mask.int() + d.val_mask.int() + d.test_mask.int()
    assert m.max() == 1
    assert torch.bincount(d.y[d.train_mask], minlength=4).tolist() == [20] * 4
    assert int(d.val_mask.sum()) == 60 and int(d.test_mask.sum()) == 100


def test_sbm_rejects_bad_params():
    with pytest.raises(ValueError, match="unknown params"):
        SBMDataModule(nodes=10)
    with pytest.raises(ValueError, match="num_nodes"):
        make_sbm(num_nodes=50, num_val=100)


def test_sbm_needs_the_graph(task, sbm):
    """A model that uses the edges clearly beats the MLP floor on the synthetic graph."""
    mlp, _ = _train(task, "mlp", sbm, 60)
    gcn, _ = _train(task, "gcn", sbm, 60)
    acc_mlp, acc_gcn = _test_acc(mlp, sbm), _test_acc(gcn, sbm)
    assert acc_gcn > acc_mlp + 0.15, (acc_gcn, acc_mlp)
    gat, _ = _train(task, "graph_attention", sbm, 60)
    assert _test_acc(gat, sbm) > acc_mlp + 0.15


# --------------------------------------------------------------------------- models
@pytest.mark.parametrize(
    "name", ["graph_attention", "graph_attention_dot", "full_attention", "gcn", "ggnn", "mlp"]
)
def test_every_model_trains(task, sbm, name):
    module, losses = _train(task, name, sbm, 15)
    assert all(map(lambda v: v == v, losses))  # no NaN
    assert min(losses[-3:]) < losses[0] * 0.9, losses
    logits = module.net(sbm.data)
    assert logits.shape == (sbm.info["num_nodes"], sbm.info["num_classes"])
    # also callable as net(x, edge_index)
    torch.testing.assert_close(module.net(sbm.data.x, sbm.data.edge_index), logits)


def test_all_registered_models_build(task, sbm):
    for name in task.models.names():
        spec = task.models.get(name)
        net = spec.build(sbm.info, **spec.params)
        assert sum(p.numel() for p in net.parameters()) > 0


def _far_node(edge_index, n, target, hops):
    """A node more than ``hops`` hops from ``target``."""
    near = {target}
    for _ in range(hops):
        near |= {int(j) for j, i in edge_index.T.tolist() if i in near}
    far = [v for v in range(n) if v not in near]
    assert far, "graph too dense for the test"
    return far[0]


def test_graph_mask_respected_full_attention_not(task):
    dm = SBMDataModule(num_nodes=120, num_classes=3, p_in=0.03, p_out=0.003, num_val=20, num_test=20)
    d = dm.data
    target = int(d.edge_index[1, 0])  # a node with a neighbour
    for name, depends in (("graph_attention", False), ("graph_attention_dot", False), ("full_attention", True)):
        spec = task.models.get(name)
        torch.manual_seed(0)
        net = spec.build(dm.info, **spec.params).eval()
        layers = spec.params["num_layers"]
        far = _far_node(d.edge_index, d.num_nodes, target, layers)  # outside the receptive field
        x2 = d.x.clone()
        x2[far] += 10.0 * torch.randn(x2.shape[1])
        with torch.no_grad():
            before = net(d.x, d.edge_index)[target]
            after = net(x2, d.edge_index)[target]
        changed = not torch.allclose(before, after, atol=1e-6)
        assert changed == depends, name
        if not depends:  # but a neighbour does matter
            nb = int(d.edge_index[0, d.edge_index[1] == target][0])
            x3 = d.x.clone()
            x3[nb] += 10.0 * torch.randn(x3.shape[1])
            with torch.no_grad():
                assert not torch.allclose(net(x3, d.edge_index)[target], before, atol=1e-6)


def test_full_attention_ignores_edges(task, sbm):
    spec = task.models.get("full_attention")
    torch.manual_seed(0)
    net = spec.build(sbm.info, **spec.params).eval()
    with torch.no_grad():
        a = net(sbm.data.x, sbm.data.edge_index)
        b = net(sbm.data.x, sbm.data.edge_index[:, :10])
    torch.testing.assert_close(a, b)


def test_full_attention_over_nodes_is_exact():
    from attn_core import reference_attention
    from tasks.graphs.models import _full_attention

    g = torch.Generator().manual_seed(0)
    for n, h, d in [(37, 1, 7), (50, 3, 4), (5, 8, 2)]:
        q, k, v = (torch.randn(n, h, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
        out = _full_attention(q, k, v, 0.0)
        ref = reference_attention(*(t.transpose(0, 1) for t in (q, k, v))).transpose(0, 1)
        torch.testing.assert_close(out, ref)
        g1 = torch.autograd.grad(out.square().sum(), (q, k, v))
        g2 = torch.autograd.grad(ref.square().sum(), (q, k, v))
        for a, b in zip(g1, g2):
            torch.testing.assert_close(a, b)


def test_attention_net_rejects_bad_params(task, sbm):
    from tasks.graphs.models import AttentionNet

    with pytest.raises(ValueError, match="score"):
        AttentionNet(4, 2, pattern="full", score="additive")
    with pytest.raises(ValueError, match="pattern"):
        AttentionNet(4, 2, pattern="truncated")


# --------------------------------------------------------------------------- module
def test_module_step_uses_the_stage_mask(task, sbm):
    spec = task.models.get("mlp")
    module = task.make_module(spec.build(sbm.info, **spec.params), sbm.info, **task.module_params)
    assert isinstance(module, GraphNodeClassifier)
    assert module.hparams.lr == 0.005 and module.hparams.weight_decay == 5e-4 and module.hparams.optimizer == "adam"
    module.eval()
    for stage, key in (("train", "train_mask"), ("val", "val_mask"), ("test", "test_mask")):
        out = module.step(sbm.data, stage)
        mask = getattr(sbm.data, key)
        assert out.samples == int(mask.sum())
        logits = module.net(sbm.data)[mask]
        expected = (logits.argmax(-1) == sbm.data.y[mask]).float().mean()
        torch.testing.assert_close(out.metrics["acc"], expected)
        torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(logits, sbm.data.y[mask]))


def test_lightning_fit_and_test(task, sbm, tmp_path):
    import lightning as L
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    L.seed_everything(0, verbose=False)
    spec = task.models.get("gcn")
    module = task.make_module(spec.build(sbm.info, **spec.params), sbm.info, **task.module_params)
    ckpt = ModelCheckpoint(dirpath=tmp_path, monitor="val/acc", mode="max")
    trainer = L.Trainer(
        max_epochs=30, callbacks=[ckpt, EarlyStopping("val/acc", mode="max", patience=100)],
        enable_progress_bar=False, logger=False, accelerator="cpu", enable_model_summary=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, sbm)
        res = trainer.test(module, sbm, ckpt_path="best", verbose=False)[0]
    assert trainer.global_step == 30  # one full-batch step per epoch
    assert res["test/acc"] > 0.6
    assert module.counts["train"]["samples"] == 30 * sbm.info["num_train"]


# --------------------------------------------------------------------------- Planetoid
def _tree_state(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.data
def test_planetoid_cora_from_data_dir(task, tmp_path):
    shared = _shared_data()
    if shared is None:
        pytest.skip("shared data ($ATTNBENCH_DATA or ../shared/data) with planetoid/Cora not found")
    before = _tree_state(shared / "planetoid")
    spec = task.datasets.get("planetoid")
    dm = spec.build(str(shared), str(tmp_path / "cache"), 0, **spec.params)
    d = dm.data
    assert dm.info["num_nodes"] == 2708 and dm.info["num_edges"] == 10556
    assert dm.info["num_features"] == 1433 and dm.info["num_classes"] == 7
    assert (int(d.train_mask.sum()), int(d.val_mask.sum()), int(d.test_mask.sum())) == (140, 500, 1000)
    torch.testing.assert_close(d.x.sum(-1)[d.x.sum(-1) > 0], torch.ones(int((d.x.sum(-1) > 0).sum())))  # row-normalised
    raw = tmp_path / "cache" / "planetoid" / "Cora" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(dm.raw_file_names)
    assert not (tmp_path / "cache" / "planetoid" / "Cora" / "processed").exists()  # read from raw, nothing processed
    assert all(os.stat(p).st_mode & stat.S_IWUSR for p in raw.iterdir())  # the copies are writable
    assert _tree_state(shared / "planetoid") == before  # nothing written into the data dir
    # a second build (from the cache) sees the same data
    dm2 = spec.build(str(shared), str(tmp_path / "cache"), 1, **spec.params)
    assert dm2.checksum() == dm.checksum()
    # and so does a build from the cache alone
    dm3 = spec.build(None, str(tmp_path / "cache"), 0, **spec.params)
    assert dm3.checksum() == dm.checksum()
    batch = next(iter(dm.train_dataloader()))
    assert batch.num_nodes == 2708 and len(list(dm.val_dataloader())) == 1


def test_planetoid_missing_data_names_expected_file(tmp_path, monkeypatch):
    empty = tmp_path / "data"
    empty.mkdir()
    dm = PlanetoidDataModule("Cora", data_dir=empty, cache_dir=tmp_path / "cache", download=False)
    with pytest.raises(FileNotFoundError, match=str(empty / "planetoid" / "Cora" / "raw" / "ind.cora.x")):
        dm.info

    def no_network(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(gdata, "_download_planetoid", no_network)
    dm = PlanetoidDataModule("Cora", data_dir=empty, cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="ind.cora.x.*download into .* failed.*network unreachable"):
        dm.info
    dm = PlanetoidDataModule("CiteSeer", cache_dir=tmp_path / "cache")  # no data dir: the cache path
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "cache" / "planetoid" / "CiteSeer" / "raw" / "ind.citeseer.x")):
        dm.checksum()


def test_planetoid_rejects_bad_params(tmp_path):
    with pytest.raises(ValueError, match="Cora"):
        PlanetoidDataModule("Coraa", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="public"):
        PlanetoidDataModule("Cora", split="nope", cache_dir=tmp_path)


def test_limit_train_keeps_a_seeded_subset_of_train_nodes():
    a, b = SBMDataModule(**SMALL_SBM), SBMDataModule(**SMALL_SBM)
    full = a.data.train_mask.clone()
    val, test, x = a.data.val_mask.clone(), a.data.test_mask.clone(), a.data.x.clone()
    before = a.checksum()
    n = a.limit_train(0.25, seed=3)
    assert n == round(int(full.sum()) * 0.25) == int(a.data.train_mask.sum()) == a.info["num_train"]
    assert not (a.data.train_mask & ~full).any()  # a subset of the original train nodes
    assert torch.equal(a.data.val_mask, val) and torch.equal(a.data.test_mask, test) and torch.equal(a.data.x, x)
    assert a.checksum() != before
    b.limit_train(0.25, seed=3)
    assert torch.equal(a.data.train_mask, b.data.train_mask)


def test_self_loops_are_added_once_per_graph_and_never_for_another():
    """AttentionNet keeps add_self_loops' result while the same, unedited edge_index comes back
    (the boolean indexing inside it is a host-device sync); another or edited graph is recomputed."""
    import attn_core
    from tasks.graphs.models import AttentionNet

    net = AttentionNet(6, 3, hidden=4, num_heads=2, num_layers=1, pattern="graph", score="dot", dropout=0.0,
                       attn_dropout=0.0)
    ei = torch.tensor([[0, 1, 2, 2, 3], [1, 2, 3, 2, 0]])  # one existing self-loop (2 -> 2)
    want = attn_core.add_self_loops(ei, 4)
    first = net._with_self_loops(ei, 4)
    assert torch.equal(first, want) and net._with_self_loops(ei, 4) is first  # cached
    other = torch.tensor([[3, 0], [0, 1]])
    assert torch.equal(net._with_self_loops(other, 4), attn_core.add_self_loops(other, 4))  # a new graph
    ei[0, 0] = 3  # edited in place: the version counter moves
    assert torch.equal(net._with_self_loops(ei, 4), attn_core.add_self_loops(ei, 4))
    assert net._with_self_loops(ei, 5).max() == 4  # another node count
