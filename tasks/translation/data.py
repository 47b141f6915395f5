"""Translation data: Multi30k task 1, any plain parallel text files, and a synthetic task.

Every dataset yields items ``(src_ids (S,), tgt_ids (T,), ref_text)``: source pieces + EOS,
target pieces + EOS (the module prepends BOS for teacher forcing) and the raw target sentence
(the detokenised reference sacreBLEU scores against).

Tokenisation: one **joint** sentencepiece model trained on the source *and* target sides of the
training split (joint, so that the Transformer can tie its source, target and output
embeddings; German and English share many subwords). It is cached under
``<cache_dir>/translation/spm/<hash>.model``, the hash covering the training text and every
tokeniser setting, so a change of either trains a new model and an unchanged run reuses it.
Special ids are fixed: ``pad=0, unk=1, bos=2, eos=3``.

The synthetic task (generated in code, deterministic from ``data_seed``) is a vocabulary mapping
(source word ``s<i>`` -> target word ``t<perm(i)>``) plus a reordering (default ``blocks``: every
run of 3 words is reversed; ``reverse``: the whole sentence), so that the word a target position
needs is not at its own position: alignment matters, and a fixed-size summary of the source (the
no-attention RNN) is a bottleneck. Its tokeniser is the same sentencepiece code with ``model_type="word"``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import urllib.request
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor
from torch.utils.data import Dataset

from tasks.common.data import (DataMissing, SplitDataModule, corrupt, default_cache_dir, file_lock, materialize, origin,
                               pad_sequences, read_text, write_atomic)

__all__ = [
    "PAD", "UNK", "BOS", "EOS",
    "Tokenizer", "train_tokenizer",
    "ParallelDataset", "TranslationDataModule",
    "MULTI30K_DEFAULTS", "PARALLEL_DEFAULTS", "SYNTHETIC_DEFAULTS",
    "build_multi30k", "build_parallel", "build_synthetic", "synthetic_corpus", "read_lines", "read_pair",
]

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPM_MODEL_TYPES = ("unigram", "bpe", "word", "char")

#: Shared by every dataset: tokeniser and batching.
_COMMON: dict[str, Any] = {
    "vocab_size": 8000,        # joint sentencepiece vocabulary (an upper bound: hard_vocab_limit=False)
    "spm_model_type": "unigram",
    "batch_size": 128,         # sentences per training batch (at most)
    "max_tokens": 4096,        # padded tokens per batch (at most); null = no limit
    "eval_batch_size": 200,
    "max_train_len": 100,      # training pairs longer than this (in pieces, either side) are dropped
}
MULTI30K_LANGS = ("de", "en", "fr", "cs")
MULTI30K_TEST_SETS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}.gz"
MULTI30K_DEFAULTS: dict[str, Any] = {"src_lang": "de", "tgt_lang": "en", "test_set": "test_2016_flickr", **_COMMON}
PARALLEL_DEFAULTS: dict[str, Any] = {
    "train_src": None, "train_tgt": None, "val_src": None, "val_tgt": None, "test_src": None, "test_tgt": None,
    "src_lang": "src", "tgt_lang": "tgt", **_COMMON,
}
SYNTHETIC_DEFAULTS: dict[str, Any] = {
    "data_seed": 0, "num_words": 24, "min_len": 4, "max_len": 12, "reorder": "blocks", "block": 3,
    "num_train": 2000, "num_val": 150, "num_test": 150,
    **{**_COMMON, "spm_model_type": "word", "vocab_size": 1000, "batch_size": 64, "max_tokens": None},
}
REORDERS = ("blocks", "reverse", "none")


# ----------------------------------------------------------------------------- tokeniser
class Tokenizer:
    """A sentencepiece model with the fixed special ids; picklable (keeps the model bytes)."""

    def __init__(self, model_proto: bytes, path: str | None = None) -> None:
        import sentencepiece as spm

        self.model_proto, self.path = model_proto, path
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        got = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if got != (PAD, UNK, BOS, EOS):
            raise ValueError(f"sentencepiece model {path}: special ids {got}, expected {(PAD, UNK, BOS, EOS)}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        return cls(Path(path).read_bytes(), str(path))

    def __getstate__(self) -> dict[str, Any]:
        return {"model_proto": self.model_proto, "path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model_proto"], state["path"])

    @property
    def vocab_size(self) -> int:
        return int(self.sp.get_piece_size())

    def encode(self, text: str) -> list[int]:
        return list(self.sp.encode(text))

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> detokenised text; stops at the first EOS, skips PAD/BOS."""
        out: list[int] = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(i)
        return self.sp.decode(out)


