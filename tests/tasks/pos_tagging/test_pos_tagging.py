"""The pos_tagging task: CoNLL-U reader, UD and synthetic data, models, module, metrics."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest
import torch

from tasks.common.patterns import PRESET_PATTERNS
from tasks.common.recurrence import CELLS
from tasks.common.registry import FAMILIES, UnknownNameError
from tasks.pos_tagging.data import (UPOS, SyntheticTaggingDataModule, build_synthetic, build_ud,
                                    make_synthetic_corpus, parse_conllu, read_conllu)
from tasks.pos_tagging.module import PosTaggerModule, count_stats
from tests.helpers.domains import POS_DATA as SYN
from tests.helpers.domains import POS_MODELS as SMALL
from tests.helpers.training import train_loop

MODELS = ["transformer", "transformer_truncated", "bilstm", "cnn", "mlp"]
VARIANTS = [f"transformer_{p}" for p in PRESET_PATTERNS]  # every efficient pattern takes key padding

CONLLU = """# sent_id = a
# text = Don't read the book.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\t_\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\t_\t_\t3\tadvmod\t_\t_
3\tread\tread\tVERB\t_\t_\t0\troot\t_\t_
4\tthe\tthe\tDET\t_\t_\t5\tdet\t_\t_
4.1\tgot\tget\tVERB\t_\t_\t_\t_\t_\t_
5\tbook\tbook\tNOUN\t_\t_\t3\tobj\t_\t_
6\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# sent_id = b
1\tBook\tbook\tVERB\t_\t_\t0\troot\t_\t_
2\tit\tit\tPRON\t_\t_\t1\tobj\t_\t_

