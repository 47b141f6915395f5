"""Translation: tokeniser cache, data, masks, decoding, metrics, training, the module end to end."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import lightning as L
import pytest
import sacrebleu
import torch

from tasks.common.registry import get_task
from tasks.translation.data import (
    BOS,
    EOS,
    PAD,
    TranslationDataModule,
    build_multi30k,
    build_parallel,
    build_synthetic,
    synthetic_corpus,
    train_tokenizer,
)
from tasks.translation.module import average_states, corpus_scores, make_module
from tasks.translation.search import beam_search, greedy_search, length_penalty
from tests.helpers.domains import TRANSLATION_DATA as SMALL_SYN
from tests.helpers.domains import TRANSLATION_MODELS as TINY

TASK = get_task("translation")
#: The models ``models: all`` runs (the attention-variant presets are named explicitly).
MODELS = [n for n, s in TASK.models.items() if s.in_all]



@pytest.fixture(scope="module")
def syn(tmp_path_factory) -> TranslationDataModule:
    dm = build_synthetic(None, str(tmp_path_factory.mktemp("cache")), 0, **SMALL_SYN)
    dm.setup("fit")
    return dm


def _net(name: str, info: dict, seed: int = 0, **over) -> torch.nn.Module:
    torch.manual_seed(seed)
    spec = TASK.models.get(name)
    return spec.build(info, **{**spec.params, **TINY[name], **over})


# ----------------------------------------------------------------------------- tokeniser and data
def test_tokenizer_cached_by_inputs_and_round_trips(tmp_path):
    lines = ["Ein Mann fährt Fahrrad.", "A man rides a bike.", "Zwei Hunde spielen im Schnee!", "Two dogs play."] * 20
    tok = train_tokenizer(lines, vocab_size=60, model_type="bpe", cache_dir=tmp_path)
    files = sorted((tmp_path / "translation" / "spm").glob("*.model"))
    assert len(files) == 1 and tok.path == str(files[0])
    mtime = files[0].stat().st_mtime_ns
    again = train_tokenizer(lines, vocab_size=60, model_type="bpe", cache_dir=tmp_path)
    assert again.path == tok.path and files[0].stat().st_mtime_ns == mtime  # reused, not retrained
    other = train_tokenizer(lines + ["Neu."], vocab_size=60, model_type="bpe", cache_dir=tmp_path)
    other2 = train_tokenizer(lines, vocab_size=61, model_type="bpe", cache_dir=tmp_path)
    assert len({tok.path, other.path, other2.path}) == 3  # a change of text or setting -> a new model
    for s in set(lines):
        ids = tok.encode(s)
        assert tok.decode(ids) == s and tok.decode(ids + [EOS, 7, 8]) == s  # stops at EOS
    assert (tok.sp.pad_id(), tok.sp.unk_id(), tok.sp.bos_id(), tok.sp.eos_id()) == (PAD, 1, BOS, EOS)
    with pytest.raises(ValueError, match="spm_model_type='nope'; valid: unigram, bpe, word, char"):
        train_tokenizer(lines, vocab_size=60, model_type="nope", cache_dir=tmp_path)


def test_synthetic_is_deterministic_reordered_and_mapped():
    kw = dict(num_words=10, min_len=3, max_len=7, reorder="reverse", n=50)
    a, b = synthetic_corpus(data_seed=3, **kw), synthetic_corpus(data_seed=3, **kw)
    assert a == b and synthetic_corpus(data_seed=4, **kw) != a
    mapping: dict[str, str] = {}
    for s, t in zip(*a):
        sw, tw = s.split(), t.split()[::-1]  # the target read backwards aligns word by word
        assert len(sw) == len(tw) and 3 <= len(sw) <= 7
        for x, y in zip(sw, tw):
            assert mapping.setdefault(x, y) == y  # one consistent word mapping
    assert len(set(mapping.values())) == len(mapping)  # and it is one-to-one
    plain = synthetic_corpus(data_seed=3, **{**kw, "reorder": "none"})
    assert [t.split()[::-1] for t in a[1]] == [t.split() for t in plain[1]]
    blocks = synthetic_corpus(data_seed=3, **{**kw, "reorder": "blocks"}, block=2)
    for p_, b_ in zip(plain[1], blocks[1]):
        pw, bw = p_.split(), b_.split()
        assert bw == [w for i in range(0, len(pw), 2) for w in pw[i : i + 2][::-1]]


def test_synthetic_datamodule_batches_and_data_seed(syn, tmp_path):
    b = next(iter(syn.train_dataloader()))
    assert b["src"].shape == b["src_mask"].shape and b["tgt"].shape == b["tgt_mask"].shape
    for i in range(b["tgt"].shape[0]):  # every target ends in one EOS, then padding
        n = int(b["tgt_mask"][i].sum())
        assert b["tgt"][i, n - 1] == EOS and (b["tgt"][i, n:] == PAD).all() and (b["tgt"][i, : n - 1] > EOS).all()
        assert syn.tokenizer.decode(b["tgt"][i].tolist()) == b["refs"][i]
    other_run_seed = build_synthetic(None, str(tmp_path), 5, **SMALL_SYN)
    assert other_run_seed.checksum() == syn.checksum()  # data depends on data_seed, not the run seed
    other_data = build_synthetic(None, str(tmp_path), 0, **{**SMALL_SYN, "data_seed": 1})
    assert other_data.checksum() != syn.checksum()


def test_bad_dataset_params_name_the_key_and_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"unknown parameter 'vocab'; valid: .*vocab_size"):
        build_synthetic(None, str(tmp_path), 0, vocab=3)
    with pytest.raises(ValueError, match="tgt_lang='xx'; valid: de, en, fr, cs"):
        build_multi30k(str(tmp_path), str(tmp_path), 0, tgt_lang="xx")
    with pytest.raises(ValueError, match="reorder='shuffle'; valid: blocks, reverse, none"):
        build_synthetic(None, str(tmp_path), 0, reorder="shuffle")
    with pytest.raises(ValueError, match="parameter 'train_src' is required"):
        build_parallel(None, str(tmp_path), 0)
    with pytest.raises(FileNotFoundError, match=r"train_tgt='nothere.txt'"):
        (tmp_path / "a.txt").write_text("x\n")
        build_parallel(None, str(tmp_path), 0, train_src=str(tmp_path / "a.txt"), train_tgt="nothere.txt")


def test_multi30k_missing_file_is_named(tmp_path, monkeypatch):
    import tasks.translation.data as D

    def offline(names):
        def fail(dest):
            raise OSError("no network")
        return fail

    monkeypatch.setattr(D, "_download_multi30k", offline)
    (tmp_path / "data" / "multi30k").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"multi30k/train\.de"):
        build_multi30k(str(tmp_path / "data"), str(tmp_path / "cache"), 0)


def test_parallel_files_by_path(tmp_path):
    src, tgt = synthetic_corpus(data_seed=0, num_words=8, min_len=2, max_len=5, reorder="reverse", n=60)
    for split in ("train", "val", "test"):
        (tmp_path / f"{split}.x").write_text("\n".join(src) + "\n")
        (tmp_path / f"{split}.y").write_text("\n".join(tgt) + "\n")
    paths = {f"{s}_{side}": f"{s}.{ext}" for s in ("train", "val", "test") for side, ext in (("src", "x"), ("tgt", "y"))}
    dm = build_parallel(str(tmp_path), str(tmp_path / "cache"), 0, vocab_size=30, spm_model_type="word", **paths)
    dm.setup("fit")
    assert dm.info["num_train"] == 60 and dm.splits["test"][0][2] == tgt[0]


# ----------------------------------------------------------------------------- masks
@pytest.mark.parametrize("name", list(MODELS))
def test_masks_never_leak(name, syn):
    """Changing a padded source token, or a future target token, leaves earlier outputs unchanged
    (and changing a real token does change them, so the test can fail)."""
    net = _net(name, syn.info).eval()
    g = torch.Generator().manual_seed(1)
    v = syn.info["vocab_size"]
    src = torch.randint(4, v, (3, 7), generator=g)
    src_mask = torch.ones(3, 7, dtype=torch.bool)
    src_mask[0, 4:] = False
    src_mask[1, 6:] = False
    tgt = torch.randint(4, v, (3, 6), generator=g)
    with torch.no_grad():
        base = net(src, src_mask, tgt)  # (B, T, V)
        src2 = src.clone()
        src2[0, 4:] = torch.randint(4, v, (3,), generator=g)
        src2[1, 6] = PAD
        assert torch.allclose(net(src2, src_mask, tgt), base, atol=1e-5)
        src3 = src.clone()
        src3[0, 2] = (src[0, 2] - 3) % (v - 4) + 4
        assert not torch.allclose(net(src3, src_mask, tgt)[0], base[0], atol=1e-5)
        tgt2 = tgt.clone()
        tgt2[:, 3:] = torch.randint(4, v, (3, 3), generator=g)
        out = net(src, src_mask, tgt2)
        assert torch.allclose(out[:, :3], base[:, :3], atol=1e-5)
        assert not torch.allclose(out[:, 3:], base[:, 3:], atol=1e-5)
        # The same source with more padding columns gives the same outputs.
        wide = torch.cat([src, torch.zeros(3, 2, dtype=torch.long)], 1)
        wide_mask = torch.cat([src_mask, torch.zeros(3, 2, dtype=torch.bool)], 1)
        assert torch.allclose(net(wide, wide_mask, tgt), base, atol=1e-5)


# ----------------------------------------------------------------------------- decoding
class TableModel:
    """A hand-built decoder: next-token log-probabilities looked up by the prefix (no encoder)."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int) -> None:
        self.table, self.vocab = table, vocab

    def encode(self, src, src_mask):
        return {"src": src}

    def decode_step(self, state, prefix):
        rows = []
        for p in prefix.tolist():
            key = tuple(t for t in p[1:] if t != PAD)
            probs = self.table.get(key, {EOS: 1.0})
            row = torch.full((self.vocab,), 1e-9)
            for tok, pr in probs.items():
                row[tok] = pr
            rows.append(row.log())
        return torch.stack(rows), state