def train_tokenizer(
    lines: Sequence[str], *, vocab_size: int, model_type: str, cache_dir: str | os.PathLike | None
) -> Tokenizer:
    """Train (or load from the cache) a sentencepiece model on ``lines``.

    The cache key hashes the lines and every setting, so the same inputs reuse one model file:
    ``<cache_dir>/translation/spm/<key>.model``."""
    import sentencepiece as spm

    if model_type not in SPM_MODEL_TYPES:
        raise ValueError(f"spm_model_type={model_type!r}; valid: {', '.join(SPM_MODEL_TYPES)}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
        raise ValueError(f"vocab_size={vocab_size!r}; must be an int >= 8")
    settings = {"vocab_size": vocab_size, "model_type": model_type, "character_coverage": 1.0,
                "pad_id": PAD, "unk_id": UNK, "bos_id": BOS, "eos_id": EOS, "hard_vocab_limit": False}
    h = hashlib.sha256(repr(sorted(settings.items())).encode() + spm.__version__.encode())
    for line in lines:
        h.update(line.encode("utf-8") + b"\n")
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = root / "translation" / "spm" / f"{h.hexdigest()[:24]}.model"
    with file_lock(path.with_suffix(".lock")):
        if path.is_file():
            try:
                return Tokenizer.load(path)
            except (RuntimeError, OSError, ValueError):  # a damaged cache entry: train it again
                path.unlink()
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=buf, minloglevel=2, num_threads=2,
            input_sentence_size=1_000_000, shuffle_input_sentence=True, **settings,
        )
        write_atomic(path, lambda tmp: tmp.write_bytes(buf.getvalue()))
    return Tokenizer.load(path)


# ----------------------------------------------------------------------------- datasets
def read_lines(path: str | os.PathLike) -> list[str]:
    """UTF-8 lines of a plain or ``.gz`` text file, without line endings
    (:func:`~tasks.common.data.read_text`: an absent file is :class:`~tasks.common.data.DataMissing`;
    bad gzip or UTF-8 is :class:`~tasks.common.data.DataCorrupt` naming the data-dir file and line)."""
    lines = read_text(path).split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def read_pair(src: Path, tgt: Path) -> tuple[list[str], list[str]]:
    """The line-aligned sentences of a source and a target file; an empty file or sides with
    different line counts are :class:`~tasks.common.data.DataCorrupt` naming the data-dir file."""
    pair = read_lines(src), read_lines(tgt)
    for path, lines in zip((src, tgt), pair):
        if not any(line.strip() for line in lines):
            raise corrupt(path, f"no sentence in the file ({len(lines)} line(s), all blank); a parallel text file "
                                f"holds one sentence per line, aligned with {origin(tgt if path == src else src)}")
    if len(pair[0]) != len(pair[1]):
        raise corrupt(tgt, f"{len(pair[1])} lines, but the source side {origin(src)} has {len(pair[0])}; the sides "
                           f"must be line-aligned")
    return pair


class ParallelDataset(Dataset):
    """Tokenised sentence pairs: item ``i`` is ``(src_ids (S,), tgt_ids (T,), ref_text)``."""

    def __init__(self, src: Sequence[str], tgt: Sequence[str], tok: Tokenizer, *, max_len: int | None = None) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"source and target have different line counts: {len(src)} vs {len(tgt)}")
        self.items: list[tuple[Tensor, Tensor, str]] = []
        for s, t in zip(src, tgt):
            si, ti = tok.encode(s) + [EOS], tok.encode(t) + [EOS]
            if max_len is not None and max(len(si), len(ti)) > max_len + 1:
                continue
            self.items.append((torch.tensor(si, dtype=torch.long), torch.tensor(ti, dtype=torch.long), t))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, str]:
        return self.items[i]


