"""``pad_fields`` (one scatter per field) against ``torch.nn.utils.rnn.pad_sequence`` (a copy per
example), the reference, on fresh random batches: 1-D and ``(L, F)`` fields, every dtype the
tasks pad, lengths from 1 up, several fields of one example at once."""

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from tasks.common.data import pad_fields, pad_sequences


def _reference(seqs, pad):
    lengths = torch.tensor([s.shape[0] for s in seqs])
    out = pad_sequence(seqs, batch_first=True, padding_value=pad)
    return out, torch.arange(out.shape[1])[None, :] < lengths[:, None]


@pytest.mark.parametrize("trial", range(5))
def test_pad_fields_equals_pad_sequence_per_field(trial):
    g = torch.Generator().manual_seed(trial)
    B = int(torch.randint(1, 40, (1,), generator=g))
    lengths = torch.randint(1, 25, (B,), generator=g).tolist()
    items = [(torch.randint(0, 1000, (n,), generator=g),  # ids
              torch.rand(n, 7, generator=g),  # (L, F) features
              torch.rand(n, generator=g) < 0.3,  # flags
              torch.randn(n, generator=g, dtype=torch.float64))
             for n in lengths]
    pads = (1, -1.5, False, 0.25)
    got, mask = pad_fields(items, pads)
    for k, pad in enumerate(pads):
        want, want_mask = _reference([it[k] for it in items], pad)
        assert got[k].dtype == want.dtype and torch.equal(got[k], want), k
        assert torch.equal(mask, want_mask)
    one, m1 = pad_sequences([it[1] for it in items], -1.5)
    assert torch.equal(one, got[1]) and torch.equal(m1, mask)


def test_pad_fields_keeps_single_examples_and_rejects_an_empty_batch():
    out, mask = pad_fields([(torch.tensor([4]),)], (0,))
    assert out[0].tolist() == [[4]] and mask.tolist() == [[True]]
    with pytest.raises(ValueError, match="empty batch"):
        pad_fields([], (0,))
