"""Length buckets through the sequence domains (``SplitDataModule.use_length_buckets``): the
synthetic datasets of pos_tagging, translation and speech, built as a cell builds them
(benchmarks/run/cell.py: ``build(None, cache_dir, seed)``, ``setup("fit")``), then
``use_length_buckets(4)``.

* Loaders: one training epoch has at most one batch shape per bucket (every tensor's shape,
  POS's ``chars`` too), validation/test at most two; every padded length is a bound; the masks
  mark exactly the real positions; ``padding_report()`` agrees with the epoch as collated.
* Padding invariance, for EVERY registered model of these tasks (registered default sizes: they
  run in well under a second each on these data): the same items collated to their longest
  item and to their bucket's length give the same ``step(batch, "val")`` loss and the same
  network outputs at the real positions (eval mode), and the same training loss and gradients
  (train mode). float32, ``rtol=1e-4, atol=1e-5``.

  Gradients are compared in train mode with every ``*dropout`` parameter set to 0: train mode
  is what bucketed training runs (e.g. BatchNorm's batch statistics), and dropout cannot be
  matched by fixing ``torch.manual_seed``: its mask is drawn over the padded ``(B, L, D)``
  tensor, so a longer ``L`` draws different bits for the real positions too. No other random
  training behaviour is on by default (speech's SpecAugment is off).

Models that are NOT padding-invariant are marked ``xfail(strict=True)`` with the finding; a
fix turns them into XPASS, which fails the run, so the mark must then go.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import pytest
import torch

from tasks.common.registry import get_task
from tasks.common.sampling import BucketBatchSampler

SEED = 0
COUNT = 4
RTOL, ATOL = 1e-4, 1e-5

#: id -> (task, synthetic dataset, dataset_params): the registered defaults (each builds in < 1 s)
DATASETS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "pos_tagging-synthetic": ("pos_tagging", "synthetic", {}),
    "pos_tagging-synthetic_far": ("pos_tagging", "synthetic_far", {}),
    "translation-synthetic": ("translation", "synthetic", {}),
    "speech-synthetic": ("speech", "synthetic", {}),
}

#: datasets whose batches are checked but not every model on them: the same task's models run on
#: another dataset already (the suite's time: each model costs a build and two steps)
SHAPES_ONLY = {"pos_tagging-synthetic_far"}

#: (dataset id, model) -> why it fails (``xfail`` marks); "eval" and "train" tests separately
KNOWN_EVAL: dict[tuple[str, str], tuple[str, type]] = {}
KNOWN_TRAIN = {**KNOWN_EVAL}


# ----------------------------------------------------------------------------- data, built once per module
@pytest.fixture(scope="module")
def datamodule(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    """``get(dataset id)``: the set-up DataModule with ``use_length_buckets(4)``, built once."""
    cache = tmp_path_factory.mktemp("attnbench-cache")
    built: dict[str, Any] = {}

    def get(key: str) -> Any:
        if key not in built:
            task, name, params = DATASETS[key]
            dm = get_task(task).datasets.get(name).build(None, str(cache), SEED, **params)
            dm.prepare_data()
            dm.setup("fit")
            assert dm.buckets is None
            assert dm.use_length_buckets(COUNT) is dm.buckets is not None
            built[key] = dm
        return built[key]

    return get


def _task_of(key: str) -> str:
    return DATASETS[key][0]


def _masks(task: str, batch: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """The batch's padding masks, with the item field each one covers."""
    if task == "translation":
        return [("src", batch["src_mask"]), ("tgt", batch["tgt_mask"])]
    return [("", batch["mask"])]


def _item_lengths(task: str, item: Any) -> dict[str, int]:
    if task == "translation":
        return {"src": int(item[0].numel()), "tgt": int(item[1].numel())}
    return {"": int(item[0].shape[0])}


def _shape(batch: dict[str, Any]) -> tuple:
    """Every tensor's shape (POS's chars included), the batch's one shape signature."""
    return tuple(sorted((k, tuple(v.shape)) for k, v in batch.items() if isinstance(v, torch.Tensor)))


def _epoch(loader: Any) -> tuple[list[list[int]], list[dict[str, Any]]]:
    """The epoch-0 batches of ``loader``: the sampler's indices and the collated batches, the same
    epoch both (``set_epoch`` stops the sampler advancing at each ``__iter__``)."""
    sampler = loader.batch_sampler
    assert isinstance(sampler, BucketBatchSampler) and sampler.buckets is not None
    sampler.set_epoch(0)
    idx = list(iter(sampler))
    batches = list(iter(loader))
    assert len(idx) == len(batches)
    return idx, batches