def test_beam_beats_greedy_on_a_hand_built_case():
    a, b, c = 4, 5, 6
    table = {(): {a: 0.6, b: 0.4}, (a,): {EOS: 0.3, c: 0.35, b: 0.35}, (a, c): {EOS: 0.5, b: 0.5},
             (a, b): {EOS: 0.5, c: 0.5}, (b,): {EOS: 0.99, c: 0.01}}
    model = TableModel(table, 10)
    src, mask = torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.bool)
    g_tok, g_score = greedy_search(model, src, mask, bos=BOS, eos=EOS, pad=PAD, max_len_b=3)
    b_tok, b_score = beam_search(model, src, mask, beam=2, bos=BOS, eos=EOS, pad=PAD, max_len_b=3)
    # Greedy takes a (0.6), then c or b (0.35): P = 0.6 * 0.35 * 0.5; beam finds b EOS: 0.4 * 0.99.
    assert g_tok[0, :1].tolist() == [a]
    assert b_tok[0, :2].tolist() == [b, EOS]
    expect = math.log(0.4 * 0.99) / length_penalty(torch.tensor(2), 0.6).item()
    assert b_score.item() == pytest.approx(expect, rel=1e-5)
    assert b_score.item() > g_score.item()


def test_beam_matches_exhaustive_search_on_a_random_table():
    """With a wide beam, beam search returns the best normalised score over all hypotheses."""
    g = torch.Generator().manual_seed(0)
    vocab, words, depth = 7, [4, 5, 6], 3
    table = {}
    for n in range(depth):
        for pre in itertools.product(words, repeat=n):
            p = torch.rand(4, generator=g) + 0.05
            p = p / p.sum()
            table[pre] = {EOS: float(p[0]), **{w: float(p[i + 1]) for i, w in enumerate(words)}}
    model = TableModel(table, vocab)
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    alpha = 0.6
    best = -1e9
    for n in range(depth + 1):  # hypotheses w_1 .. w_n EOS, forced EOS at length depth + 1
        for seq in itertools.product(words, repeat=n):
            lp = sum(math.log(table[seq[:i]][seq[i]]) for i in range(n))
            lp += math.log(table[seq][EOS]) if n < depth else 0.0  # forced EOS (prob. renormalised away)
            best = max(best, lp / ((5 + n + 1) / 6) ** alpha)
    _, score = beam_search(model, src, mask, beam=64, bos=BOS, eos=EOS, pad=PAD, alpha=alpha, max_len_b=depth)
    assert score.item() == pytest.approx(best, rel=1e-5)


