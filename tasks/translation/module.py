"""The translation LightningModule: teacher-forced training, decoding, corpus BLEU/chrF.

* Training loss: token cross-entropy with label smoothing (``label_smoothing``, 0.1 by default),
  padding ignored. ``tokens`` = real target tokens (EOS included), so the runner's training
  tokens/s counts target tokens (as fairseq's ``wps``).
* Validation/test: the same loss, the teacher-forced perplexity ``ppl = exp(sum NLL / tokens)``
  (plain NLL, no smoothing, identical for every family), and the decoded corpus: greedy for
  validation (``val_decoder``), beam search for test (``test_decoder``: ``beam`` 4, GNMT length
  penalty ``length_penalty`` 0.6, at most ``src_len + max_len_b`` tokens). The steps only keep
  the sources (decoding stops when every sentence has ended, which the host learns only by
  reading the device: a sync per position); they are decoded at the epoch end, where the
  hypotheses are detokenised by sentencepiece and scored against the raw references with
  sacreBLEU (13a tokenisation, cased: the default ``corpus_bleu``) and chrF; logged as
  ``<stage>/bleu`` (the headline), ``<stage>/chrf``, ``<stage>/ppl`` and ``<stage>/sent_per_s``
  (decoded sentences per second of decoding time). Under several ranks each decodes its shard
  and the corpus is scored once, over every rank's hypotheses (:func:`merge_buffers`).
* ``avg_last_n > 1``: checkpoint averaging. At every validation the weights are replaced by the
  mean of the last ``n`` end-of-epoch weights, validated, and that average is what the
  checkpoint stores, so the best-on-dev checkpoint the runner tests is an average of ``n``.
* Test items (one process): each test sentence's BLEU sufficient statistics (:func:`sentence_stats`:
  what ``corpus_bleu`` sums over the sentences), so that corpus BLEU can be recomputed on resamples.
* :meth:`report_extras`: ``{"translation_alignments": ...}``, the cross-attention weights of the model's own
  translations of the first ``align_sentences`` test sentences (see :func:`alignment_extras`).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np
import sacrebleu
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.module import StepOutput, TaskModule, gather_over_ranks
from tasks.translation.data import BOS, EOS, PAD
from tasks.translation.search import beam_search, greedy_search

__all__ = ["TranslationModule", "MODULE_DEFAULTS", "DECODERS", "corpus_scores", "make_module", "average_states",
           "merge_buffers", "ALIGNMENT_KEY", "sentence_stats", "BLEU_FIELDS"]

#: ``rec["extras"]`` key of the alignments: ``{"kind", "heads", "sentences": [{"src", "hyp", "weights", ...}]}``
#: (rendered by :mod:`benchmarks.report.domains.translation`).
ALIGNMENT_KEY = "translation_alignments"

DECODERS = ("greedy", "beam")

#: Adam at a constant 1e-3 suits every family on short budgets; the Transformer cells of the
#: configs switch to warm-up + inverse square root.
MODULE_DEFAULTS: dict[str, Any] = {
    "lr": 1e-3, "weight_decay": 0.0, "optimizer": "adam", "scheduler": "none", "warmup_steps": 0,
    "label_smoothing": 0.1, "beam": 4, "length_penalty": 0.6, "max_len_b": 50,
    "val_decoder": "greedy", "test_decoder": "beam", "avg_last_n": 1, "align_sentences": 3,
}


def corpus_scores(hyps: list[str], refs: list[str], stats: np.ndarray | None = None) -> dict[str, float]:
    """sacreBLEU (detokenised input, 13a, cased) and chrF of a corpus against one reference each;
    BLEU from the corpus's :func:`sentence_stats` ``stats`` when given (the same number, without
    extracting the n-grams again)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if stats is None:
        bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
    else:  # what corpus_bleu computes from the summed statistics (exponential smoothing, 4-grams)
        s = [int(v) for v in np.asarray(stats, dtype=np.int64).sum(0)]
        bleu = sacrebleu.BLEU.compute_bleu(s[2:6], s[6:10], s[0], s[1], smooth_method="exp").score
    return {"bleu": float(bleu), "chrf": float(sacrebleu.corpus_chrf(hyps, [refs]).score)}


