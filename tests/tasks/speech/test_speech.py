"""The speech task: registration, features, FSDD split, concatenation labels, models, module."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from tasks.common.patterns import PRESET_PATTERNS
from tasks.common.recurrence import CELLS
from tasks.common.registry import FAMILIES, UnknownNameError, builder_of, get_task
from tasks.speech.data import concatenate, fsdd_files, fsdd_split, make_synthetic
from tasks.speech.features import FeatureConfig, extract, frame_labels
from tasks.speech.module import SpeechModule, edit_distance, segments, spec_augment
from tests.helpers.domains import SPEECH_DATA as TINY
from tests.helpers.domains import SPEECH_FRAMES as TINY_FRAMES
from tests.helpers.training import train_loop

MODELS = ["transformer", "transformer_w8", "transformer_w16", "transformer_w32", "transformer_w64", "lstm", "cnn",
          "frame_mlp"]
VARIANTS = [f"transformer_{p}" for p in PRESET_PATTERNS]  # every efficient pattern takes key padding


@pytest.fixture(scope="module")
def task():
    return get_task("speech")


def _dm(task, name, **params):
    spec = task.datasets.get(name)
    return spec.build(None, None, 0, **{**spec.params, **params})


@pytest.fixture(scope="module")
def tiny(task):
    return _dm(task, "synthetic", **TINY)


@pytest.fixture(scope="module")
def tiny_frames(task):
    return _dm(task, "synthetic_frames", **TINY_FRAMES)


# --------------------------------------------------------------------------- registry
def test_task_registered(task):
    assert task.name == "speech" and task.metric == "acc" and task.mode == "max"
    assert set(task.datasets.names()) == {"fsdd", "fsdd_frames", "speech_commands", "synthetic", "synthetic_frames"}
    assert {n for n in task.datasets.names() if task.datasets.get(n).synthetic} == {"synthetic", "synthetic_frames"}
    assert set(task.models.names()) == set(MODELS) | set(VARIANTS) | {"modern_rnn", *CELLS}
    assert {task.models.get(n).family for n in MODELS} == set(FAMILIES)
    assert task.models.get("transformer").pattern == "full"
    for w in (8, 16, 32, 64):
        spec = task.models.get(f"transformer_w{w}")
        assert spec.pattern == "truncated" and spec.params["window"] == w and spec.family == "attention"
        assert builder_of(spec) is builder_of(task.models.get("transformer"))  # presets of one builder
    with pytest.raises(UnknownNameError, match="transformer_w16"):
        task.models.get("conformer")


def test_bad_dataset_params_are_named(task):
    spec = task.datasets.get("fsdd")
    with pytest.raises(ValueError, match=r"unknown params \['n_mels'\].*n_features"):
        spec.build(None, None, 0, n_mels=40)
    with pytest.raises(ValueError, match="feature='fbank'.*logmel, mfcc"):
        spec.build(None, None, 0, **{**spec.params, "feature": "fbank"})
    with pytest.raises(ValueError, match="bob.*george"):
        spec.build(None, None, 0, **{**spec.params, "speakers": ["bob"]})
    sc = task.datasets.get("speech_commands")
    with pytest.raises(ValueError, match="version='v3'.*v0.02, v0.01"):
        sc.build(None, None, 0, **{**sc.params, "version": "v3"})


def test_missing_data_names_the_file(task, tmp_path):
    sc = task.datasets.get("speech_commands")
    dm = sc.build(str(tmp_path / "nodata"), str(tmp_path / "cache"), 0, **{**sc.params, "download": False})
    with pytest.raises(FileNotFoundError, match="speech_commands_v0.02"):
        _ = dm.info


# --------------------------------------------------------------------------- features
def test_logmel_matches_a_direct_computation():
    """25 ms Hann window, 10 ms hop, centred frames, mel filterbank, log: compared with stft maths."""
    import torchaudio

    cfg = FeatureConfig("logmel", 20, 8000, normalize=False)
    assert (cfg.win_length, cfg.hop_length, cfg.n_fft) == (200, 80, 256)
    wave = torch.randn(8000 * 3 // 10, generator=torch.Generator().manual_seed(0))
    feats = extract(wave, cfg)
    assert feats.shape == (1 + wave.shape[0] // 80, 20)
    window = torch.hann_window(200)
    spec = torch.stft(wave, 256, hop_length=80, win_length=200, window=window, center=True, pad_mode="reflect",
                      return_complex=True).abs() ** 2  # (129, T)
    fb = torchaudio.functional.melscale_fbanks(129, 20.0, 4000.0, 20, 8000)  # (129, 20)
    ref = torch.log(spec.T @ fb + 1e-6)
    torch.testing.assert_close(feats, ref, atol=1e-4, rtol=1e-4)
    normed = extract(wave, FeatureConfig("logmel", 20, 8000))
    torch.testing.assert_close(normed, (ref - ref.mean(0)) / (ref.std(0) + 1e-5), atol=1e-3, rtol=1e-3)
    mfcc = extract(wave, FeatureConfig("mfcc", 13, 8000))
    assert mfcc.shape == (feats.shape[0], 13) and torch.isfinite(mfcc).all()


def test_frame_labels_take_the_centre_sample():
    cfg = FeatureConfig(sample_rate=8000)
    g = torch.Generator().manual_seed(1)
    lab = torch.randint(0, 5, (1234,), generator=g)
    fl = frame_labels(lab, cfg)
    assert fl.shape == (1 + 1234 // 80,)
    for t in range(fl.shape[0]):
        assert fl[t] == lab[min(t * 80, 1233)]


# --------------------------------------------------------------------------- FSDD split
def test_fsdd_split_upstream_test_and_seeded_val():
    files = fsdd_files()
    assert len(files) == 3000 and len(set(files)) == 3000
    split = fsdd_split(files, 0.1, 0)
    assert [len(split[s]) for s in ("train", "val", "test")] == [2430, 270, 300]

    def keys(fs):
        return {tuple(Path(f).stem.split("_")) for f in fs}

    test_keys, train_keys, val_keys = keys(split["test"]), keys(split["train"]), keys(split["val"])
    assert {int(i) for _, _, i in test_keys} == set(range(5))
    assert {int(i) for _, _, i in train_keys | val_keys} == set(range(5, 50))
    # no (speaker, index) pair of the test set appears in train or val
    assert not {(s, i) for _, s, i in test_keys} & {(s, i) for _, s, i in train_keys | val_keys}
    assert not train_keys & val_keys and set(split["train"]) | set(split["val"]) | set(split["test"]) == set(files)
    assert fsdd_split(files, 0.1, 0) == split and fsdd_split(files, 0.1, 1)["val"] != split["val"]
    with pytest.raises(ValueError, match="val_fraction"):
        fsdd_split(files, 1.5, 0)


# --------------------------------------------------------------------------- concatenation
def test_concatenated_frame_labels_line_up_with_the_audio():
    g = torch.Generator().manual_seed(0)
    utts = [(torch.rand(int(torch.randint(300, 900, (1,), generator=g)), generator=g) + 0.5, k % 3) for k in range(40)]
    hop = 80
    seqs = concatenate(utts, silence_label=3, hop=hop, min_frames=60, max_frames=120, min_gap=2, max_gap=6,
                       noise=0.0, generator=torch.Generator().manual_seed(5))
    used = []
    cfg = FeatureConfig(sample_rate=8000)
    for wave, lab, segs in seqs:
        frames = 1 + wave.shape[0] // hop
        assert 60 <= frames <= 120 or len(segs) == 1
        assert wave.shape == lab.shape
        expect = torch.full_like(lab, 3)
        for start, end, y in segs:
            expect[start:end] = y
            match = [i for i, (w, yy) in enumerate(utts) if w.shape[0] == end - start and torch.equal(w, wave[start:end])]
            assert match and utts[match[0]][1] == y
            used.append(match[0])
        assert torch.equal(lab, expect)
        # at least min_gap frames of silence before, between and after the words
        assert segs[0][0] >= 2 * hop and wave.shape[0] - segs[-1][1] >= 2 * hop
        assert all(b[0] - a[1] >= 2 * hop for a, b in zip(segs, segs[1:]))
        assert (wave[lab == 3] == 0).all() and (wave[lab != 3] >= 0.5).all()  # silence is silent here
        fl = frame_labels(lab, cfg)
        # frame t is word y exactly when its centre sample t * hop lies inside that word's samples
        for start, end, y in segs:
            inside = [t for t in range(fl.shape[0]) if start <= t * hop < end]
            assert inside == list(range(math.ceil(start / hop), math.ceil(end / hop)))
            assert (fl[inside] == y).all()
            assert fl[inside[0] - 1] == 3 and fl[inside[-1] + 1] == 3  # silence on both sides
        assert len(segments(fl, 3)) == len(segs)  # one run per word
    assert sorted(used) == list(range(len(utts)))  # every utterance exactly once


def test_synthetic_frames_items_line_up(tiny_frames):
    info = tiny_frames.info
    assert info["form"] == "tag" and info["labels"][-1] == "silence" and info["silence_label"] == 4
    for x, y in tiny_frames.splits["train"]:
        assert x.shape[0] == y.shape[0] and 120 <= x.shape[0] <= 200 + 80  # one long utterance may overrun
        assert set(y.tolist()) <= set(range(5))
        # silence frames hold less energy than word frames (normalised log-mel, mean over bands)
        energy = x.mean(1)
        assert energy[y == 4].mean() < energy[y != 4].mean() - 0.5


# --------------------------------------------------------------------------- synthetic
def test_limit_train_keeps_a_seeded_subset(task):
    dm = _dm(task, "synthetic", **TINY)
    full = [x for x, _ in dm.splits["train"]]
    assert dm.limit_train(0.5, seed=3) == len(full) // 2  # before info was ever computed
    kept = [x for x, _ in dm.splits["train"]]
    assert all(any(torch.equal(k, f) for f in full) for k in kept)
    assert dm.info["num_train"] == len(kept) and dm.info["num_val"] == TINY["per_class"][1] * TINY["num_classes"]


def test_synthetic_deterministic_from_data_seed(task):
    a, b = (task.datasets.get("synthetic").build(None, None, s, **{**task.datasets.get("synthetic").params, **TINY})
            for s in (0, 7))
    assert a.checksum() == b.checksum() and a.checksum().startswith("sha256:")
    c = _dm(task, "synthetic", **TINY, data_seed=1)
    assert c.checksum() != a.checksum()
    utts, names = make_synthetic(num_classes=4, num_phones=3, per_class=[2, 1, 1], data_seed=0)
    assert len(names) == len(set(names)) == 4 and all(sorted(n.split("-")) == ["a", "b", "c"] for n in names)
    with pytest.raises(ValueError, match="num_classes=7"):
        make_synthetic(num_classes=7, num_phones=3)


def _train(task, name, dm, steps=None, epochs=1, seed=0, lr=3e-3, items=None):
    """Plain loop with AdamW (``steps`` on the first batch, cut to ``items`` items, or ``epochs``
    over the training set); returns (module, losses)."""
    torch.manual_seed(seed)
    spec = task.models.get(name)
    net = spec.build(dm.info, **spec.params)
    module = task.make_module(net, dm.info, **{**task.module_params, "scheduler": "none", "warmup_steps": 0})
    if steps is None:
        batches = list(dm.train_dataloader())
    else:
        first = next(iter(dm.train_dataloader()))
        batches = [{k: v[:items] for k, v in first.items()}] * steps
    return module, train_loop(module, torch.optim.AdamW(module.parameters(), lr=lr), epochs, lambda: batches)


def _eval(module, loader):
    module._reset_epoch()
    with torch.no_grad():
        for b in loader:
            module.step(b, "test")
    return module._correct / module._total


def test_synthetic_needs_context(task):
    """Words differ only in the order of the same phones: the per-frame floor stays near chance,
    a model with context learns them."""
    dm = _dm(task, "synthetic", per_class=[30, 5, 20], num_classes=6, num_phones=3)
    floor, _ = _train(task, "frame_mlp", dm, epochs=12)
    cnn, _ = _train(task, "cnn", dm, epochs=12)
    acc_floor, acc_cnn = _eval(floor, dm.test_dataloader()), _eval(cnn, dm.test_dataloader())
    assert acc_floor < 0.45 and acc_cnn > 0.9, (acc_floor, acc_cnn)


# --------------------------------------------------------------------------- models
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("form", ["classify", "tag"])
def test_every_model_trains(task, tiny, tiny_frames, name, form):
    dm = tiny if form == "classify" else tiny_frames
    # 6 utterances or 2 long sequences; the floor only sees frame statistics (per-utterance
    # normalised): it learns the 6 utterances slower, so it gets a larger step
    lr = 1e-2 if name == "frame_mlp" else 3e-3
    module, losses = _train(task, name, dm, steps=10, items=6 if form == "classify" else 2, lr=lr)
    assert all(math.isfinite(v) for v in losses)
    assert min(losses[-3:]) < 0.8 * losses[0], losses
    b = next(iter(dm.val_dataloader()))
    logits = module.net(b["x"], b["mask"])
    c = dm.info["num_classes"]
    assert logits.shape == ((b["x"].shape[0], c) if form == "classify" else (*b["mask"].shape, c))


def _pair(task, window_name, info, **over):
    """The full-attention model and a truncated preset with the same weights."""
    torch.manual_seed(0)
    full = task.models.get("transformer").build(info, **{**task.models.get("transformer").params, **over}).eval()
    spec = task.models.get(window_name)
    trunc = spec.build(info, **{**spec.params, **over}).eval()
    trunc.load_state_dict(full.state_dict())
    return full, trunc


def test_truncated_with_window_covering_the_input_equals_full(task, tiny_frames):
    info = tiny_frames.info
    g = torch.Generator().manual_seed(3)
    for name, L in (("transformer_w8", 9), ("transformer_w16", 12), ("transformer_w64", 65)):
        full, trunc = _pair(task, name, info)
        x = torch.randn(3, L, info["num_features"], generator=g, dtype=torch.float32)
        mask = torch.ones(3, L, dtype=torch.bool)
        mask[1, L - 3 :] = False  # padding too
        with torch.no_grad():
            torch.testing.assert_close(trunc(x, mask), full(x, mask), atol=1e-5, rtol=1e-5)
            # and longer inputs do differ: the window really truncates
            x2 = torch.randn(2, 3 * L + 40, info["num_features"], generator=g)
            assert not torch.allclose(trunc(x2), full(x2), atol=1e-4)


def test_truncated_attention_is_local(task, tiny_frames):
    info = tiny_frames.info
    full, trunc = _pair(task, "transformer_w8", info)
    p = task.models.get("transformer_w8").params
    reach = p["num_layers"] * p["window"] + p["pos_kernel"] // 2  # frames a frame's output can see
    L, i = 200, 20
    x = torch.randn(1, L, info["num_features"], generator=torch.Generator().manual_seed(0))
    x2 = x.clone()
    x2[0, i + reach + 1 :] += 5.0
    with torch.no_grad():
        torch.testing.assert_close(trunc(x2)[0, : i + 1], trunc(x)[0, : i + 1])
        assert not torch.allclose(full(x2)[0, i], full(x)[0, i], atol=1e-4)
        x3 = x.clone()
        x3[0, i + reach] += 5.0  # inside the reach: it matters
        assert not torch.allclose(trunc(x3)[0, i], trunc(x)[0, i], atol=1e-6)


def test_padding_does_not_change_outputs(task, tiny):
    info = tiny.info
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 30, info["num_features"], generator=g)
    padded = torch.cat([x, torch.randn(1, 10, info["num_features"], generator=g)], 1)
    mask = torch.zeros(1, 40, dtype=torch.bool)
    mask[0, :30] = True
    for name in MODELS:
        spec = task.models.get(name)
        torch.manual_seed(0)
        net = spec.build(info, **spec.params).eval()
        with torch.no_grad():
            torch.testing.assert_close(net(padded, mask), net(x), atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("stack", [1, 3, 4])
def test_lstm_frame_stacking_matches_a_per_utterance_reference(stack):
    """``stack`` frames per recurrent step: each utterance alone, its frames zero-filled to a
    multiple of ``stack``, concatenated per step and run through the same LSTM unbatched, each
    step's output repeated for its frames; padding (random values) never enters."""
    from tasks.speech.models import RecurrentEncoder

    torch.manual_seed(stack)
    enc = RecurrentEncoder(5, d_model=8, num_layers=2, stack=stack).eval()
    lengths = [13, 9, 4]  # 13 and 9 are not multiples of 3 or 4
    x = torch.randn(3, 13, 5)  # padding of the shorter rows: random, must not matter
    mask = torch.arange(13)[None] < torch.tensor(lengths)[:, None]  # (B, L)
    with torch.no_grad():
        out = enc(x, mask)  # (B, L, d)
        for b, n in enumerate(lengths):
            steps = -(-n // stack)
            frames = torch.zeros(steps * stack, 5)
            frames[:n] = x[b, :n]
            h, _ = enc.rnn(enc.inp(frames.reshape(1, steps, stack * 5)))  # (1, steps, d)
            ref = h[0].repeat_interleave(stack, 0)[:n]  # (n, d)
            torch.testing.assert_close(out[b, :n], ref, atol=1e-6, rtol=1e-5)
            assert out[b, n:].abs().sum() == 0


def test_lstm_stack_must_be_positive():
    from tasks.speech.models import RecurrentEncoder

    with pytest.raises(ValueError, match="stack=0"):
        RecurrentEncoder(5, stack=0)


# --------------------------------------------------------------------------- metrics
def test_segments_and_edit_distance():
    assert segments([9, 9, 1, 1, 9, 2, 2, 2, 9, 9, 2], silence=9) == [1, 2, 2]
    assert segments(torch.tensor([1, 1, 2, 2, 1]), silence=9) == [1, 2, 1]
    assert segments([9, 9], silence=9) == []

    def ref(a, b):  # exhaustive recursion
        if not a or not b:
            return len(a) + len(b)
        return min(ref(a[1:], b) + 1, ref(a, b[1:]) + 1, ref(a[1:], b[1:]) + (a[0] != b[0]))

    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        a = torch.randint(0, 3, (int(torch.randint(0, 6, (1,), generator=g)),), generator=g).tolist()
        b = torch.randint(0, 3, (int(torch.randint(0, 6, (1,), generator=g)),), generator=g).tolist()
        assert edit_distance(a, b) == ref(a, b)


class _Fixed(torch.nn.Module):
    """A 'network' returning given logits (and one parameter so optimisers work)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x, mask):
        return self.logits + self.w


def test_tag_metrics_corpus_level():
    # 2 sequences, silence = 2; predictions chosen by hand
    y = torch.tensor([[2, 0, 0, 2, 1, 1, 2], [2, 1, 1, 1, 2, -100, -100]])
    pred = torch.tensor([[2, 0, 1, 2, 1, 1, 2], [2, 1, 1, 1, 1, 0, 0]])
    mask = y != -100
    logits = torch.nn.functional.one_hot(pred, 3).float() * 5
    module = SpeechModule(_Fixed(logits), form="tag", num_classes=3, silence_label=2)
    module._reset_epoch()
    module.step({"x": torch.zeros(2, 7, 4), "mask": mask, "y": y}, "test")
    assert module._correct == 10 and module._total == 12  # frame accuracy 10/12 over real frames
    # seq 0: true [0, 1], predicted [0, 1, 1] -> 1 edit; seq 1: true [1], predicted [1] -> 0; 3 true words
    module._count_segments()  # the alignments wait for the epoch's end (they read the frames on the host)
    assert module._edits == 1 and module._words == 3
    assert module._confusion.sum() == 12 and module._confusion[2, 1] == 1 and module._confusion[0, 1] == 1


def test_spec_augment_reads_nothing_on_the_host():
    """Widths and starts are drawn on the device: no host-device sync (issue 30)."""
    from tests.helpers.sync import count_syncs

    x, mask = torch.randn(3, 40, 10), torch.arange(40)[None] < torch.tensor([[40], [25], [7]])
    with count_syncs() as c:
        spec_augment(x, mask, {"freq_masks": 2, "freq_width": 4, "time_masks": 2, "time_width": 6})
    assert not c.syncs, c.summary()


def test_spec_augment_masks_inside_real_frames():
    x = torch.randn(4, 50, 20)
    mask = torch.ones(4, 50, dtype=torch.bool)
    mask[2, 30:] = False
    out = spec_augment(x, mask, {"freq_masks": 2, "freq_width": 5, "time_masks": 2, "time_width": 8},
                       torch.Generator().manual_seed(0))
    zeroed = out != x  # (B, L, F)
    assert zeroed.any() and (out[zeroed] == 0).all()
    for i in range(4):
        z = zeroed[i]
        bands, frames = z.all(0), z.all(1)  # (F,), (L,)
        # every zeroed value lies in a masked band (all frames) or a masked frame (all bands)
        assert torch.equal(z, bands[None, :] | frames[:, None])
        assert int(bands.sum()) <= 2 * 5 and int(frames.sum()) <= 2 * 8
        assert not frames[mask[i].logical_not()].any()  # time masks stay inside the real frames
    assert torch.equal(spec_augment(x, mask, {}), x)
    with pytest.raises(ValueError, match="freq_mask.*valid: freq_masks"):
        SpeechModule(torch.nn.Linear(1, 1), num_classes=2, spec_augment={"freq_mask": 1})


def test_fit_and_test_with_lightning(task, tiny_frames, tmp_path):
    """The runner's path: Trainer.fit / test log val/acc, test/acc, test/segment_error; extras."""
    import lightning as L

    spec = task.models.get("transformer_w16")
    torch.manual_seed(0)
    module = task.make_module(spec.build(tiny_frames.info, **spec.params), tiny_frames.info, **task.module_params)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=tiny_frames)
    assert "val/acc" in trainer.callback_metrics and "val/segment_error" in trainer.callback_metrics
    out = trainer.test(module, datamodule=tiny_frames, verbose=False)[0]
    assert 0 <= out["test/acc"] <= 1 and out["test/segment_error"] >= 0
    extras = module.report_extras(trainer, tiny_frames)["speech_confusion"]
    m = torch.tensor(extras["matrix"])
    frames = sum(int(x.shape[0]) for x, _ in tiny_frames.splits["test"])
    assert m.shape == (5, 5) and int(m.sum()) == frames and extras["labels"][-1] == "silence"
    assert abs(float(m.diagonal().sum()) / frames - out["test/acc"]) < 1e-6


