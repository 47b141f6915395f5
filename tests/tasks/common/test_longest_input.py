"""``longest_input()`` of every sequence domain's data module (what the runner stores as a record's
``data.max_len``, so that a report shows a window at least this long as full attention) equals the
longest sequence any self-attention sees in the train and val dataloaders, counted by brute force."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import Subset

from tasks.common.registry import get_task
from tests.helpers.domains import POS_DATA, SPEECH_DATA, SPEECH_FRAMES, TRANSLATION_DATA

#: (task, dataset, params, the batch's masks of the sequences an attention sees)
CASES = [
    ("pos_tagging", "synthetic", POS_DATA, ("mask",)),
    ("translation", "synthetic", TRANSLATION_DATA, ("src_mask", "tgt_mask")),  # encoder and decoder
    ("speech", "synthetic", SPEECH_DATA, ("mask",)),
    ("speech", "synthetic_frames", SPEECH_FRAMES, ("mask",)),
]


def _build(task: str, dataset: str, params: dict, tmp_path):
    spec = get_task(task).datasets.get(dataset)
    return spec.build(None, str(tmp_path), 0, **{**spec.params, **params})


def _brute_force(dm, masks: tuple[str, ...]) -> int:
    longest = 0
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        for batch in loader:
            for key in masks:
                m = batch[key]  # (B, L) True = a real position
                assert m.dtype == torch.bool and m.ndim == 2
                longest = max(longest, int(m.sum(1).max()))
    return longest


@pytest.mark.parametrize("task,dataset,params,masks", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_longest_input_is_the_longest_sequence_of_train_and_val(task, dataset, params, masks, tmp_path):
    dm = _build(task, dataset, params, tmp_path)
    assert dm.longest_input() is None  # before setup: nothing is known, nothing is loaded
    dm.setup("fit")
    info = dict(dm.info)
    longest = dm.longest_input()
    assert isinstance(longest, int) and longest == _brute_force(dm, masks)
    assert dm.info == info  # data.info (what `attnbench eval` compares) is left as it was


def _longer(item: tuple, times: int = 50) -> tuple:
    """``item`` with every sequence repeated ``times`` times: longer than any item of the data."""
    return tuple(torch.cat([t] * times) if isinstance(t, torch.Tensor) and t.ndim >= 1 else t for t in item)


def test_longest_input_follows_a_training_subset(tmp_path):
    """After ``limit_train`` the train split is the subset: longest_input is that of the subset + val."""
    dm = _build("speech", "synthetic_frames", SPEECH_FRAMES, tmp_path)
    dm.setup("fit")
    dm.limit_train(0.3, seed=1)
    assert dm.longest_input() == _brute_force(dm, ("mask",))
    # a subset that leaves out an item longer than all others does not count it
    train = dm.splits["train"]
    items = [train[i] for i in range(len(train))]
    dm.splits["train"] = Subset(items + [_longer(items[0])], list(range(len(items))))
    assert dm.longest_input() == _brute_force(dm, ("mask",)) < _longer(items[0])[0].shape[0]


def test_longest_input_leaves_out_the_test_split(tmp_path):
    """Only train and val: the test split's lengths never change what a model was trained on."""
    dm = _build("pos_tagging", "synthetic", POS_DATA, tmp_path)
    dm.setup("fit")
    before = dm.longest_input()
    test = dm.splits["test"]
    dm.splits["test"] = [_longer(test[0])] + [test[i] for i in range(len(test))]
    assert dm.longest_input() == before


def test_translation_counts_the_decoder_side(tmp_path):
    """The pattern applies to the encoder and the decoder: a target longer than its source counts."""
    dm = _build("translation", "synthetic", TRANSLATION_DATA, tmp_path)
    dm.setup("fit")
    train = dm.splits["train"]
    src, tgt, ref = train[0]
    dm.splits["train"] = [(src, torch.cat([tgt] * 50), ref)] + [train[i] for i in range(1, len(train))]
    assert dm.longest_input() == 50 * tgt.numel() == _brute_force(dm, ("src_mask", "tgt_mask"))
