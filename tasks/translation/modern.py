"""Modern-recurrence encoder-decoder (issue 31): ``modern_rnn``, family ``rnn``, kind ``modern``.

:class:`ModernSeq2Seq` keeps the translation models' conventions (joint vocabulary, one embedding
table for source, target and output) and the search interface of :mod:`tasks.translation.search`
(``encode``, ``decode_step``), so greedy and beam search run it unchanged.

* Encoder: :class:`tasks.common.recurrence.RecurrenceContext`, a bidirectional stack of recurrence
  ``cell`` (mingru, minlstm, s4d, mamba2, lru) over the padded source; the backward pass is reversed
  within each sentence's length, so padding never reaches a real position.
* Decoder: a causal :class:`attn_core.recurrent.RecurrentEncoder` of the same cell. Its input at
  ``t`` is ``W [e(y_{t-1}); c]`` with ``c`` the mean of the encoder states over the real source
  positions (a fixed context, known before decoding starts). Teacher forcing is ONE parallel scan
  over the target; decoding advances the same stack one token at a time through its ``step()``,
  its state kept in the search state (``"dec.<layer>.<key>"``, batch-first, so beam search
  reorders it like any other tensor).
* ``score="bahdanau"``: the decoder output ``s_t`` queries the encoder states with
  :class:`attn_core.AdditiveAttention`, ``c_t = attn(s_t, enc)``, and the context is combined
  after the recurrence: ``o_t = tanh(W [s_t; c_t; e(y_{t-1})])``. The query never feeds back into
  the recurrence (no input feeding), which is what keeps training one parallel pass: every
  ``s_t`` exists before any attention is computed, so all ``T`` queries attend at once.
* ``score="none"``: the bottleneck ablation, ``c_t = c`` (the mean encoder state) at every step;
  it differs from ``bahdanau`` only by the attention.

Logits are ``E o_t`` with ``E`` the (tied) embedding table.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn

import attn_core
from attn_core.recurrent import RecurrentEncoder
from tasks.common.recurrence import RecurrenceContext, check_cell, recurrence_params, register_cell_presets
from tasks.common.registry import Bounds, register_model
from tasks.translation.models import check_vocab, shared_embedding, vocab_sizes
from tasks.translation.search import State

__all__ = ["ModernSeq2Seq", "SCORES", "modern_rnn"]

#: ``score``: additive attention over the encoder states, or none (the fixed mean context)
SCORES = ("bahdanau", "none")
_DEC = "dec."  # prefix of the decoder recurrence's keys in the search state


def _check_score(score: object) -> None:
    if score not in SCORES:
        raise ValueError(f"score={score!r}; valid: {', '.join(SCORES)}")


def check_modern(params: Mapping[str, Any]) -> None:
    """The registration's config check: an unknown ``cell`` or ``score`` is refused before any cell runs."""
    check_cell(params)
    _check_score(params.get("score"))