class TranslationDataModule(SplitDataModule):
    """Holds the raw text of each split, trains/loads the joint tokeniser on the training split
    and serves padded batches ``{"src" (B, S), "src_mask" (B, S), "tgt" (B, T), "tgt_mask" (B, T),
    "refs": [str]}`` (masks True = real token; ``tgt`` ends in EOS, without BOS)."""

    def __init__(
        self,
        texts: dict[str, tuple[list[str], list[str]]],
        *,
        cache_dir: str | os.PathLike | None,
        vocab_size: int,
        spm_model_type: str,
        max_train_len: int | None,
        src_lang: str,
        tgt_lang: str,
        name: str,
        batch_size: int,
        max_tokens: int | None,
        eval_batch_size: int,
        shuffle_seed: int = 0,
    ) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, eval_batch_size=eval_batch_size,
                         shuffle_seed=shuffle_seed)
        for split in ("train", "val", "test"):
            if split not in texts:
                raise ValueError(f"{name}: no {split!r} split")
        self.texts, self.cache_dir, self.name = texts, cache_dir, name
        self.vocab_size, self.spm_model_type, self.max_train_len = vocab_size, spm_model_type, max_train_len
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.tokenizer: Tokenizer | None = None

    def load(self) -> dict[str, Dataset]:
        src, tgt = self.texts["train"]
        # the sides in language order: one joint vocabulary per pair, whichever way it translates
        # (de->en and en->de share the model and its cache entry)
        sides = sorted([(self.src_lang, src), (self.tgt_lang, tgt)], key=lambda side: side[0])
        self.tokenizer = train_tokenizer([line for _, lines in sides for line in lines], vocab_size=self.vocab_size,
                                         model_type=self.spm_model_type, cache_dir=self.cache_dir)
        return {
            split: ParallelDataset(*self.texts[split], self.tokenizer, max_len=self.max_train_len if split == "train" else None)
            for split in ("train", "val", "test")
        }

    def make_info(self, splits: dict[str, Dataset]) -> dict[str, Any]:
        assert self.tokenizer is not None
        return {
            **super().make_info(splits),
            "vocab_size": self.tokenizer.vocab_size, "pad_id": PAD, "bos_id": BOS, "eos_id": EOS,
            "src_lang": self.src_lang, "tgt_lang": self.tgt_lang, "tokenizer": self.tokenizer,
        }

    def length(self, item: tuple[Tensor, Tensor, str]) -> int:
        return max(item[0].numel(), item[1].numel())

    def input_length(self, item: tuple[Tensor, Tensor, str]) -> int:
        """The longer of the two self-attentions' sequences: the encoder's S source positions and
        the decoder's T (BOS + the target without its EOS). The pattern and its window apply to
        both, so a window is full attention only if it covers the longer side, not the source alone."""
        return max(item[0].numel(), item[1].numel())

    def checksum_parts(self):
        splits = self.splits  # loads the tokeniser
        assert self.tokenizer is not None
        yield hashlib.sha256(self.tokenizer.model_proto).hexdigest()
        for split in ("train", "val", "test"):
            ds = splits[split]
            yield split
            yield [(ds[i][0], ds[i][1]) for i in range(len(ds))]

    def collate(self, items: list[tuple[Tensor, Tensor, str]]) -> dict[str, Any]:
        to = self.pad_length(items)  # with length buckets: both sides to the bucket of the longer
        src, src_mask = pad_sequences([it[0] for it in items], PAD, to)  # (B, S)
        tgt, tgt_mask = pad_sequences([it[1] for it in items], PAD, to)  # (B, T)
        return {"src": src, "src_mask": src_mask, "tgt": tgt, "tgt_mask": tgt_mask, "refs": [it[2] for it in items]}


def _check_params(dataset: str, params: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"dataset {dataset!r}: unknown parameter {unknown[0]!r}; valid: {', '.join(sorted(defaults))}")
    return {**defaults, **params}


