"""POS-tagging data: Universal Dependencies treebanks (CoNLL-U) and a synthetic grammar.

Every DataModule here is a :class:`tasks.common.data.SplitDataModule` whose items are
sentences ``(words (L,), forms (L,), tags (L,), oov (L,))``, and, where the treebank has a syntax
(UD), ``arcs (L,)``:

* ``arcs``: each word's distance in words to its syntactic head (0 for the root), the distance
  axis of real data (issue 52): the report bins test accuracy by it;
* ``words``: ids in the word vocabulary built from train (lower-cased by default; words seen
  fewer than ``min_freq`` times map to UNK, so the UNK vector is trained);
* ``forms``: ids in the table of every distinct surface form of all splits, whose characters
  (``form_chars``) feed the character encoder of the shared input layer;
* ``tags``: UPOS ids; ``oov``: True where the exact form never occurs in train.

Batches are length-bucketed; :meth:`TaggingDataModule.collate` pads and builds the batch dict
``words/types (B, L)``, ``chars (T, W)`` (one row per distinct form of the batch, so the
character encoder runs once per type), ``tags``, ``oov``, ``mask (B, L)`` (True = real word), and
``arcs (B, L)`` where the items have them.
"""

from __future__ import annotations

import os
import re
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor

from tasks.common.data import (DataMissing, SplitDataModule, corrupt, materialize, origin, pad_fields, pad_sequences,
                               read_text, reading, write_atomic)

__all__ = [
    "UPOS",
    "TREEBANKS",
    "read_conllu",
    "parse_conllu",
    "Vocab",
    "TaggingDataModule",
    "UDDataModule",
    "SyntheticTaggingDataModule",
    "make_synthetic_corpus",
    "build_ud",
    "build_synthetic",
    "UD_DEFAULTS",
    "SYNTHETIC_DEFAULTS",
]

#: The 17 universal POS tags, in the UD documentation's order (tag ids follow it).
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
        "PUNCT", "SCONJ", "SYM", "VERB", "X")

#: treebank code -> UD repository (download) ; any other: pass ``ud_repo`` or explicit files.
TREEBANKS = {
    "en_ewt": "UD_English-EWT",
    "en_gum": "UD_English-GUM",
    "de_gsd": "UD_German-GSD",
    "fr_gsd": "UD_French-GSD",
    "es_ancora": "UD_Spanish-AnCora",
    "it_isdt": "UD_Italian-ISDT",
    "nl_alpino": "UD_Dutch-Alpino",
    "pt_bosque": "UD_Portuguese-Bosque",
    "zh_gsd": "UD_Chinese-GSD",
    "ja_gsd": "UD_Japanese-GSD",
    "fi_tdt": "UD_Finnish-TDT",
    "ar_padt": "UD_Arabic-PADT",
}
PAD, UNK, BOW, EOW = 0, 1, 2, 3  # special ids (chars use all four, words PAD/UNK)
Sentence = tuple[list[str], list[str]]  # (forms, upos tags); with heads=True also (L,) head distances


# ----------------------------------------------------------------------------- CoNLL-U
_CONLLU_ID = re.compile(r"[1-9][0-9]*(-[1-9][0-9]*|\.[1-9][0-9]*)?")  # word, multi-word range, empty node
#: ``ud_repo`` and ``treebank`` name a folder and files: plain names only (no path can leave the cache).
_REPO_NAME = re.compile(r"UD_[A-Za-z0-9_]+-[A-Za-z0-9_]+")
_TREEBANK_CODE = re.compile(r"[A-Za-z0-9]+(_[A-Za-z0-9]+)*")