@pytest.mark.parametrize("name", ["transformer", "rnn_luong_general", "convs2s"])
def test_beam_one_equals_greedy(name, syn):
    net = _net(name, syn.info).eval()
    b = next(iter(syn.val_dataloader()))
    kw = dict(bos=BOS, eos=EOS, pad=PAD, max_len_b=6)
    g_tok, g_score = greedy_search(net, b["src"], b["src_mask"], **kw)
    b_tok, b_score = beam_search(net, b["src"], b["src_mask"], beam=1, **kw)
    assert torch.equal(g_tok, b_tok[:, : g_tok.shape[1]]) and (b_tok[:, g_tok.shape[1]:] == PAD).all()
    assert torch.allclose(g_score, b_score, atol=1e-5)
    b4_tok, _ = beam_search(net, b["src"], b["src_mask"], beam=4, **kw)
    lengths = b["src_mask"].sum(1)
    for row, n in zip(b4_tok.tolist(), lengths.tolist()):  # ends in EOS within src_len + max_len_b
        assert EOS in row[: n + 6]


# ----------------------------------------------------------------------------- metrics
def test_bleu_and_chrf_match_sacrebleu_and_a_hand_computation():
    hyps = ["The cat sat on the mat.", "A dog runs in the park!", "Hello world"]
    refs = ["The cat sat on a mat.", "A dog is running in the park!", "Hello world"]
    got = corpus_scores(hyps, refs)
    assert got["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    # By hand (13a splits the final punctuation): matches / totals per n-gram order, brevity penalty.
    # hyp tokens 7 + 7 + 2 = 16, ref tokens 7 + 8 + 2 = 17.
    matches, totals = [6 + 6 + 2, 4 + 4 + 1, 2 + 2 + 0, 1 + 1 + 0], [16, 13, 10, 8]
    bp = math.exp(1 - 17 / 16)
    bleu = 100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)
    assert got["bleu"] == pytest.approx(bleu, rel=1e-6)
    assert corpus_scores(refs, refs)["bleu"] == pytest.approx(100.0)
    assert corpus_scores(["hello World"], ["Hello world"])["bleu"] < 100  # cased