"""




def _net(task, name, info, seed=0, **extra):
    torch.manual_seed(seed)
    spec = task.models.get(name)
    return spec.build(info, **{**spec.params, **SMALL[name], **extra})


def _train(task, name, dm, epochs, lr=1e-2, seed=0):
    net = _net(task, name, dm.info, seed)
    module = task.make_module(net, dm.info, **{**task.module_params, "warmup_steps": 0})
    return module, train_loop(module, torch.optim.AdamW(module.parameters(), lr=lr), epochs, dm.train_dataloader)


def _evaluate(module, dm, split="test") -> float:
    module._reset("test")
    loader = dm.test_dataloader() if split == "test" else dm.val_dataloader()
    with torch.no_grad():
        for batch in loader:
            module.step(batch, "test")
    s = module.stats["test"].tolist()
    return s[0] / s[1]


# --------------------------------------------------------------------------- registry
def test_task_registered(task):
    assert (task.name, task.metric, task.mode) == ("pos_tagging", "acc", "max")
    assert set(task.datasets.names()) == {"ud", "synthetic", "synthetic_far"}
    assert task.datasets.get("synthetic").synthetic and not task.datasets.get("ud").synthetic
    assert set(task.models.names()) == set(MODELS) | set(VARIANTS) | {"modern_rnn", *CELLS}
    assert {task.models.get(n).family for n in MODELS} == set(FAMILIES)
    assert task.models.get("transformer").pattern == "full"
    assert task.models.get("transformer_truncated").pattern == "truncated"
    with pytest.raises(UnknownNameError, match="bilstm"):
        task.models.get("lstm")


# --------------------------------------------------------------------------- CoNLL-U
def test_conllu_reader_skips_ranges_empty_nodes_and_comments(tmp_path):
    sents = parse_conllu(CONLLU)
    assert sents == [(["Do", "n't", "read", "the", "book", "."], ["AUX", "PART", "VERB", "DET", "NOUN", "PUNCT"]),
                     (["Book", "it"], ["VERB", "PRON"])]
    p = tmp_path / "x.conllu.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write(CONLLU)
    assert read_conllu(p) == sents
    with pytest.raises(FileNotFoundError, match="nope.conllu"):
        read_conllu(tmp_path / "nope.conllu")
    with pytest.raises(ValueError, match="no UPOS"):
        parse_conllu("1\tx\tx\t_\t_\t_\t0\troot\t_\t_\n\n")


def test_conllu_heads_give_each_words_distance_to_its_head():
    """``|HEAD - ID|`` per syntactic word (multi-word ranges and empty nodes skipped), 0 at the root."""
    sents = parse_conllu(CONLLU, heads=True)
    assert [s[2] for s in sents] == [[2, 1, 0, 1, 2, 3], [0, 1]]
    assert [s[:2] for s in sents] == parse_conllu(CONLLU)
    with pytest.raises(ValueError, match=r"f\.conllu.*line 1.*HEAD 'zz', not a word id"):
        parse_conllu("1\tx\tx\tNOUN\t_\t_\tzz\troot\t_\t_\n\n", source="f.conllu", heads=True)


def _write_treebank(folder: Path, code: str = "xx_toy") -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    train = CONLLU + "1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tbook\tbook\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
    dev = "1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tzebra\tzebra\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
    paths = {}
    for split, text in (("train", train), ("dev", dev), ("test", dev)):
        p = folder / f"{code}-ud-{split}.conllu"
        p.write_text(text, encoding="utf-8")
        paths[f"{split}_file"] = str(p)
    return paths


def test_ud_from_files_vocab_oov_and_batches(tmp_path):
    files = _write_treebank(tmp_path / "tb")
    dm = build_ud(None, str(tmp_path / "cache"), 0, **files)
    info = dm.info
    assert info["num_train"] == 3 and info["num_tags"] == 17 and info["tags"] == list(UPOS)
    # words seen >= 2 times in train (lower-cased): the, book; others are UNK
    assert dm.words.itos == ["<pad>", "<unk>", "book", "the"]
    words, forms, tags, oov, arcs = dm.splits["val"][0]
    assert arcs.tolist() == [1, 0]  # "The" -> "zebra" (the root)
    assert words.tolist() == [dm.words.get("the"), 1]  # "The" -> "the"; "zebra" unknown
    assert tags.tolist() == [UPOS.index("DET"), UPOS.index("NOUN")]
    assert oov.tolist() == [True, True]  # the exact forms "The" and "zebra" never occur in train
    batch = dm.collate([dm.splits["train"][0], dm.splits["val"][0]])
    assert batch["mask"].tolist() == [[True] * 6, [True, True, False, False, False, False]]
    assert batch["arcs"].tolist() == [[2, 1, 0, 1, 2, 3], [1, 0, 0, 0, 0, 0]]
    assert not batch["oov"][1, 2:].any()
    # every word's character row spells its form, between the markers
    itos = dm.chars.itos
    for b, item in enumerate([dm.splits["train"][0], dm.splits["val"][0]]):
        for pos in range(len(item[0])):
            row = [c for c in batch["chars"][batch["types"][b, pos]].tolist() if c != 0]
            spelled = "".join(itos[c] if c > 3 else "?" for c in row[1:-1])
            form = ["Do", "n't", "read", "the", "book", "."][pos] if b == 0 else ["The", "zebra"][pos]
            assert row[0] == 2 and row[-1] == 3
            assert spelled == "".join(ch if ch in dm.chars else "?" for ch in form)
    assert dm.checksum() == build_ud(None, None, 5, **files).checksum()


def test_ud_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown treebank='xx_nope'.*en_ewt"):
        build_ud(None, None, 0, treebank="xx_nope")
    with pytest.raises(ValueError, match="without dev_file, test_file"):
        build_ud(None, None, 0, train_file="a.conllu")
    with pytest.raises(ValueError, match="unknown params.*treebank"):
        build_ud(None, None, 0, tree_bank="en_ewt")
    empty = tmp_path / "data"
    empty.mkdir()
    dm = build_ud(str(empty), str(tmp_path / "cache"), 0, download=False)
    with pytest.raises(FileNotFoundError, match="ud_english_ewt/en_ewt-ud-train.conllu"):
        dm.info
    # another treebank through its repository name, from a data dir in the shared layout
    _write_treebank(tmp_path / "data" / "ud_toy_lang_tb", "xx_toy")
    dm = build_ud(str(empty), str(tmp_path / "cache"), 0, treebank="xx_toy", ud_repo="UD_Toy_Lang-TB", download=False)
    assert dm.info["num_train"] == 3


def test_ud_test_file_alone_replaces_only_the_test_split(tmp_path):
    """Another treebank's test set for a model trained on this one (a cell's test_sets, attnbench eval)."""
    _write_treebank(tmp_path / "data" / "ud_toy_lang_tb", "xx_toy")
    other = _write_treebank(tmp_path / "other", "yy_other")["train_file"]  # its 3 training sentences as a test set
    kw = dict(treebank="xx_toy", ud_repo="UD_Toy_Lang-TB", download=False)
    base = build_ud(str(tmp_path / "data"), str(tmp_path / "cache"), 0, **kw)
    swapped = build_ud(str(tmp_path / "data"), str(tmp_path / "cache"), 0, test_file=other, **kw)
    assert swapped.info["num_test"] == 3 != base.info["num_test"]
    for split in ("train", "val"):  # the vocabulary and training data stay the treebank's
        assert [t.tolist() for t in swapped.splits[split][0]] == [t.tolist() for t in base.splits[split][0]]
    assert swapped.words.itos == base.words.itos
    with pytest.raises(ValueError, match="pass all three, test_file alone"):
        build_ud(None, None, 0, dev_file="a.conllu", test_file="b.conllu")


@pytest.mark.data
def test_ud_english_ewt_counts(shared_data, tmp_path):
    src = shared_data / "ud_english_ewt"
    before = {p.name: p.stat().st_mtime_ns for p in src.iterdir()}
    dm = build_ud(str(shared_data), str(tmp_path / "cache"), 0)
    sizes = {s: (len(dm.splits[s]), sum(len(it[0]) for it in dm.splits[s])) for s in ("train", "val", "test")}
    assert sizes == {"train": (12544, 204577), "val": (2001, 25147), "test": (2077, 25094)}  # data README
    tags = torch.cat([it[2] for it in dm.splits["test"]])
    assert len(tags.unique()) == 17
    oov = torch.cat([it[3] for it in dm.splits["test"]]).float().mean()
    assert 0.03 < oov < 0.2
    assert {p.name: p.stat().st_mtime_ns for p in src.iterdir()} == before


# --------------------------------------------------------------------------- synthetic
def test_synthetic_deterministic_from_data_seed_only(task):
    spec = task.datasets.get("synthetic")
    params = {**spec.params, **SYN}
    a, b = spec.build(None, None, 0, **params), spec.build(None, None, 7, **params)
    assert a.checksum() == b.checksum() and a.checksum().startswith("sha256:")
    assert spec.build(None, None, 0, **{**params, "data_seed": 1}).checksum() != a.checksum()
    with pytest.raises(ValueError, match="unknown params.*num_train"):
        build_synthetic(None, None, 0, num_trains=5)
    with pytest.raises(ValueError, match="p_ambiguous"):
        SyntheticTaggingDataModule(p_ambiguous=2.0).info


def test_synthetic_words_are_ambiguous():
    sents = make_synthetic_corpus(400, data_seed=3)
    readings: dict[str, set] = {}
    for ws, ts in sents:
        assert len(ws) == len(ts) and set(ts) <= set(UPOS)
        for w, t in zip(ws, ts):
            readings.setdefault(w, set()).add(t)
    ambiguous_tokens = sum(len(readings[w]) > 1 for ws, _ in sents for w in ws)
    assert ambiguous_tokens / sum(len(ws) for ws, _ in sents) > 0.2


def test_synthetic_needs_context(task, syn):
    """The no-context floor stays clearly below the contextual models."""
    mlp, _ = _train(task, "mlp", syn, 3)
    floor = _evaluate(mlp, syn)
    for name in ("bilstm", "cnn", "transformer_truncated"):
        module, _ = _train(task, name, syn, 3)
        acc = _evaluate(module, syn)
        assert acc > floor + 0.05, (name, acc, floor)
    assert floor < 0.9


# --------------------------------------------------------------------------- models
@pytest.mark.parametrize("name", MODELS)
def test_every_model_trains(task, syn, name):
    _, losses = _train(task, name, syn, 1)
    assert all(v == v for v in losses)
    k = max(3, len(losses) // 8)
    assert sum(losses[-k:]) / k < 0.7 * sum(losses[:k]) / k, losses


def test_registered_presets_build(task, syn):
    for name in MODELS:
        spec = task.models.get(name)
        net = spec.build(syn.info, **spec.params)
        logits = net(syn.collate([syn.splits["val"][0], syn.splits["val"][1]]))
        assert logits.shape[-1] == 17 and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", MODELS)
def test_padding_never_leaks(task, syn, name):
    """A sentence's logits are the same alone and in a batch with a longer sentence, whatever
    the padded positions hold."""
    net = _net(task, name, syn.info).eval()
    items = sorted(syn.splits["val"], key=lambda it: len(it[0]))
    short, long = items[0], items[-1]
    alone = syn.collate([short])
    batch = syn.collate([short, long])
    n = len(short[0])
    noisy = dict(batch)
    noisy["words"] = batch["words"].clone()
    noisy["words"][0, n:] = torch.randint(2, syn.info["num_words"], (batch["words"].shape[1] - n,))
    noisy["types"] = batch["types"].clone()
    noisy["types"][0, n:] = 0
    with torch.no_grad():
        ref = net(alone)[0]
        torch.testing.assert_close(net(batch)[0, :n], ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(net(noisy)[0, :n], ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,window_words", [("transformer_truncated", 2), ("cnn", None), ("mlp", 0)])
def test_receptive_field(task, syn, name, window_words):
    """A word far away changes nothing under truncated attention (2 layers x window 1) and the
    MLP; the dilated CNN (3 layers, dilations 1, 2, 4: 7 words) sees a word 5 positions away."""
    net = _net(task, name, syn.info).eval()
    item = max(syn.splits["train"], key=lambda it: len(it[0]))
    assert len(item[0]) >= 8
    batch = syn.collate([item])
    far = dict(batch)
    far["words"] = batch["words"].clone()
    far["types"] = batch["types"].clone()
    dist = 5 if name == "cnn" else (window_words or 0) + 1
    far["words"][0, dist] = (far["words"][0, dist] + 1) % syn.info["num_words"] or 2
    far["types"][0, dist] = (far["types"][0, dist] + 1) % batch["chars"].shape[0]
    with torch.no_grad():
        a, b = net(batch)[0, 0], net(far)[0, 0]
    assert torch.allclose(a, b, atol=1e-6) == (name != "cnn")


# --------------------------------------------------------------------------- module
def test_count_stats_against_a_reference():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        b, l = 6, 9
        lengths = torch.randint(1, l + 1, (b,), generator=g)
        mask = torch.arange(l)[None] < lengths[:, None]
        gold = torch.randint(0, 4, (b, l), generator=g)
        pred = torch.where(torch.rand(b, l, generator=g) < 0.7, gold, torch.randint(0, 4, (b, l), generator=g))
        oov = torch.rand(b, l, generator=g) < 0.3
        ref = [0] * 6
        for i in range(b):
            n = int(lengths[i])
            hits = [int(pred[i, j] == gold[i, j]) for j in range(n)]
            ref[0] += sum(hits)
            ref[1] += n
            ref[2] += sum(h for h, o in zip(hits, oov[i, :n].tolist()) if o)
            ref[3] += int(oov[i, :n].sum())
            ref[4] += int(all(hits))
            ref[5] += 1
        assert count_stats(pred, gold, mask, oov).tolist() == ref


def test_module_step_masks_padding(task, syn):
    net = _net(task, "bilstm", syn.info).eval()
    module = task.make_module(net, syn.info, **task.module_params)
    assert isinstance(module, PosTaggerModule) and module.tag_names == list(UPOS)
    items = syn.splits["val"][:8]
    batch = syn.collate(items)
    batch["tags"][~batch["mask"]] = 5  # garbage where there are no words
    with torch.no_grad():
        out = module.step(batch, "val")
        losses, correct, total = [], 0, 0
        for it in items:
            logits = net(syn.collate([it]))[0]
            losses.append(torch.nn.functional.cross_entropy(logits, it[2], reduction="sum"))
            correct += int((logits.argmax(-1) == it[2]).sum())
            total += len(it[2])
    assert out.tokens == total and out.samples == 8
    torch.testing.assert_close(out.loss, torch.stack(losses).sum() / total)
    assert module.stats["val"][:2].tolist() == [correct, total]


def test_lightning_fit_test_and_extras(task, syn, tmp_path):
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    L.seed_everything(0, verbose=False)
    module = task.make_module(_net(task, "cnn", syn.info), syn.info, **task.module_params)
    ckpt = ModelCheckpoint(dirpath=tmp_path, monitor="val/acc", mode="max")
    trainer = L.Trainer(max_epochs=2, callbacks=[ckpt], enable_progress_bar=False, logger=False,
                        accelerator="cpu", enable_model_summary=False, num_sanity_val_steps=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, syn)
        res = trainer.test(module, syn, ckpt_path="best", verbose=False)[0]
    extras = module.report_extras(trainer, syn)["pos_confusion"]
    m = torch.tensor(extras["matrix"])
    n_test = sum(len(it[0]) for it in syn.splits["test"])
    assert int(m.sum()) == n_test and extras["tags"] == list(UPOS)
    assert res["test/acc"] == pytest.approx(float(m.trace() / m.sum()))
    assert 0 <= res["test/sent_acc"] <= res["test/acc"] and res["test/acc"] > 0.5
    c, t = extras["oov"]
    assert t == sum(int(it[3].sum()) for it in syn.splits["test"])
    if t:
        assert res["test/oov_acc"] == pytest.approx(c / t)
    assert module.counts["train"]["tokens"] == 2 * sum(len(it[0]) for it in syn.splits["train"])