def _check_conllu_lines(text: str, source: str) -> None:
    """Every token line has the 10 tab-separated CoNLL-U columns, a valid ID and (for a
    syntactic word) a UPOS tag; else :class:`DataCorrupt` naming ``source`` and the line."""
    for no, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\r").split("\t")
        if len(cols) != 10:
            raise corrupt(source, f"expected 10 tab-separated CoNLL-U columns, got {len(cols)}: {line[:60]!r}", no)
        if not _CONLLU_ID.fullmatch(cols[0]):
            raise corrupt(source, f"bad token ID {cols[0][:20]!r} (expected 1, 1-2 or 1.1)", no)
        if cols[0].isdigit() and cols[3] in ("_", ""):
            raise corrupt(source, f"word {cols[1]!r} (id {cols[0]}) has no UPOS tag", no)
        if cols[0].isdigit() and not (cols[6] in ("_", "") or cols[6].isdigit()):
            raise corrupt(source, f"word {cols[1]!r} (id {cols[0]}) has HEAD {cols[6][:20]!r}, not a word id (or _)", no)
        if cols[0].isdigit() and cols[3] not in UPOS:
            raise corrupt(source, f"word {cols[1]!r} (id {cols[0]}) has UPOS tag {cols[3][:20]!r}, not one of "
                                  f"the 17 universal tags: {', '.join(UPOS)}", no)


def parse_conllu(text: str, *, source: str = "<text>", heads: bool = False) -> list[Sentence]:
    """Sentences of CoNLL-U ``text`` as ``(forms, upos)``: syntactic words only (integer ids);
    multi-word token ranges (``1-2``) and empty nodes (``8.1``) are skipped, comments ignored.
    ``heads``: ``(forms, upos, arcs)``, ``arcs`` each word's distance to its head ``|HEAD - ID|``
    (0 for the root, and where HEAD is ``_``).
    A malformed line raises :class:`~tasks.common.data.DataCorrupt` naming ``source`` and the line."""
    import conllu

    _check_conllu_lines(text, source)
    out: list[Sentence] = []
    with reading(source):
        fields = ("id", "form", "lemma", "upos") + (("xpos", "feats", "head") if heads else ())
        sents = conllu.parse(text, fields=fields)  # the columns we read: ~3x faster than all ten
    for sent in sents:
        words = [t for t in sent if isinstance(t["id"], int)]
        if words:
            tags = ([t["form"] for t in words], [t["upos"] for t in words])
            out.append(tags + ([_arc(t) for t in words],) if heads else tags)
    return out


def _arc(token: Any) -> int:
    head = token.get("head")
    return abs(head - token["id"]) if isinstance(head, int) and head > 0 else 0


def read_conllu(path: str | os.PathLike, *, heads: bool = False) -> list[Sentence]:
    """:func:`parse_conllu` of a ``.conllu`` or ``.conllu.gz`` file (UTF-8); an absent file is
    :class:`~tasks.common.data.DataMissing`; an unreadable one (bad gzip, not UTF-8, a malformed
    line, no sentence at all) :class:`~tasks.common.data.DataCorrupt` naming the data-dir file."""
    p = Path(path)
    if not p.is_file():
        raise DataMissing(f"CoNLL-U file not found: {origin(p)}")
    sents = parse_conllu(read_text(p), source=str(p), heads=heads)
    if not sents:
        raise corrupt(p, "no sentence in the file (empty, or only comments and blank lines); CoNLL-U has one "
                         "word per line, 10 tab-separated columns, and a blank line after each sentence")
    return sents


# ----------------------------------------------------------------------------- vocabulary
class Vocab:
    """String <-> id with reserved specials at the front; unknown strings map to UNK (1)."""

    def __init__(self, items: Sequence[str], specials: Sequence[str] = ("<pad>", "<unk>")) -> None:
        self.itos = list(specials) + [s for s in items if s not in specials]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, s: object) -> bool:
        return s in self.stoi

    def get(self, s: str) -> int:
        return self.stoi.get(s, UNK)


def _clip_word(form: str, max_chars: int) -> str:
    """Long forms (URLs, ...) keep their first and last characters (prefix and suffix)."""
    if len(form) <= max_chars:
        return form
    head = max_chars // 2
    return form[:head] + form[len(form) - (max_chars - head):]