def test_average_states():
    g = torch.Generator().manual_seed(0)
    states = [{"w": torch.randn(3, 2, generator=g), "n": torch.tensor(i)} for i in range(3)]
    avg = average_states(states)
    assert torch.allclose(avg["w"], (states[0]["w"] + states[1]["w"] + states[2]["w"]) / 3)
    assert avg["n"].item() == 2


# ----------------------------------------------------------------------------- training
@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_trains_and_its_loss_falls(name, syn):
    net = _net(name, syn.info)
    module = make_module(net, syn.info, label_smoothing=0.0)
    opt = torch.optim.Adam(module.parameters(), lr=3e-3)
    batch = next(iter(syn.train_dataloader()))
    with torch.no_grad():
        module.eval()
        before = module.step(batch, "val").loss.item()
    module.train()
    for _ in range(25):
        out = module.step(batch, "train")
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    module.eval()
    with torch.no_grad():
        after = module.step(batch, "val").loss.item()
    assert math.isfinite(after) and after < 0.8 * before, (before, after)
    assert out.tokens == int(batch["tgt_mask"].sum()) and out.samples == batch["src"].shape[0]


def _fit(name: str, dm, *, epochs: int, **module_kw):
    L.seed_everything(0, verbose=False)
    module = make_module(_net(name, dm.info), dm.info, **module_kw)
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, num_sanity_val_steps=0, accelerator="cpu")
    trainer.fit(module, datamodule=dm)
    return module, trainer


def test_synthetic_needs_attention(tmp_path):
    """On long reversed sentences the no-attention bottleneck stays clearly below attention."""
    dm = build_synthetic(None, str(tmp_path), 0, num_train=1500, num_val=60, num_test=20, num_words=10,
                         min_len=10, max_len=16, batch_size=50)
    scores = {}
    for name in ("rnn_luong_dot", "rnn_noattn"):
        module, trainer = _fit(name, dm, epochs=6, lr=5e-3, label_smoothing=0.0)
        scores[name] = trainer.callback_metrics["val/bleu"].item()
    assert scores["rnn_luong_dot"] > scores["rnn_noattn"] + 15, scores