#: the columns of :func:`sentence_stats`: sacreBLEU's segment statistics for 4-gram BLEU
BLEU_FIELDS = ("sys_len", "ref_len", "correct_1", "correct_2", "correct_3", "correct_4",
               "total_1", "total_2", "total_3", "total_4")


def sentence_stats(hyps: list[str], refs: list[str]) -> np.ndarray:
    """(N, 10) int64: per sentence, the statistics :func:`corpus_scores`' BLEU sums over the corpus
    (:data:`BLEU_FIELDS`: hypothesis and reference lengths, matched and total n-grams, n = 1..4) of
    sacreBLEU's default metric (13a, cased). The summed rows give the corpus BLEU again
    (``sacrebleu.BLEU.compute_bleu(..., smooth_method="exp")``)."""
    metric = sacrebleu.BLEU()
    rows = metric._extract_corpus_statistics(hyps, [refs])  # what corpus_score aggregates (sacrebleu 2.x)
    return np.asarray(rows, dtype=np.int64).reshape(len(hyps), len(BLEU_FIELDS))


def average_states(states: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The element-wise mean of state dicts (floating tensors; others from the newest)."""
    if not states:
        raise ValueError("average_states: no states")
    out: dict[str, Tensor] = {}
    for key, last in states[-1].items():
        if torch.is_floating_point(last):
            out[key] = torch.stack([s[key].float() for s in states]).mean(0).to(last.dtype)
        else:
            out[key] = last.clone()
    return out


class TranslationModule(TaskModule):
    """Receives a seq2seq network (the interface of :mod:`tasks.translation.models`) and the
    tokeniser (``data_info["tokenizer"]``) that turns hypotheses back into text."""

    item_unit = "sentence"

    def __init__(self, net: nn.Module, **kwargs: Any) -> None:
        params = {**MODULE_DEFAULTS, **kwargs}
        for key in ("val_decoder", "test_decoder"):
            if params[key] not in DECODERS:
                raise ValueError(f"{key}={params[key]!r}; valid: {', '.join(DECODERS)}")
        for key in ("beam", "avg_last_n", "max_len_b"):
            v = params[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if key == "max_len_b" else 1):
                raise ValueError(f"{key}={v!r}; must be an int >= {0 if key == 'max_len_b' else 1}")
        if not 0.0 <= float(params["label_smoothing"]) < 1.0:
            raise ValueError(f"label_smoothing={params['label_smoothing']!r}; must be in [0, 1)")
        super().__init__(net, **params)
        self.tokenizer: Any = None  # set by make_module (not a hyperparameter: kept out of checkpoints)
        self._buf: dict[str, dict[str, Any]] = {}
        self._snapshots: deque[dict[str, Tensor]] = deque(maxlen=int(params["avg_last_n"]))
        self._live: dict[str, Tensor] | None = None
        self._averaged: dict[str, Tensor] | None = None

    # -- teacher forcing -----------------------------------------------------------------
    def step(self, batch: dict[str, Any], stage: str) -> StepOutput:
        src, src_mask, tgt, tgt_mask = batch["src"], batch["src_mask"], batch["tgt"], batch["tgt_mask"]
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], 1)  # (B, T): BOS + target
        logits = self.net(src, src_mask, tgt_in)  # (B, T, V)
        flat, gold = logits.flatten(0, 1).float(), tgt.flatten()
        loss = F.cross_entropy(flat, gold, ignore_index=PAD, label_smoothing=float(self.hparams.label_smoothing))
        ntok = tgt_mask.sum()  # (,) on the device: summed there, read at the epoch's end
        if stage != "train":
            nll = F.cross_entropy(flat, gold, ignore_index=PAD, reduction="sum")
            buf = self._buf.setdefault(stage, _new_buffer())
            buf["nll"] = buf["nll"] + nll.detach()
            buf["tokens"] = buf["tokens"] + ntok
        return StepOutput(loss=loss, metrics={}, samples=int(src.shape[0]), tokens=ntok)

    # -- decoding ------------------------------------------------------------------------
    def translate(self, src: Tensor, src_mask: Tensor, decoder: str = "beam") -> Tensor:
        """Token ids ``(B, L)`` (no BOS; EOS then PAD) of the ``decoder``'s translations."""
        hp = self.hparams
        if decoder == "beam":
            return beam_search(self.net, src, src_mask, beam=int(hp.beam), bos=BOS, eos=EOS, pad=PAD,
                               alpha=float(hp.length_penalty), max_len_b=int(hp.max_len_b))[0]
        if decoder == "greedy":
            return greedy_search(self.net, src, src_mask, bos=BOS, eos=EOS, pad=PAD, max_len_b=int(hp.max_len_b),
                                 alpha=float(hp.length_penalty))[0]
        raise ValueError(f"decoder={decoder!r}; valid: {', '.join(DECODERS)}")

    def _keep_batch(self, batch: dict[str, Any], stage: str) -> None:
        """Keep the batch's sources for decoding at the epoch's end: decoding stops when every
        sentence has ended, which the host can only know by reading the device (a sync per
        decoded position), so it waits until the step loop is over."""
        if self.tokenizer is None:
            raise ValueError("TranslationModule needs the tokenizer (data_info['tokenizer']) to score BLEU")
        buf = self._buf.setdefault(stage, _new_buffer())
        buf["pending"].append((batch["src"], batch["src_mask"], list(batch["refs"])))

    @torch.no_grad()
    def _decode_pending(self, stage: str, buf: dict[str, Any]) -> None:
        """Decode the sources kept this epoch (``val_decoder`` / ``test_decoder``) into ``buf``'s
        hypotheses and references, timing the decoding (``decode_s``); the NLL and token sums
        become host numbers."""
        decoder = self.hparams.val_decoder if stage == "val" else self.hparams.test_decoder
        was = self.net.training
        self.net.eval()
        try:
            for src, src_mask, refs in buf.pop("pending", []):
                t0 = time.perf_counter()
                out = self.translate(src, src_mask, decoder)
                if out.is_cuda:
                    torch.cuda.synchronize()
                buf["decode_s"] += time.perf_counter() - t0
                buf["hyps"].extend(self.tokenizer.decode(row) for row in out.tolist())
                buf["refs"].extend(refs)
                buf["sizes"].append(len(refs))
        finally:
            self.net.train(was)
        buf["nll"], buf["tokens"] = float(buf["nll"]), int(buf["tokens"])

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        self._keep_batch(batch, "val")

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        super().test_step(batch, batch_idx)
        self._keep_batch(batch, "test")

    def _log_corpus(self, stage: str) -> None:
        buf = self._buf.pop(stage, None)
        if buf is not None:
            self._decode_pending(stage, buf)
        if self.distributed:  # every rank, before any early return: a collective
            buf = merge_buffers(gather_over_ranks(buf or _new_buffer()))
        if not buf or not buf["hyps"]:
            return
        stats = None
        if self.keeps_items(stage):  # one row per sentence, in batch order -> data order
            stats = sentence_stats(buf["hyps"], buf["refs"])
            self.finish_items(stats, np.ones(len(stats), dtype=np.int64), buf["sizes"], BLEU_FIELDS)
        scores = corpus_scores(buf["hyps"], buf["refs"], stats)  # BLEU from the kept statistics
        scores["ppl"] = float(torch.exp(torch.tensor(buf["nll"] / max(buf["tokens"], 1))))
        scores["sent_per_s"] = len(buf["hyps"]) / max(buf["decode_s"], 1e-9)
        for name, value in scores.items():  # equal on every rank; sync_dist says so to Lightning
            self.log(f"{stage}/{name}", value, prog_bar=name == "bleu", sync_dist=self.distributed)

    def on_validation_epoch_start(self) -> None:
        self._buf.pop("val", None)
        if self.trainer.sanity_checking or int(self.hparams.avg_last_n) <= 1 or not self.training_in_fit():
            return
        live = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        self._snapshots.append({k: v.cpu() for k, v in live.items()})
        self._live = live
        avg = average_states(list(self._snapshots))
        self.net.load_state_dict({k: v.to(live[k].device) for k, v in avg.items()})
        self._averaged = avg

    def on_validation_epoch_end(self) -> None:
        super().on_validation_epoch_end()
        self._log_corpus("val")
        if self._live is not None:  # back to the weights being trained
            self.net.load_state_dict(self._live)
            self._live = None

    def on_test_epoch_start(self) -> None:
        self._buf.pop("test", None)

    def on_test_epoch_end(self) -> None:
        super().on_test_epoch_end()
        self._log_corpus("test")

    def training_in_fit(self) -> bool:
        return self.trainer.state.fn == "fit"

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """With checkpoint averaging, the checkpoint holds the average that was validated."""
        if self._averaged is not None:
            sd = checkpoint["state_dict"]
            for k, v in self._averaged.items():
                sd[f"net.{k}"] = v.clone()

    # -- report extras -------------------------------------------------------------------
    def report_extras(self, trainer: Any, datamodule: Any) -> dict[str, Any]:
        n = int(self.hparams.align_sentences)
        if n <= 0 or not hasattr(self.net, "alignments"):
            return {}
        ds = datamodule.splits["test"]
        items = [ds[i] for i in range(min(n, len(ds)))]
        batch = datamodule.collate(items)
        extra = alignment_extras(self, batch)
        return {ALIGNMENT_KEY: extra} if extra else {}


def _new_buffer() -> dict[str, Any]:
    # nll/tokens: device tensors while the epoch runs; pending: (src, src_mask, refs) to decode
    # sizes: sentences per decoded batch (the test items' batch order)
    return {"nll": 0.0, "tokens": 0, "hyps": [], "refs": [], "decode_s": 0.0, "pending": [], "sizes": []}


def merge_buffers(bufs: list[dict[str, Any]]) -> dict[str, Any]:
    """One corpus from every rank's evaluation buffer: NLL and tokens summed, hypotheses and
    references concatenated in rank order (each still beside its own reference: corpus BLEU and
    chrF sum sentence statistics, so the order does not matter) and ``decode_s`` the slowest
    rank's (the ranks decode at the same time)."""
    out = _new_buffer()
    for buf in bufs:
        out["nll"] += buf["nll"]
        out["tokens"] += buf["tokens"]
        out["hyps"] += buf["hyps"]
        out["refs"] += buf["refs"]
        out["decode_s"] = max(out["decode_s"], buf["decode_s"])
    return out


@torch.no_grad()
def alignment_extras(module: TranslationModule, batch: dict[str, Any]) -> dict[str, Any] | None:
    """Cross-attention of the model's translations (``test_decoder``) of ``batch``:
    ``{"kind", "heads", "sentences": [{"src": [pieces], "hyp": [pieces], "ref": str, "hyp_text": str,
    "weights": H x T x S ints 0-100 (percent)}]}``; ``None`` for a model without attention."""
    net, tok = module.net, module.tokenizer
    was = net.training
    net.eval()
    try:
        dev = next(net.parameters()).device
        src, src_mask = batch["src"].to(dev), batch["src_mask"].to(dev)
        hyp = module.translate(src, src_mask, module.hparams.test_decoder)  # (B, L)
        tgt_in = torch.cat([torch.full_like(hyp[:, :1], BOS), hyp[:, :-1]], 1)
        w = net.alignments(src, src_mask, tgt_in)  # (B, H, T, S) | None
    finally:
        net.train(was)
    if w is None:
        return None
    sentences = []
    for b in range(src.shape[0]):
        s_len = int(src_mask[b].sum())
        ids = hyp[b].tolist()
        t_len = ids.index(EOS) + 1 if EOS in ids else len(ids)
        wb = (w[b, :, :t_len, :s_len].float().cpu() * 100).round().to(torch.int16)  # (H, T, S)
        sentences.append({
            "src": tok.pieces(src[b, :s_len].tolist()),
            "hyp": tok.pieces(ids[:t_len]),
            "ref": batch["refs"][b],
            "hyp_text": tok.decode(ids),
            "weights": wb.tolist(),
        })
    return {"kind": type(net).__name__, "heads": int(w.shape[1]), "sentences": sentences}


def make_module(net: nn.Module, data_info: dict | None = None, **train_params: Any) -> TranslationModule:
    """``Task.make_module``: the module around ``net`` with the dataset's tokeniser."""
    module = TranslationModule(net, **train_params)
    module.tokenizer = (data_info or {}).get("tokenizer")
    return module