# --------------------------------------------------------------------------- Speech Commands layout
def _fake_speech_commands(root: Path) -> dict[str, list[str]]:
    import soundfile

    base = root / "SpeechCommands" / "speech_commands_v0.02"
    g = torch.Generator().manual_seed(0)
    files = []
    for word, spk, n in itertools.product(("yes", "no", "up"), ("aa11", "bb22", "cc33"), range(2)):
        rel = f"{word}/{spk}_nohash_{n}.wav"
        (base / word).mkdir(parents=True, exist_ok=True)
        soundfile.write(str(base / rel), (0.1 * torch.randn(8000, generator=g)).numpy(), 16000)
        files.append(rel)
    (base / "_background_noise_").mkdir()
    soundfile.write(str(base / "_background_noise_" / "noise.wav"), torch.zeros(16000).numpy(), 16000)
    val = [f for f in files if "bb22" in f]
    test = [f for f in files if "cc33" in f]
    (base / "validation_list.txt").write_text("\n".join(val) + "\n")
    (base / "testing_list.txt").write_text("\n".join(test) + "\n")
    return {"train": [f for f in files if "aa11" in f], "val": val, "test": test}


def test_speech_commands_official_lists(task, tmp_path):
    lists = _fake_speech_commands(tmp_path / "data")
    sc = task.datasets.get("speech_commands")
    dm = sc.build(str(tmp_path / "data"), str(tmp_path / "cache"), 0, **{**sc.params, "download": False})
    info = dm.info
    assert info["labels"] == ["no", "up", "yes"] and info["num_classes"] == 3
    assert [info[f"num_{s}"] for s in ("train", "val", "test")] == [len(lists[s]) for s in ("train", "val", "test")]
    assert all(x.shape == (1 + 8000 // 160, 40) for x, _ in dm.splits["train"])
    labels = sorted(info["labels"][y] for _, y in dm.splits["val"])
    assert labels == sorted(f.split("/")[0] for f in lists["val"])
    # cached: a second build reads the cache (same checksum) even without the data dir
    dm2 = sc.build(str(tmp_path / "gone"), str(tmp_path / "cache"), 0, **{**sc.params, "download": False})
    assert dm2.checksum() == dm.checksum()


# --------------------------------------------------------------------------- real data
@pytest.mark.data
def test_fsdd_real_data(task, shared_data, tmp_path):
    spec = task.datasets.get("fsdd")
    dm = spec.build(str(shared_data), str(tmp_path), 0, **spec.params)
    info = dm.info
    assert (info["num_train"], info["num_val"], info["num_test"]) == (2430, 270, 300)
    assert info["num_classes"] == 10 and info["num_features"] == 40
    assert sorted(torch.bincount(torch.tensor([y for _, y in dm.splits["test"]])).tolist()) == [30] * 10
    assert not any((tmp_path / "fsdd").glob("*.tmp*"))
    frames = task.datasets.get("fsdd_frames")
    fm = frames.build(str(shared_data), str(tmp_path), 0, **frames.params)
    for s in ("train", "val", "test"):
        lengths = [x.shape[0] for x, _ in fm.splits[s]]
        assert min(lengths) >= 1000 and max(lengths) <= 5000, (s, min(lengths), max(lengths))
    words = sum(len(segments(y, 10)) for _, y in fm.splits["test"])
    assert words == 300  # every test utterance once, as its own run
