"""The test stage's per-unit outcomes (:attr:`TaskModule.test_items`, issue 51 item 2): kept by the
test steps without a host-device sync, put in data order at the epoch's end whatever the batches
(length buckets reorder a test split), equal unit by unit to the outcomes computed in data order
directly; off with ``collect_items`` and under several ranks."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch

from tasks.common import module as M
from tasks.common.module import StepOutput, TaskModule
from tests.helpers.domains import (GRAPHS_DATA, POS_DATA, SPEECH_FRAMES, TRANSLATION_DATA, TRANSLATION_MODELS,
                                   build_small)
from tests.helpers.sync import count_syncs

POS_MLP = {"word_dim": 16, "char_dim": 8, "char_out": 16, "d_model": 32}


def _test(module, dm):
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return trainer.test(module, datamodule=dm, verbose=False)[0]


class _Units(TaskModule):
    """A module whose test "examples" are dataset indices with ``k`` units each (its batches given)."""

    item_unit, item_group = "token", "sentence"

    def step(self, batch, stage):  # pragma: no cover - not stepped here
        raise NotImplementedError


def _with_batches(module: TaskModule, batches: list[list[int]] | object) -> TaskModule:
    loader = SimpleNamespace(batch_sampler=batches)
    object.__setattr__(module, "_trainer", SimpleNamespace(test_dataloaders=loader))
    return module


def test_outcomes_in_batch_order_go_to_data_order():
    batches = [[3, 0], [2], [1, 4]]  # a bucketed test epoch
    sizes = {0: 1, 1: 1, 2: 3, 3: 2, 4: 2}  # units per example
    order = [i for b in batches for i in b]
    values = np.array([10 * i + k for i in order for k in range(sizes[i])])  # (M,) unit k of example i
    module = _with_batches(_Units(torch.nn.Linear(1, 1)), batches)
    module.finish_items(values, np.array([sizes[i] for i in order]), [len(b) for b in batches])
    items = module.test_items
    assert items.values.tolist() == [0, 10, 20, 21, 22, 30, 31, 40, 41]
    assert items.ids.tolist() == list(range(9)) and items.group == "sentence"
    assert items.group_ids.tolist() == [0, 1, 2, 3, 4] and items.group_sizes.tolist() == [1, 1, 3, 2, 2]
    # one unit per example, no group: the ids are the dataset indices
    module.item_unit, module.item_group = "image", None
    module.finish_items(np.array(order) * 10, np.ones(5, dtype=np.int64), [2, 1, 2])
    assert module.test_items.ids.tolist() == [0, 1, 2, 3, 4] and module.test_items.values.tolist() == [0, 10, 20, 30, 40]
    assert module.test_items.group_ids is None and module.test_items.unit == "image"


class _Drifting:
    """A batch sampler that does not give the same batches twice (a shuffled test loader)."""

    def __init__(self) -> None:
        self.calls = 0

    def __iter__(self):
        self.calls += 1
        return iter([[0, 1], [2]] if self.calls % 2 else [[2, 1], [0]])


@pytest.mark.parametrize("batches,sizes", [(_Drifting(), [2, 1]), ([[0, 1], [2]], [2, 2])])
def test_batches_that_cannot_be_matched_keep_no_items(batches, sizes):
    module = _with_batches(_Units(torch.nn.Linear(1, 1)), batches)
    with pytest.warns(UserWarning, match="no per-item test outcomes"):
        module.finish_items(np.zeros(sum(sizes), dtype=bool), np.ones(sum(sizes), dtype=np.int64), sizes)
    assert module.test_items is None


def test_several_ranks_or_collect_items_off_keep_none(monkeypatch):
    module = _Units(torch.nn.Linear(1, 1))
    assert module.keeps_items("test") and not module.keeps_items("val") and not module.keeps_items("train")
    module.collect_items = False
    assert not module.keeps_items("test")
    module.collect_items = True
    monkeypatch.setattr(M, "world_size", lambda: 2)
    assert not module.keeps_items("test")


def test_pos_tokens_equal_the_tagger_run_in_data_order(tmp_path):
    """Length-bucketed test batches (sorted by length) come back as every real word's correctness,
    sentence by sentence in dataset order: what the tagger gives on the sentences in that order."""
    module, dm = build_small("pos_tagging", "synthetic", "mlp", str(tmp_path),
                             data_params={**POS_DATA, "num_test": 90, "eval_batch_size": 8}, model_params=POS_MLP)
    dm.use_length_buckets(3)
    out = _test(module, dm)
    items = module.test_items
    test = dm.splits["test"]
    batch = dm.collate([test[i] for i in range(len(test))])  # one batch, dataset order
    module.eval()
    with torch.no_grad():
        pred = module.net(batch).argmax(-1)  # (N, L)
    direct = (pred == batch["tags"])[batch["mask"]].numpy()  # (tokens,) sentence by sentence
    assert items.unit == "token" and items.values.dtype == bool and (items.values == direct).all()
    assert items.group_sizes.tolist() == [len(test[i][0]) for i in range(len(test))]
    assert items.values.mean() == pytest.approx(out["test/acc"], abs=1e-6)


def _treebank(folder, n: int, seed: int = 0) -> dict[str, str]:
    """A random CoNLL-U treebank (train = dev = test) of ``n`` sentences with random heads."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        size = int(rng.integers(1, 12))
        root = int(rng.integers(1, size + 1))
        for i in range(1, size + 1):
            head = 0 if i == root else int(rng.choice([j for j in range(1, size + 1) if j != i]))
            lines.append(f"{i}\tw{rng.integers(20)}\t_\t{'NOUN' if rng.random() < 0.5 else 'VERB'}\t_\t_\t{head}\tdep\t_\t_")
        lines.append("")
    text = "\n".join(lines) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split in ("train", "dev", "test"):
        (folder / f"{split}.conllu").write_text(text, encoding="utf-8")
        out[f"{split}_file"] = str(folder / f"{split}.conllu")
    return out