def test_module_end_to_end_with_averaging_and_extras(syn, tmp_path):
    """fit (with checkpoint averaging) + test from the checkpoint: BLEU/chrF/ppl logged, the
    checkpoint holds the validated average, extras hold well-formed alignments."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    L.seed_everything(0, verbose=False)
    module = make_module(_net("transformer", syn.info), syn.info, avg_last_n=2, beam=2)
    snaps = []

    class Spy(L.Callback):
        def on_validation_epoch_start(self, trainer, pl_module):
            snaps.append({k: v.clone() for k, v in pl_module.net.state_dict().items()})

    ckpt = ModelCheckpoint(dirpath=tmp_path, monitor="val/bleu", mode="max", save_top_k=-1, filename="{epoch}")
    trainer = L.Trainer(max_epochs=3, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, accelerator="cpu", callbacks=[Spy(), ckpt], limit_train_batches=3)
    trainer.fit(module, datamodule=syn)
    # Callback hooks run before the module's: Spy saw the live end-of-epoch weights.
    saved = torch.load(tmp_path / "epoch=2.ckpt", weights_only=False)["state_dict"]
    for key in ("out.weight", "decoder.layers.0.linear1.weight"):
        assert torch.allclose(saved[f"net.{key}"], (snaps[1][key] + snaps[2][key]) / 2, atol=1e-6)
        assert not torch.allclose(saved[f"net.{key}"], snaps[2][key], atol=1e-6)
        assert torch.equal(module.net.state_dict()[key], snaps[2][key])  # training goes on with live weights
    for k in ("val/bleu", "val/chrf", "val/ppl", "val/sent_per_s"):
        assert k in trainer.callback_metrics
    res = trainer.test(module, datamodule=syn, verbose=False)[0]
    assert 0 <= res["test/bleu"] <= 100 and res["test/ppl"] >= 1.0
    extras = module.report_extras(trainer, syn)["translation_alignments"]
    assert extras["heads"] == 4 and len(extras["sentences"]) == 3
    for s in extras["sentences"]:
        w = torch.tensor(s["weights"], dtype=torch.float)  # (H, T, S) percent
        assert w.shape == (4, len(s["hyp"]), len(s["src"]))
        assert torch.allclose(w.sum(-1), torch.full(w.shape[:2], 100.0), atol=len(s["src"]) * 0.5 + 0.01)


def test_rnn_noattn_has_no_alignments(syn):
    module = make_module(_net("rnn_noattn", syn.info), syn.info)
    assert module.report_extras(None, syn) == {}


def test_bad_module_params(syn):
    with pytest.raises(ValueError, match="test_decoder='sample'; valid: greedy, beam"):
        make_module(_net("rnn_noattn", syn.info), syn.info, test_decoder="sample")


# ----------------------------------------------------------------------------- real data
@pytest.mark.data
def test_multi30k_from_shared_data(shared_data, tmp_path):
    dm = build_multi30k(str(shared_data), str(tmp_path), 0, vocab_size=2000)
    dm.setup("fit")
    info = dm.info
    assert (info["num_train"], info["num_val"], info["num_test"]) == (29000, 1014, 1000)
    assert info["src_lang"] == "de" and 1500 <= info["vocab_size"] <= 2000
    src, tgt, ref = dm.splits["test"][0]
    assert ref == "A man in an orange hat starring at something."
    assert dm.tokenizer.decode(src.tolist()).startswith("Ein Mann mit einem orangefarbenen Hut")
    assert not any((Path(shared_data) / "multi30k").glob("*.model"))  # nothing written there
    en_de = build_multi30k(str(shared_data), str(tmp_path), 0, src_lang="en", tgt_lang="de", vocab_size=2000)
    assert en_de.splits["test"][0][2].startswith("Ein Mann mit einem orangefarbenen Hut")
    # one joint vocabulary for the pair, whichever way it translates: trained once, then read from the cache
    assert len(list((tmp_path / "translation" / "spm").glob("*.model"))) == 1
    assert en_de.tokenizer.encode(ref) == dm.tokenizer.encode(ref)