class ModernSeq2Seq(nn.Module):
    """Bidirectional recurrent encoder, causal recurrent decoder with ``step()``, Bahdanau or no
    attention after the recurrence (see the module docstring)."""

    def __init__(
        self,
        vocab_size: int,
        *,
        embedding_dim: int = 256,
        d_model: int = 256,
        d_state: int | None = None,
        enc_layers: int = 2,
        dec_layers: int = 2,
        dropout: float = 0.2,
        cell: str = "mingru",
        score: str = "bahdanau",
        pad_id: int = 0,
        backend: str = "pure",
    ) -> None:
        super().__init__()
        check_vocab(vocab_size)
        _check_score(score)
        name, params = recurrence_params(cell, d_state, backend)
        self.score = score
        self.embed = shared_embedding(vocab_size, embedding_dim, pad_id)  # tied with the output
        self.drop = nn.Dropout(dropout)
        self.encoder = RecurrenceContext(embedding_dim, cell=cell, d_model=d_model, d_state=d_state,
                                         num_layers=enc_layers, dropout=dropout, backend=backend)
        self.dec_in = nn.Linear(embedding_dim + d_model, d_model)
        self.decoder = RecurrentEncoder(name, d_model, dec_layers, dropout=dropout, params=params)
        self.attn = attn_core.AdditiveAttention(d_model, d_model, hidden_dim=d_model) if score == "bahdanau" else None
        self.combine = nn.Linear(2 * d_model + embedding_dim, embedding_dim)
        self.out = nn.Linear(embedding_dim, vocab_size, bias=False)
        self.out.weight = self.embed.weight  # tied: one table for source, target and output

    # -- encoder -----------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Tensor) -> State:
        """``{"mask", "ctx", "dec.*"}`` plus ``"values"``/``"proj_keys"`` with Bahdanau; batch-first."""
        enc = self.encoder(self.drop(self.embed(src)), src_mask)  # (B, S, D), zeros at padding
        n = src_mask.sum(1, keepdim=True).clamp(min=1).to(enc.dtype)  # (B, 1); an empty source: zero context
        state: State = {"mask": src_mask, "ctx": enc.sum(1) / n}  # ctx (B, D): the mean over real positions
        if self.attn is not None:
            state["values"] = enc
            state["proj_keys"] = self.attn.precompute_keys(enc)  # (B, S, D), once per source
        dec = self.decoder.init_state(src.shape[0], device=enc.device, dtype=enc.dtype)
        return {**state, **{_DEC + k: v for k, v in dec.items()}}

    # -- decoder -----------------------------------------------------------------------
    def _inputs(self, tokens: Tensor, state: State) -> tuple[Tensor, Tensor]:
        """``tokens (B, T)`` -> ``(embeddings (B, T, E), decoder inputs (B, T, D))``."""
        e = self.drop(self.embed(tokens))  # (B, T, E)
        ctx = state["ctx"][:, None].expand(-1, tokens.shape[1], -1)  # (B, T, D)
        return e, self.dec_in(torch.cat([e, ctx], -1))

    def _attend(self, s: Tensor, state: State) -> tuple[Tensor, Tensor]:
        """All ``T`` queries ``s (B, T, D)`` at once -> ``(context (B, T, D), weights (B, T, S))``:
        one batched call of the attention with the source repeated per query (a view when T = 1)."""
        b, t, _ = s.shape

        def per_query(x: Tensor) -> Tensor:  # (B, ...) -> (B * T, ...)
            return x[:, None].expand(b, t, *x.shape[1:]).reshape(b * t, *x.shape[1:])

        values = per_query(state["values"])  # (B*T, S, D)
        ctx, w = self.attn(s.reshape(b * t, -1), values, values, per_query(state["mask"]),  # type: ignore[misc]
                           projected_keys=per_query(state["proj_keys"]))
        return ctx.view(b, t, -1), w.view(b, t, -1)

    def _output(self, s: Tensor, e: Tensor, state: State) -> tuple[Tensor, Tensor | None]:
        """Decoder outputs ``s (B, T, D)`` and embeddings ``e (B, T, E)`` -> ``(logits (B, T, V),
        attention weights (B, T, S) | None)``."""
        if self.attn is None:
            ctx, w = state["ctx"][:, None].expand_as(s), None  # (B, T, D): the bottleneck
        else:
            ctx, w = self._attend(s, state)
        o = torch.tanh(self.combine(torch.cat([s, ctx, e], -1)))  # (B, T, E)
        return self.out(self.drop(o)), w

    def _teacher_forced(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """One parallel pass: encoder, the decoder's causal scan over ``tgt_in``, all attention at once."""
        state = self.encode(src, src_mask)
        e, x = self._inputs(tgt_in, state)
        s = self.decoder(x)  # (B, T, D), causal: target padding (at the end) never reaches a real token
        return self._output(s, e, state)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        return self._teacher_forced(src, src_mask, tgt_in)[0]  # (B, T, V)

    def decode_step(self, state: State, prefix: Tensor) -> tuple[Tensor, State]:
        """Logits ``(B, V)`` of the token after ``prefix``: only ``prefix[:, -1]`` is read, the
        decoder advances one position through ``step()`` from the state's recurrence state."""
        e, x = self._inputs(prefix[:, -1:], state)  # (B, 1, E), (B, 1, D)
        rec = {k[len(_DEC):]: v for k, v in state.items() if k.startswith(_DEC)}
        s, rec = self.decoder.step(x[:, 0], rec)  # (B, D)
        logits, _ = self._output(s[:, None], e, state)
        return logits[:, 0], {**state, **{_DEC + k: v for k, v in rec.items()}}

    def alignments(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor | None:
        """The attention weights ``(B, 1, T, S)`` (one head), ``None`` without attention."""
        w = self._teacher_forced(src, src_mask, tgt_in)[1]
        return None if w is None else w[:, None]


# ``score`` is declared: the registry's name rule reads it as the graph layers' score (dot, additive)
@register_model(family="rnn", kind="modern", in_all=False, check=check_modern,
                bounds={"score": Bounds(choices=SCORES)},
                omit_when_default=("backend",))  # cell ids from before `backend` stay valid
def modern_rnn(data_info: Mapping[str, Any], *, embedding_dim: int = 256, d_model: int = 256,
               d_state: int | None = None, enc_layers: int = 2, dec_layers: int = 2, dropout: float = 0.2,
               cell: str = "mingru", score: str = "bahdanau", backend: str = "pure") -> ModernSeq2Seq:
    """bidirectional modern-recurrence encoder, causal decoder (cell: mingru, minlstm, s4d, mamba2, lru;
    score: bahdanau, none)"""
    return ModernSeq2Seq(**vocab_sizes(data_info), embedding_dim=embedding_dim, d_model=d_model, d_state=d_state,
                         enc_layers=enc_layers, dec_layers=dec_layers, dropout=dropout, cell=cell, score=score,
                         backend=backend)


register_cell_presets(modern_rnn, "recurrent encoder-decoder")
