"""Batched greedy and beam-search decoding, shared by every translation model.

A model takes part through a two-method decoder-step interface (:class:`Seq2Seq`):

* ``encode(src (B, S), src_mask (B, S)) -> state``: a dict of tensors, each batch-first, so
  that search can expand and reorder hypotheses with one ``index_select`` per tensor;
* ``decode_step(state, prefix (B, t)) -> (logits (B, V), state)``: scores of the next token
  after ``prefix`` (which starts with BOS). Recurrent models read only ``prefix[:, -1]`` and
  carry their hidden state in ``state``; the Transformer does too, with its decoder's key/value
  cache in ``state`` (``(B, H, t, Dh)`` tensors that grow by one position a step), and ConvS2S
  with each decoder layer's last ``kernel_size - 1`` inputs (``(B, k - 1, H)``, a fixed size).

Beam search keeps the ``beam`` best hypotheses of each sentence, finished ones included, ranked by
the GNMT length-normalised score ``log P(y) / lp(|y|)`` with ``lp(n) = ((5 + n) / 6) ** alpha``
(Wu et al. 2016; ``|y|`` counts the generated tokens including EOS). A finished hypothesis is
kept as it is (its score frozen); a sentence is done when all its kept hypotheses have ended, and
decoding stops early when every sentence is done, or at the length limit ``src_len + max_len_b``
(``src_len`` counts the source EOS) where EOS is forced. With ``beam=1`` this is exactly greedy
search.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["Seq2Seq", "State", "length_penalty", "reorder_state", "greedy_search", "beam_search"]

State = dict[str, Tensor]


class Seq2Seq(Protocol):
    def encode(self, src: Tensor, src_mask: Tensor) -> State: ...

    def decode_step(self, state: State, prefix: Tensor) -> tuple[Tensor, State]: ...


def length_penalty(length: Tensor, alpha: float) -> Tensor:
    """GNMT ``((5 + n) / 6) ** alpha`` (``alpha = 0``: no normalisation)."""
    return ((5.0 + length.float()) / 6.0) ** alpha


def reorder_state(state: State, index: Tensor) -> State:
    """Every tensor of ``state`` indexed along its batch dim 0 (expand or reorder hypotheses)."""
    return {k: v.index_select(0, index) for k, v in state.items()}


def _max_lengths(src_mask: Tensor, max_len_b: int) -> Tensor:
    return src_mask.sum(1) + int(max_len_b)  # (B,)


@torch.no_grad()
def greedy_search(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, *, bos: int, eos: int, pad: int, max_len_b: int = 50,
    alpha: float = 0.6,
) -> tuple[Tensor, Tensor]:
    """The most probable next token at every step. Returns ``(tokens (B, L), scores (B,))``:
    tokens without BOS, ending in EOS then PAD; scores are ``log P / lp`` (as beam search's)."""
    b = src.shape[0]
    max_len = _max_lengths(src_mask, max_len_b)  # (B,)
    state = model.encode(src, src_mask)
    prefix = torch.full((b, 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    logp_sum = torch.zeros(b, device=src.device)
    lengths = torch.zeros(b, dtype=torch.long, device=src.device)
    for t in range(int(max_len.max())):
        logits, state = model.decode_step(state, prefix)
        logp = F.log_softmax(logits.float(), dim=-1)  # (B, V)
        logp[:, pad] = float("-inf")
        logp[:, bos] = float("-inf")
        tok = logp.argmax(-1)  # (B,)
        tok = torch.where(t + 1 >= max_len, torch.full_like(tok, eos), tok)  # the last allowed position
        step = logp.gather(1, tok[:, None]).squeeze(1)
        logp_sum = logp_sum + torch.where(done, torch.zeros_like(step), step)
        lengths = lengths + (~done).long()
        tok = torch.where(done, torch.full_like(tok, pad), tok)
        prefix = torch.cat([prefix, tok[:, None]], 1)
        done = done | (tok == eos)
        if bool(done.all()):
            break
    return prefix[:, 1:], logp_sum / length_penalty(lengths, alpha)


@torch.no_grad()
def beam_search(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, *, beam: int = 4, bos: int, eos: int, pad: int,
    alpha: float = 0.6, max_len_b: int = 50,
) -> tuple[Tensor, Tensor]:
    """Batched beam search (see the module docstring). Returns the best hypothesis of each
    sentence, ``(tokens (B, L), scores (B,))`` as :func:`greedy_search`."""
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        raise ValueError(f"beam={beam!r}; must be an int >= 1")
    b, k, dev = src.shape[0], beam, src.device
    max_len = _max_lengths(src_mask, max_len_b)[:, None]  # (B, 1)
    state = reorder_state(model.encode(src, src_mask), torch.arange(b, device=dev).repeat_interleave(k))
    prefix = torch.full((b * k, 1), bos, dtype=torch.long, device=dev)
    scores = torch.zeros(b, k, device=dev)  # raw log P of each kept hypothesis
    scores[:, 1:] = float("-inf")  # at the start only one hypothesis per sentence is real
    finished = torch.zeros(b, k, dtype=torch.bool, device=dev)
    lengths = torch.zeros(b, k, dtype=torch.long, device=dev)
    best = torch.zeros(b, device=dev)
    for t in range(int(max_len.max())):
        logits, state = model.decode_step(state, prefix)
        v = logits.shape[-1]
        logp = F.log_softmax(logits.float(), dim=-1).view(b, k, v)  # (B, K, V)
        logp[..., pad] = float("-inf")
        logp[..., bos] = float("-inf")
        force = (t + 1 >= max_len)[..., None]  # (B, 1, 1): EOS is the only allowed token
        not_eos = torch.ones(v, dtype=torch.bool, device=dev)
        not_eos[eos] = False
        logp = logp.masked_fill(force & not_eos, float("-inf"))
        # Candidates: an alive hypothesis extended by each token, normalised by its new length;
        # a finished one only as itself (in the PAD slot), with its frozen normalised score.
        cand = (scores[..., None] + logp) / length_penalty(lengths + 1, alpha)[..., None]  # (B, K, V)
        cand = cand.masked_fill(finished[..., None], float("-inf"))
        cand[..., pad] = torch.where(finished, scores / length_penalty(lengths, alpha), cand[..., pad])
        top, idx = cand.view(b, k * v).topk(k, dim=-1)  # (B, K), sorted best first
        src_beam, tok = idx // v, idx % v
        was_finished = finished.gather(1, src_beam)
        step = logp.view(b, k * v).gather(1, idx)
        scores = scores.gather(1, src_beam) + torch.where(was_finished, torch.zeros_like(step), step)
        lengths = lengths.gather(1, src_beam) + (~was_finished).long()
        tok = torch.where(was_finished, torch.full_like(tok, pad), tok)
        finished = was_finished | (tok == eos)
        flat = (torch.arange(b, device=dev)[:, None] * k + src_beam).view(-1)  # (B*K,)
        prefix = torch.cat([prefix.index_select(0, flat), tok.view(-1, 1)], 1)
        state = reorder_state(state, flat)
        best = top[:, 0]
        if bool(finished.all()):  # every kept hypothesis of every sentence has ended
            break
    out = prefix.view(b, k, -1)[:, 0, 1:]  # (B, L): the best hypothesis (topk is sorted)
    return out, best