def _dm_kwargs(p: dict[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in ("vocab_size", "max_train_len", "batch_size", "max_tokens", "eval_batch_size")} | {
        "spm_model_type": p["spm_model_type"], "src_lang": p["src_lang"], "tgt_lang": p["tgt_lang"]}


# ----------------------------------------------------------------------------- Multi30k
def _download_multi30k(names: list[str]):
    def fetch(dest: Path) -> None:
        for name in names:
            if (dest / name).is_file():
                continue
            with urllib.request.urlopen(MULTI30K_URL.format(name=name), timeout=30) as resp:
                data = gzip.decompress(resp.read())
            write_atomic(dest / name, lambda tmp: tmp.write_bytes(data))

    return fetch


def build_multi30k(data_dir: str | None, cache_dir: str | None, seed: int, **params: Any) -> TranslationDataModule:
    """Multi30k task 1 (Elliott et al. 2016): 29000 / 1014 / 1000 (test 2016 flickr) pairs."""
    p = _check_params("multi30k", params, MULTI30K_DEFAULTS)
    for key in ("src_lang", "tgt_lang"):
        if p[key] not in MULTI30K_LANGS:
            raise ValueError(f"multi30k: {key}={p[key]!r}; valid: {', '.join(MULTI30K_LANGS)}")
    if p["src_lang"] == p["tgt_lang"]:
        raise ValueError(f"multi30k: src_lang and tgt_lang are both {p['src_lang']!r}; valid pairs: de-en, en-de, ...")
    if p["test_set"] not in MULTI30K_TEST_SETS:
        raise ValueError(f"multi30k: test_set={p['test_set']!r}; valid: {', '.join(MULTI30K_TEST_SETS)}")
    splits = {"train": "train", "val": "val", "test": p["test_set"]}
    names = [f"{stem}.{lang}" for stem in splits.values() for lang in (p["src_lang"], p["tgt_lang"])]
    folder = materialize(names, subdir="multi30k", data_dir=data_dir, cache_dir=cache_dir, dataset="multi30k",
                         download=_download_multi30k(names))
    texts = {}
    for split, stem in splits.items():
        texts[split] = read_pair(folder / f"{stem}.{p['src_lang']}", folder / f"{stem}.{p['tgt_lang']}")
    return TranslationDataModule(texts, cache_dir=cache_dir, name="multi30k", shuffle_seed=seed, **_dm_kwargs(p))


# ----------------------------------------------------------------------------- plain files
def build_parallel(data_dir: str | None, cache_dir: str | None, seed: int, **params: Any) -> TranslationDataModule:
    """Any language pair from plain (or ``.gz``) line-aligned text files given by path:
    ``train_src``, ``train_tgt``, ``val_src``, ``val_tgt``, ``test_src``, ``test_tgt``
    (relative paths are resolved against ``data_dir`` when given)."""
    p = _check_params("parallel", params, PARALLEL_DEFAULTS)
    texts: dict[str, tuple[list[str], list[str]]] = {}
    for split in ("train", "val", "test"):
        pair: list[Path] = []
        for side in ("src", "tgt"):
            key = f"{split}_{side}"
            if not p[key]:
                raise ValueError(f"dataset 'parallel': parameter {key!r} is required (a path to a text file); "
                                 f"file parameters: {', '.join(k for k in PARALLEL_DEFAULTS if k.endswith(('_src', '_tgt')))}")
            path = Path(p[key]).expanduser()
            if not path.is_absolute() and data_dir is not None and not path.exists():
                path = Path(data_dir) / path
            if not path.is_file():
                raise DataMissing(f"dataset 'parallel': {key}={p[key]!r}: file not found ({path})")
            pair.append(path)
        texts[split] = read_pair(*pair)
    return TranslationDataModule(texts, cache_dir=cache_dir, name="parallel", shuffle_seed=seed, **_dm_kwargs(p))


# ----------------------------------------------------------------------------- synthetic
def synthetic_corpus(
    *, data_seed: int, num_words: int, min_len: int, max_len: int, reorder: str, n: int, offset: int = 0,
    block: int = 3,
) -> tuple[list[str], list[str]]:
    """``n`` pairs: source words ``s<i>`` (uniform), target words ``t<perm(i)>`` reordered:
    ``"blocks"`` reverses every run of ``block`` consecutive words (local reordering, as between
    real languages), ``"reverse"`` reverses the sentence, ``"none"`` keeps the order. ``perm``
    depends on ``data_seed`` only; ``offset`` selects independent streams for the splits."""
    if reorder not in REORDERS:
        raise ValueError(f"synthetic: reorder={reorder!r}; valid: {', '.join(REORDERS)}")
    if not (1 <= min_len <= max_len):
        raise ValueError(f"synthetic: need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"synthetic: block={block!r}; must be an int >= 1")
    if num_words < 2:
        raise ValueError(f"synthetic: num_words={num_words}; must be >= 2")
    perm = list(range(num_words))
    random.Random(data_seed).shuffle(perm)
    rng = random.Random(f"{data_seed}/{offset}")
    src, tgt = [], []
    for _ in range(n):
        words = [rng.randrange(num_words) for _ in range(rng.randint(min_len, max_len))]
        out = [perm[w] for w in words]
        if reorder == "reverse":
            out = out[::-1]
        elif reorder == "blocks":
            out = [w for i in range(0, len(out), block) for w in out[i : i + block][::-1]]
        src.append(" ".join(f"s{w}" for w in words))
        tgt.append(" ".join(f"t{w}" for w in out))
    return src, tgt


def build_synthetic(data_dir: str | None, cache_dir: str | None, seed: int, **params: Any) -> TranslationDataModule:
    """The synthetic mapping + reordering task (deterministic from ``data_seed``, not the run seed)."""
    del data_dir
    p = _check_params("synthetic", params, SYNTHETIC_DEFAULTS)
    gen = {k: p[k] for k in ("data_seed", "num_words", "min_len", "max_len", "reorder", "block")}
    texts = {split: synthetic_corpus(**gen, n=int(p[f"num_{split}"]), offset=i)
             for i, split in enumerate(("train", "val", "test"))}
    return TranslationDataModule(texts, cache_dir=cache_dir, name="synthetic", shuffle_seed=seed,
                                 **_dm_kwargs({**p, "src_lang": "src", "tgt_lang": "tgt"}))