def _check_batch(dm: Any, task: str, ds: Any, idx: list[int], batch: dict[str, Any]) -> None:
    """Padded to the bucket of its longest item (a bound); masks exactly the real positions."""
    bounds = dm.buckets.bounds
    items = [ds[i] for i in idx]
    want_len = dm.buckets.pad_length(max(dm.length(it) for it in items))
    assert want_len in bounds
    for field, mask in _masks(task, batch):
        assert mask.dtype == torch.bool and mask.shape == (len(idx), want_len), (field, mask.shape, want_len)
        real = torch.tensor([_item_lengths(task, it)[field] for it in items])
        assert torch.equal(mask, torch.arange(want_len)[None, :] < real[:, None]), field
    b = len(idx)
    for k, v in batch.items():  # every per-position tensor has the bucket's length
        if isinstance(v, torch.Tensor) and v.dim() >= 2 and k != "chars":
            assert v.shape[:2] == (b, want_len), (k, v.shape)
    if task == "pos_tagging":  # one chars table per bucket: B * L rows (at most that many forms), every column
        assert batch["chars"].shape == (b * want_len, dm.form_chars.shape[1])
        assert int(batch["types"].max()) < batch["chars"].shape[0]


# ----------------------------------------------------------------------------- loaders
@pytest.mark.parametrize("key", list(DATASETS))
def test_training_epoch_has_one_shape_per_bucket(datamodule: Callable[[str], Any], key: str) -> None:
    dm, task = datamodule(key), _task_of(key)
    ds = dm.splits["train"]
    idx, batches = _epoch(dm.train_dataloader())
    for i, b in zip(idx, batches):
        _check_batch(dm, task, ds, i, b)
    shapes = Counter(_shape(b) for b in batches)
    assert len(shapes) <= len(dm.buckets.bounds), list(shapes)
    seen = Counter(i for b in idx for i in b)
    assert set(seen) == set(range(len(ds)))  # every training item at least once
    assert all(len(b) == dm.buckets.batch_size(dm.buckets.index(max(dm.length(ds[i]) for i in b)), dm.batch_size,
                                               dm.max_tokens) for b in idx)


@pytest.mark.parametrize("split", ["val", "test"])
@pytest.mark.parametrize("key", list(DATASETS))
def test_evaluation_loaders_have_at_most_two_shapes_per_bucket(datamodule: Callable[[str], Any], key: str,
                                                               split: str) -> None:
    dm, task = datamodule(key), _task_of(key)
    ds = dm.splits[split]
    idx, batches = _epoch(getattr(dm, f"{split}_dataloader")())
    for i, b in zip(idx, batches):
        _check_batch(dm, task, ds, i, b)
    assert len({_shape(b) for b in batches}) <= 2 * len(dm.buckets.bounds)
    assert sorted(i for b in idx for i in b) == list(range(len(ds)))  # every item exactly once


@pytest.mark.parametrize("key", list(DATASETS))
def test_padding_report_agrees_with_the_epoch(datamodule: Callable[[str], Any], key: str) -> None:
    dm, task = datamodule(key), _task_of(key)
    ds = dm.splits["train"]
    rep = dm.padding_report()
    train = [dm.length(ds[i]) for i in range(len(ds))]
    assert rep["positions"] == sum(train)
    assert rep["overhead"] >= 0 and rep["padded"] >= rep["positions"]
    assert rep["overhead"] == round(rep["padded"] / rep["positions"] - 1, 4)
    assert rep["buckets"] == list(dm.buckets.bounds) and rep["buckets_how"] == dm.buckets.how
    plain = rep["batch_longest"]
    assert plain["positions"] == sum(train) and plain["repeated"] == 0 and plain["overhead"] >= 0
    assert plain["padded"] >= plain["positions"]
    # against the first training epoch as the loader collates it
    idx, batches = _epoch(dm.train_dataloader())
    mask = lambda b: _masks(task, b)[0][1]  # noqa: E731  (translation: both sides have one length)
    assert rep["padded"] == sum(mask(b).numel() for b in batches)
    real = sum(dm.length(ds[i]) for b in idx for i in b)  # items seen twice (filled batches) count twice
    assert rep["repeated"] == real - sum(train)
    assert rep["shapes_per_epoch"] == len({_shape(b) for b in batches}) <= len(dm.buckets.bounds)


# ----------------------------------------------------------------------------- padding invariance
def _cases(known: dict[tuple[str, str], tuple[str, type]]) -> list:
    out = []
    for key, (task, _, _) in DATASETS.items():
        if key in SHAPES_ONLY:
            continue
        for model in get_task(task).models.names():
            marks = []
            if (key, model) in known:
                reason, raises = known[(key, model)]
                marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
            out.append(pytest.param(key, model, marks=marks, id=f"{key}-{model}"))
    return out