def test_pos_items_carry_each_words_head_distance_in_data_order(tmp_path):
    """On UD, the test items keep each word's distance to its head (the report's distance axis),
    reordered with the correctness from length-bucketed batches: equal to the treebank's, word by word."""
    from tasks.pos_tagging.data import read_conllu

    files = _treebank(tmp_path / "tb", 60)
    module, dm = build_small("pos_tagging", "ud", "mlp", str(tmp_path / "cache"),
                             data_params={**files, "eval_batch_size": 8, "batch_size": 8}, model_params=POS_MLP)
    dm.use_length_buckets(3)
    _test(module, dm)
    items = module.test_items
    arcs = [a for _, _, sent in read_conllu(files["test_file"], heads=True) for a in sent]
    assert items.axis == "head_distance" and items.axis_values.tolist() == arcs
    assert len(items.values) == len(arcs)
    # the synthetic grammar has no syntax: no axis
    module, dm = build_small("pos_tagging", "synthetic", "mlp", str(tmp_path), data_params=POS_DATA, model_params=POS_MLP)
    _test(module, dm)
    assert module.test_items.axis is None and module.test_items.axis_values is None


def test_graph_nodes_are_the_test_mask_in_node_order(tmp_path):
    module, dm = build_small("graphs", "sbm", "gcn", str(tmp_path), data_params=GRAPHS_DATA, model_params={})
    out = _test(module, dm)
    data = dm.data
    module.eval()
    with torch.no_grad():
        hit = module.net(data).argmax(-1) == data.y
    assert module.test_items.unit == "node" and module.test_items.group is None
    assert (module.test_items.values == hit[data.test_mask].numpy()).all()
    assert len(module.test_items.values) == GRAPHS_DATA["num_test"]
    assert module.test_items.values.mean() == pytest.approx(out["test/acc"], abs=1e-6)


def test_translation_keeps_each_sentence_bleu_statistics_in_data_order(tmp_path):
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from tasks.translation.module import BLEU_FIELDS

    module, dm = build_small("translation", "synthetic", "rnn_noattn", str(tmp_path),
                             data_params={**TRANSLATION_DATA, "eval_batch_size": 8},
                             model_params=TRANSLATION_MODELS["rnn_noattn"])
    out = _test(module, dm)
    items = module.test_items
    test = dm.splits["test"]
    tok = Tokenizer13a()
    ref_lens = [len(tok(test[i][2].rstrip()).split()) for i in range(len(test))]
    assert items.unit == "sentence" and items.fields == BLEU_FIELDS and items.values.shape == (len(test), 10)
    assert items.values[:, 1].tolist() == ref_lens  # each row beside its own reference
    from sacrebleu import BLEU

    s = [int(v) for v in items.values.sum(0)]
    assert BLEU.compute_bleu(s[2:6], s[6:], s[0], s[1], smooth_method="exp").score == pytest.approx(out["test/bleu"])


@pytest.mark.parametrize("task_name,dataset,model,data,params", [
    ("pos_tagging", "synthetic", "mlp", {**POS_DATA, "num_test": 40}, POS_MLP),
    ("graphs", "sbm", "gcn", GRAPHS_DATA, {}),
    ("speech", "synthetic_frames", "frame_mlp", {**SPEECH_FRAMES, "batch_size": 4}, {"d_model": 16}),
    ("vision", "synthetic", "patch_bag", {"num_train": 32, "num_val": 32, "num_test": 48, "batch_size": 16}, {"d_model": 16}),
])
def test_keeping_items_adds_no_sync_to_a_test_step(task_name, dataset, model, data, params, tmp_path):
    module, dm = build_small(task_name, dataset, model, str(tmp_path), data_params=data, model_params=params)
    counts = {}
    step = module.test_step

    def counted(batch, batch_idx):
        with count_syncs(locate_backward=False) as c:
            step(batch, batch_idx)
        counts.setdefault(module.collect_items, []).extend(c.syncs)

    module.test_step = counted
    for keep in (False, True):
        module.collect_items = keep
        _test(module, dm)
    assert module.test_items is not None
    assert len(counts[True]) == len(counts[False]), "\n".join(map(str, counts[True]))


def test_a_step_output_without_items_keeps_none():
    out = StepOutput(loss=torch.zeros(()), metrics={}, samples=1)
    assert out.items is None and out.item_mask is None


def test_corpus_bleu_from_sentence_statistics_is_corpus_bleu():
    from tasks.translation.module import corpus_scores, sentence_stats

    refs = ["The cat sat on the mat .", "A dog ran", "hello world", "x"]
    hyps = ["the cat sat on a mat.", "A dog ran fast", "Hello world", ""]
    for h in (hyps, refs, ["", "", "", ""]):
        assert corpus_scores(h, refs, sentence_stats(h, refs)) == corpus_scores(h, refs)  # exactly