# ----------------------------------------------------------------------------- the base
class TaggingDataModule(SplitDataModule):
    """Base: subclasses implement :meth:`sentences` -> ``{"train", "val", "test"}`` lists of
    ``(forms, tags)``; this class builds the vocabularies (from train only), encodes, pads."""

    def __init__(self, *, min_freq: int = 2, lowercase: bool = True, max_word_chars: int = 24,
                 batch_size: int = 32, max_tokens: int | None = None, eval_batch_size: int | None = None) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, eval_batch_size=eval_batch_size)
        if not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"min_freq={min_freq!r}; must be an int >= 1")
        if not isinstance(max_word_chars, int) or max_word_chars < 2:
            raise ValueError(f"max_word_chars={max_word_chars!r}; must be an int >= 2")
        self.min_freq, self.lowercase, self.max_word_chars = min_freq, bool(lowercase), max_word_chars
        self.tags = Vocab(UPOS, specials=())
        self.words: Vocab | None = None
        self.chars: Vocab | None = None
        self.form_chars: Tensor | None = None  # (F, W) char ids of every distinct form

    def sentences(self) -> dict[str, list[Sentence]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _norm(self, form: str) -> str:
        return form.lower() if self.lowercase else form

    def load(self) -> dict[str, list[tuple[Tensor, Tensor, Tensor, Tensor]]]:
        raw = self.sentences()
        train = raw["train"]
        counts = Counter(self._norm(w) for ws, *_ in train for w in ws)
        self.words = Vocab(sorted(w for w, c in counts.items() if c >= self.min_freq))
        self.chars = Vocab(sorted({c for ws, *_ in train for w in ws for c in w}), ("<pad>", "<unk>", "<w>", "</w>"))
        seen = {w for ws, *_ in train for w in ws}
        forms: dict[str, int] = {}
        for split in ("train", "val", "test"):
            for ws, *_ in raw[split]:
                for w in ws:
                    forms.setdefault(w, len(forms))
        rows = [torch.tensor([BOW] + [self.chars.get(c) for c in _clip_word(w, self.max_word_chars)] + [EOW])
                for w in forms]
        self.form_chars, _ = pad_sequences(rows, PAD)  # (F, W)
        out = {}
        for split in ("train", "val", "test"):
            items = []
            for ws, ts, *arcs in raw[split]:
                unknown = [t for t in ts if t not in self.tags]
                if unknown:
                    raise ValueError(f"{split}: tag {unknown[0]!r} is not a UPOS tag; valid: {', '.join(UPOS)}")
                items.append((
                    torch.tensor([self.words.get(self._norm(w)) for w in ws]),
                    torch.tensor([forms[w] for w in ws]),
                    torch.tensor([self.tags.get(t) for t in ts]),
                    torch.tensor([w not in seen for w in ws]),
                ) + tuple(torch.tensor(a) for a in arcs))
            out[split] = items
        return out

    def length(self, item: Any) -> int:
        """Words; also :meth:`input_length`: the attention sees one position per word."""
        return int(item[0].shape[0])

    def collate(self, items: list[tuple[Tensor, Tensor, Tensor, Tensor]]) -> dict[str, Tensor]:
        to = self.pad_length(items)  # None, or the length bucket's
        (words, forms, tags, oov, *arcs), mask = pad_fields(items, (PAD, 0, 0, False, 0)[:len(items[0])], to)  # (B, L)
        uniq, types = torch.unique(forms, return_inverse=True)  # types (B, L) -> row of chars
        chars = self.form_chars[uniq]  # (T, W)
        if to is None:
            chars = chars[:, : int((chars != PAD).sum(1).max())]
        else:  # one shape per bucket: T to B * L rows (at most that many forms), every char column
            chars = torch.cat([chars, chars.new_full((words.numel() - len(uniq), chars.shape[1]), PAD)])
        batch = {"words": words, "types": types, "chars": chars, "tags": tags, "oov": oov & mask, "mask": mask}
        return {**batch, "arcs": arcs[0]} if arcs else batch

    def make_info(self, splits: dict[str, Any]) -> dict[str, Any]:
        assert self.words is not None and self.chars is not None
        return {"num_words": len(self.words), "num_chars": len(self.chars), "num_tags": len(self.tags),
                "tags": list(self.tags.itos), "num_train": len(splits["train"]), "num_val": len(splits["val"]),
                "num_test": len(splits["test"])}

    def checksum_parts(self):
        for name in ("train", "val", "test"):
            ds = self.splits[name]
            yield name
            for k in range(4):
                yield torch.cat([it[k] for it in ds])
            yield torch.tensor([len(it[0]) for it in ds])
        yield self.form_chars
        yield self.words.itos


# ----------------------------------------------------------------------------- UD
def _ud_subdir(repo: str) -> str:
    """``UD_English-EWT`` -> ``ud_english_ewt`` (the layout of shared/data)."""
    return repo.lower().replace("-", "_")


class UDDataModule(TaggingDataModule):
    """A UD treebank in CoNLL-U, UPOS tags, gold tokenisation.

    Files come from (first match): explicit ``train_file``/``dev_file``/``test_file`` (all
    three, ``.conllu`` or ``.conllu.gz``; or ``test_file`` alone, which replaces the treebank's
    test split: another treebank's test set for a model trained on this one); else ``<data_dir>/<ud_xx_yy>/<code>-ud-<split>.conllu[.gz]``
    copied into ``<cache_dir>/<ud_xx_yy>``; else the cache; else a download of release
    ``release`` from GitHub ``UniversalDependencies/<repo>``. ``treebank`` is a code (``en_ewt``,
    see :data:`TREEBANKS`); another treebank needs ``ud_repo`` (e.g. ``UD_Czech-CAC``).
    """

    def __init__(self, treebank: str = "en_ewt", *, ud_repo: str | None = None, release: str = "r2.16",
                 train_file: str | None = None, dev_file: str | None = None, test_file: str | None = None,
                 data_dir: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
                 download: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        files = {"train_file": train_file, "dev_file": dev_file, "test_file": test_file}
        given = [k for k, v in files.items() if v]
        self.test_only = test_file if given == ["test_file"] else None  # the treebank's train/dev, this test
        if self.test_only:
            given = []
        if given and len(given) != 3:
            missing = [k for k in files if k not in given]
            raise ValueError(f"ud: {', '.join(given)} given without {', '.join(missing)}; pass all three, "
                             "test_file alone (the treebank's train and dev with another test set) or none")
        if not given and ud_repo is None and treebank not in TREEBANKS:
            raise ValueError(f"ud: unknown treebank={treebank!r}; valid: {', '.join(TREEBANKS)} "
                             f"(or pass ud_repo='UD_<Language>-<Name>', or train_file/dev_file/test_file)")
        if ud_repo is not None and not (isinstance(ud_repo, str) and _REPO_NAME.fullmatch(ud_repo)):
            raise ValueError(f"ud: ud_repo={ud_repo!r}; must be a UD repository name like 'UD_Czech-CAC' "
                             f"(letters, digits and _, one '-'; no path)")
        if not given and not (isinstance(treebank, str) and _TREEBANK_CODE.fullmatch(treebank)):
            raise ValueError(f"ud: treebank={treebank!r}; must be a treebank code like 'en_ewt' (letters, digits, _)")
        self.treebank, self.release, self.download = treebank, release, download
        self.repo = ud_repo or TREEBANKS.get(treebank)
        self.files = files if given else None
        self.data_dir, self.cache_dir = data_dir, cache_dir

    def _names(self) -> list[str]:
        return [f"{self.treebank}-ud-{s}.conllu" for s in ("train", "dev", "test")]

    def _fetch(self, dest: Path) -> None:
        for name in self._names():
            if (dest / name).is_file():
                continue
            url = f"https://raw.githubusercontent.com/UniversalDependencies/{self.repo}/{self.release}/{name}"
            with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - fixed https host
                body = r.read()
            write_atomic(dest / name, lambda tmp: tmp.write_bytes(body))

    def sentences(self) -> dict[str, list[Sentence]]:
        if self.files is not None:
            paths = [Path(self.files[k]) for k in ("train_file", "dev_file", "test_file")]
        else:
            folder = materialize(self._names(), subdir=_ud_subdir(self.repo), data_dir=self.data_dir,
                                 cache_dir=self.cache_dir, dataset=f"ud {self.treebank}",
                                 download=self._fetch if self.download else None)
            paths = [folder / n for n in self._names()]
            if self.test_only:
                paths[2] = Path(self.test_only)
        return dict(zip(("train", "val", "test"), (read_conllu(p, heads=True) for p in paths)))


# ----------------------------------------------------------------------------- synthetic
_CONS, _VOW = "bdfgklmnprstvz", "aeiou"
_SUFFIX = {"NOUN": ("tion", "ment", "ness", "ity"), "VERB": ("ize", "ate", "ify", "en"),
           "ADJ": ("ous", "ful", "ive", "al"), "ADV": ("ly",)}
#: ambiguous word classes: name -> the tags each of its words can take (decided by the slot)
_AMBIG = {"NV": ("NOUN", "VERB"), "DP": ("DET", "PRON"), "AP": ("ADP", "PART"), "JR": ("ADJ", "ADV"),
          "XV": ("AUX", "VERB")}


def make_lexicon(g: torch.Generator, sizes: dict[str, int], suffix_p: float) -> dict[str, list[str]]:
    """Distinct pseudo-words per class; open classes often carry a tag-specific suffix."""
    used: set[str] = set()
    lex: dict[str, list[str]] = {}

    def rnd(n: int) -> int:
        return int(torch.randint(n, (1,), generator=g))

    for cls, n in sizes.items():
        words: list[str] = []
        while len(words) < n:
            w = "".join(_CONS[rnd(len(_CONS))] + _VOW[rnd(len(_VOW))] for _ in range(1 + rnd(3)))
            if cls in _SUFFIX and float(torch.rand(1, generator=g)) < suffix_p:
                w += _SUFFIX[cls][rnd(len(_SUFFIX[cls]))]
            if w not in used:
                used.add(w)
                words.append(w)
        lex[cls] = words
    lex["PUNCT"] = [".", "!", "?"]
    return lex


def make_synthetic_corpus(num_sentences: int, *, data_seed: int = 0, p_ambiguous: float = 0.5,
                          open_class_size: int = 300, num_ambiguous: int = 40, suffix_p: float = 0.7,
                          zipf: float = 1.0) -> list[Sentence]:
    """Sentences from a small grammar where many words are ambiguous and their tag follows
    from the neighbours.

    ``S -> Clause (CCONJ Clause)? PUNCT``; ``Clause -> NP VP``; ``NP -> PRON | DET ADJ* NOUN
    (ADP NP)?``; ``VP -> AUX? VERB NP? ADV? | VERB PART VERB``. Each slot is filled, with
    probability ``p_ambiguous``, by a word of an ambiguous class (NOUN/VERB, DET/PRON, ADP/PART,
    ADJ/ADV, AUX/VERB) whose tag is the slot's: "book" after a determiner is a NOUN, after a
    subject a VERB. Otherwise a word of the slot's own class, drawn Zipf-distributed (rare and
    unseen words occur; open classes often end in a tag-specific suffix, which the character
    encoder can use). The lexicon and sentences depend on ``data_seed`` only.
    """
    g = torch.Generator().manual_seed(int(data_seed))
    n_open = open_class_size
    sizes = {"NOUN": n_open, "VERB": n_open * 2 // 3, "ADJ": n_open // 2, "ADV": n_open // 5, "DET": 6,
             "PRON": 6, "ADP": 8, "AUX": 4, "CCONJ": 3, "PART": 2, "NV": num_ambiguous, "DP": 3, "AP": 2,
             "JR": max(2, num_ambiguous // 2), "XV": 3}
    lex = make_lexicon(g, sizes, suffix_p)
    weights = {c: 1.0 / torch.arange(1, len(ws) + 1, dtype=torch.float64) ** zipf for c, ws in lex.items()}
    ambig_for = {t: [a for a, ts in _AMBIG.items() if t in ts] for t in UPOS}

    def coin(p: float) -> bool:
        return float(torch.rand(1, generator=g)) < p

    def pick(cls: str) -> str:
        return lex[cls][int(torch.multinomial(weights[cls], 1, generator=g))]

    def word(tag: str) -> tuple[str, str]:
        amb = ambig_for[tag]
        if amb and coin(p_ambiguous):
            return pick(amb[int(torch.randint(len(amb), (1,), generator=g))]), tag
        return pick(tag), tag

    def np_(depth: int = 0) -> list[tuple[str, str]]:
        if coin(0.2):
            return [word("PRON")]
        out = [word("DET")]
        for p in (0.4, 0.25):
            if not coin(p):
                break
            out.append(word("ADJ"))
        out.append(word("NOUN"))
        if depth == 0 and coin(0.25):
            out += [word("ADP")] + np_(1)
        return out

    def vp() -> list[tuple[str, str]]:
        if coin(0.2):
            return [word("VERB"), word("PART"), word("VERB")] + (np_() if coin(0.5) else [])
        out = [word("AUX")] if coin(0.3) else []
        out.append(word("VERB"))
        if coin(0.7):
            out += np_()
        if coin(0.3):
            out.append(word("ADV"))
        return out

    sents: list[Sentence] = []
    for _ in range(num_sentences):
        toks = np_() + vp()
        if coin(0.25):
            toks += [word("CCONJ")] + np_() + vp()
        toks.append(word("PUNCT"))
        sents.append(([w for w, _ in toks], [t for _, t in toks]))
    return sents


class SyntheticTaggingDataModule(TaggingDataModule):
    """:func:`make_synthetic_corpus` split into train/val/test (one corpus, one lexicon)."""

    def __init__(self, *, num_train: int = 1500, num_val: int = 300, num_test: int = 300, data_seed: int = 0,
                 p_ambiguous: float = 0.5, open_class_size: int = 300, num_ambiguous: int = 40,
                 suffix_p: float = 0.7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for k, v in (("num_train", num_train), ("num_val", num_val), ("num_test", num_test)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"synthetic: {k}={v!r}; must be an int >= 1")
        if not 0 <= p_ambiguous <= 1:
            raise ValueError(f"synthetic: p_ambiguous={p_ambiguous!r}; must be in [0, 1]")
        self.sizes = (num_train, num_val, num_test)
        self.gen = dict(data_seed=data_seed, p_ambiguous=p_ambiguous, open_class_size=open_class_size,
                        num_ambiguous=num_ambiguous, suffix_p=suffix_p)

    def sentences(self) -> dict[str, list[Sentence]]:
        a, b, c = self.sizes
        corpus = make_synthetic_corpus(a + b + c, **self.gen)
        return {"train": corpus[:a], "val": corpus[a:a + b], "test": corpus[a + b:]}


# ----------------------------------------------------------------------------- builders
LOADER_DEFAULTS = {"min_freq": 2, "lowercase": True, "max_word_chars": 24, "batch_size": 32, "max_tokens": None,
           "eval_batch_size": 128}
UD_DEFAULTS: dict[str, Any] = {"treebank": "en_ewt", "ud_repo": None, "release": "r2.16", "train_file": None,
                               "dev_file": None, "test_file": None, "download": True, **LOADER_DEFAULTS}
SYNTHETIC_DEFAULTS: dict[str, Any] = {"num_train": 1500, "num_val": 300, "num_test": 300, "data_seed": 0,
                                      "p_ambiguous": 0.5, "open_class_size": 300, "num_ambiguous": 40,
                                      "suffix_p": 0.7, **LOADER_DEFAULTS}


def check_keys(params: dict, defaults: dict, name: str) -> None:
    unknown = [k for k in params if k not in defaults]
    if unknown:
        raise ValueError(f"{name}: unknown params {unknown}; valid: {', '.join(sorted(defaults))}")


def build_ud(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> UDDataModule:
    """DatasetSpec builder; the run seed only shuffles batches (the data is fixed)."""
    check_keys(params, UD_DEFAULTS, "ud")
    dm = UDDataModule(data_dir=data_dir, cache_dir=cache_dir, **{**UD_DEFAULTS, **params})
    dm.shuffle_seed = int(seed)
    return dm


def build_synthetic(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> SyntheticTaggingDataModule:
    """DatasetSpec builder: the corpus depends on ``data_seed``, never on the run seed."""
    del data_dir, cache_dir
    check_keys(params, SYNTHETIC_DEFAULTS, "synthetic")
    dm = SyntheticTaggingDataModule(**{**SYNTHETIC_DEFAULTS, **params})
    dm.shuffle_seed = int(seed)
    return dm
