"""Renamed model parameters: one name per concept across domains, old names kept as aliases.

A registration declares the parameters it renamed (``renamed={"heads": "num_heads"}``, old ->
new, on :class:`tasks.common.registry.ModelSpec`). The builder's signature has only the new
names; these helpers translate in both directions:

* :func:`current_names`: a config or a record written with the old names -> the new names
  (what a model is built with, what a suite stores); giving both names is an error;
* :func:`recorded_names`: the new names -> the names a parameter was first recorded under,
  which is what a cell id hashes (:func:`benchmarks.config.suite.cell_id`), so that renaming a
  parameter never changes an id.

Parameter names
---------------
One name per concept across every model builder, torch.nn's where it has one (issue 32):

* ``d_model``: the width of a model's main per-position (per-token, per-frame, per-patch,
  per-node) representation: a Transformer's width, a sequence or graph CNN's channels (POS
  ``cnn``, speech ``cnn``, ``convs2s``, ``gcn``), an MLP's hidden width (the ``mlp`` floors,
  ``frame_mlp``, ``patch_bag``).
* ``hidden_size``: the state size of a classic RNN, per direction (``nn.LSTM``/``nn.GRU``'s name
  and meaning): ``bilstm``, ``row_rnn``, the translation ``rnn_*`` encoder/decoder, ``ggnn`` (its
  GRU node state). Speech ``lstm`` keeps ``d_model``: its value is the frame representation's
  width (input projection and output, both directions together; ``d_model / 2`` per direction),
  so calling it ``hidden_size`` would give that name a second meaning. Modern recurrences
  (``modern_rnn``) keep ``d_model`` and ``d_state``: a residual stream's width, a separate state.
* ``embedding_dim``: a token embedding's width (``nn.Embedding``'s name) where a model has one
  embedding (translation ``rnn_*``, ``convs2s``). The POS taggers keep ``word_dim``,
  ``char_dim`` and ``char_out``: two embeddings and a char encoder, each name qualified by
  what it embeds.
* ``head_dim``: the width of one attention head where it is set directly and the layer width
  follows (``num_heads * head_dim``): GAT's ``graph_attention`` (PyG's per-head channels).
* ``base_channels`` (image CNNs): the first stage's channels, a ResNet concept; ``widths``
  (vision ``cnn``): the channels of each stage. Neither is a per-position width.
* ``num_layers``: depth (``nn.LSTM``, ``nn.TransformerEncoder``, PyG's ``GatedGraphConv``):
  layers, blocks, GGNN steps, convolutions per stage (vision ``cnn``). Encoder-decoders say
  ``enc_layers``/``dec_layers``; ``resnet`` keeps torchvision's ``layers`` (blocks per stage,
  a list).
* ``kernel_size`` (``nn.Conv1d``), ``num_heads``, ``dim_feedforward`` (``nn.TransformerEncoderLayer``),
  ``dropout``. The ViT keeps ``mlp_ratio`` (timm's): a ratio of ``d_model``, not a width.
* ``pattern``: the attention pattern, everywhere (with ``pattern_params``); ``score``: how a
  query scores a key (graph ``additive``/``dot``, the translation RNN's
  ``bahdanau``/``luong_dot``/``luong_general``/``none``).

Renamed so far (old -> new, per builder: the ``renamed=`` of each registration): graphs
``heads``, ``layers``, ``hidden`` (-> ``head_dim`` in GAT, ``d_model`` in ``gcn``/``mlp``,
``hidden_size`` in ``ggnn``), ``steps``; POS ``heads``, ``layers``, ``ff``, ``hidden``,
``channels``, ``kernel``; translation ``emb_dim``, ``hidden``, ``attention`` (-> ``score``);
speech ``cnn``'s ``num_blocks``, ``kernel``;
vision ``vit``'s ``attention`` (-> ``pattern``), ``cnn``'s ``convs``, ``hidden``.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["current_names", "recorded_names", "check_renamed"]


def current_names(params: Mapping[str, Any], renamed: Mapping[str, str], *,
                  what: str = "model") -> tuple[dict[str, Any], list[str]]:
    """``params`` with every old name of ``renamed`` replaced by its new name (order kept), and
    the old names that were used. A ``ValueError`` (one line) when an old and its new name are
    both given."""
    if not renamed or not any(k in renamed for k in params):
        return dict(params), []
    both = [f"{old!r} and {renamed[old]!r}" for old in params if old in renamed and renamed[old] in params]
    if both:
        raise ValueError(f"{what}: {'; '.join(both)} name the same parameter (the first is the deprecated "
                         "name of the second): give it once, under the new name")
    used = [k for k in params if k in renamed]
    return {renamed.get(k, k): v for k, v in params.items()}, used


def recorded_names(params: Mapping[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """``params`` with every new name of ``renamed`` back under its old name: the names the
    parameters were first recorded under (what a cell id hashes). Old names pass unchanged."""
    if not renamed:
        return dict(params)
    back = {new: old for old, new in renamed.items()}
    return {back.get(k, k): v for k, v in params.items()}


def check_renamed(name: str, params: Mapping[str, Any], renamed: Mapping[str, str]) -> None:
    """A ``ValueError`` unless every new name of ``renamed`` is a parameter and no old name is."""
    bad = [f"{old!r} -> {new!r}" for old, new in renamed.items() if new not in params or old in params]
    if bad:
        raise ValueError(f"model {name!r}: renamed={dict(renamed)!r}: {', '.join(bad)} must map an old name "
                         "that is no longer a parameter to one of its params")