def _plain(dm: Any, items: list) -> dict[str, Any]:
    """``items`` collated without buckets: padded to their longest."""
    saved, dm.buckets = dm.buckets, None
    try:
        return dm.collate(items)
    finally:
        dm.buckets = saved


def _pairs(dm: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Batches of the same items collated without buckets (to their longest) and with them (to
    the bucket's length). Per bucket two batches: its shortest item (the most padding the bucket
    adds) and its longest, each with up to 5 shorter items of other lengths (items of the same
    length where there are none); then the longest item of all alone. Items of every split, so
    that the last bucket holds the longest item of any."""
    items = [it for split in ("train", "val", "test") for it in dm.splits[split]]
    lengths = [dm.length(it) for it in items]

    def batch_for(top: int) -> list:
        by_length: dict[int, int] = {}  # one item per shorter length
        for i, n in enumerate(lengths):
            if n < lengths[top]:
                by_length.setdefault(n, i)
        shorter = [by_length[n] for n in sorted(by_length)]
        chosen = [top] + shorter[:: max(1, len(shorter) // 5)][:5]
        chosen += [i for i, n in enumerate(lengths) if n == lengths[top] and i != top][: max(0, 4 - len(chosen))]
        return [items[i] for i in chosen]

    pairs = []
    for k in range(len(dm.buckets.bounds)):
        inside = [i for i, n in enumerate(lengths) if dm.buckets.index(n) == k]
        for top in sorted({min(inside, key=lambda i: lengths[i]), max(inside, key=lambda i: lengths[i])}):
            chosen = batch_for(top)
            pairs.append((_plain(dm, chosen), dm.collate(chosen)))
    last = max(range(len(items)), key=lambda i: lengths[i])
    pairs.append((_plain(dm, [items[last]]), dm.collate([items[last]])))
    width = lambda b: (b["mask"] if "mask" in b else b["src_mask"]).shape[1]  # noqa: E731
    assert all(width(b) in dm.buckets.bounds and width(b) >= width(p) for p, b in pairs)
    assert any(width(b) > width(p) for p, b in pairs), "the buckets add no padding: nothing compared"
    return pairs


def _outputs(task: str, net: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
    """The network's outputs at the real positions (speech classification: one row per utterance)."""
    if task == "pos_tagging":
        return net(batch)[batch["mask"]]
    if task == "translation":
        from tasks.translation.data import BOS

        tgt = batch["tgt"]
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], 1)  # as TranslationModule.step
        return net(batch["src"], batch["src_mask"], tgt_in)[batch["tgt_mask"]]
    out = net(batch["x"], batch["mask"])
    return out if out.dim() == 2 else out[batch["mask"]]


def _module(key: str, model: str, dm: Any, *, train: bool) -> Any:
    task = get_task(_task_of(key))
    spec = task.models.get(model)
    params = {k: 0.0 for k, v in spec.params.items() if "dropout" in k and isinstance(v, float)} if train else {}
    torch.manual_seed(SEED)
    net = spec.build(dm.info, **params)
    module = task.make_module(net, dm.info)
    return module.train(train)


@pytest.mark.parametrize("key,model", _cases(KNOWN_EVAL))
def test_eval_outputs_and_loss_do_not_depend_on_the_padding(datamodule: Callable[[str], Any], key: str,
                                                            model: str) -> None:
    dm, task = datamodule(key), _task_of(key)
    module = _module(key, model, dm, train=False)
    with torch.no_grad():
        for plain, bucketed in _pairs(dm):
            torch.testing.assert_close(_outputs(task, module.net, bucketed), _outputs(task, module.net, plain),
                                       rtol=RTOL, atol=ATOL)
            torch.testing.assert_close(module.step(bucketed, "val").loss, module.step(plain, "val").loss,
                                       rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("key,model", _cases(KNOWN_TRAIN))
def test_training_loss_and_gradients_do_not_depend_on_the_padding(datamodule: Callable[[str], Any], key: str,
                                                                  model: str) -> None:
    dm = datamodule(key)
    module = _module(key, model, dm, train=True)
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]

    def grads(batch: dict[str, Any]) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        module.zero_grad(set_to_none=True)
        loss = module.step(batch, "train").loss
        loss.backward()
        return loss.detach(), [None if p.grad is None else p.grad.detach().clone() for _, p in named]

    for plain, bucketed in _pairs(dm):
        loss_p, g_p = grads(plain)
        loss_b, g_b = grads(bucketed)
        torch.testing.assert_close(loss_b, loss_p, rtol=RTOL, atol=ATOL)
        assert any(g is not None and g.abs().sum() > 0 for g in g_p), "no gradient at all"
        for (name, _), a, b in zip(named, g_p, g_b):
            assert (a is None) == (b is None), name
            if a is not None:
                torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL, msg=lambda m, n=name: f"{n}: {m}")
