"""Each recurrent layer written as the plain sequential loop of its paper, from the layer's own
parameters (no scan, no FFT, no chunks, no Conv1d): the references of the model tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attn_core.recurrent import LRU, S4D, Mamba2, MinRNN


def min_rnn_loop(m: MinRNN, x):
    w, bias = m.in_proj.weight, m.in_proj.bias
    n = m.hidden_size
    h = torch.zeros(x.shape[0], n, dtype=x.dtype)
    ys = []
    for t in range(x.shape[1]):
        pre = x[:, t] @ w.T + bias  # (B, gates * n)
        if m.kind == "gru":
            z, cand = torch.sigmoid(pre[:, :n]), pre[:, n:]
            h = (1 - z) * h + z * cand
        else:
            f, i, cand = torch.sigmoid(pre[:, :n]), torch.sigmoid(pre[:, n : 2 * n]), pre[:, 2 * n :]
            h = f / (f + i) * h + i / (f + i) * cand
        ys.append(m.out_proj(h))
    return torch.stack(ys, 1)


def s4d_loop(m: S4D, x):
    a = torch.complex(-torch.exp(m.log_A_real), m.A_imag)  # (H, N/2)
    a_bar = torch.exp(a * torch.exp(m.log_dt)[:, None])
    b_bar = (a_bar - 1) / a
    c = torch.view_as_complex(m.C)
    s = torch.zeros(x.shape[0], *a.shape, dtype=a.dtype)
    ys = []
    for t in range(x.shape[1]):
        s = a_bar * s + b_bar * x[:, t, :, None]
        y = 2 * (c * s).sum(-1).real + m.D * x[:, t]
        ys.append(F.glu(m.out_proj(F.gelu(y)), -1))
    return torch.stack(ys, 1)


def mamba2_loop(m: Mamba2, u):
    bsz, length, _ = u.shape
    proj = u @ m.in_proj.weight.T  # (B, L, .)
    z, xbc, dt_raw = proj.split([m.d_inner, m.conv_dim, m.nheads], -1)
    w = m.conv1d.weight[:, 0]  # (conv_dim, d_conv)
    conv = []
    for t in range(length):
        acc = m.conv1d.bias.expand(bsz, -1)
        for k in range(m.d_conv):
            src = t - (m.d_conv - 1) + k
            if src >= 0:
                acc = acc + w[:, k] * xbc[:, src]
        conv.append(acc)
    xbc = F.silu(torch.stack(conv, 1))
    x, b, c = xbc.split([m.d_inner, m.ngroups * m.d_state, m.ngroups * m.d_state], -1)
    per = m.nheads // m.ngroups
    s = [torch.zeros(bsz, m.headdim, m.d_state, dtype=u.dtype) for _ in range(m.nheads)]
    a = -torch.exp(m.A_log)
    ys = []
    for t in range(length):
        dt = F.softplus(dt_raw[:, t] + m.dt_bias)  # (B, H)
        xt = x[:, t].reshape(bsz, m.nheads, m.headdim)
        heads = []
        for hd in range(m.nheads):
            grp = hd // per
            bt = b[:, t, grp * m.d_state : (grp + 1) * m.d_state]  # (B, N)
            ct = c[:, t, grp * m.d_state : (grp + 1) * m.d_state]
            s[hd] = torch.exp(dt[:, hd] * a[hd])[:, None, None] * s[hd] \
                + (dt[:, hd, None] * xt[:, hd])[:, :, None] * bt[:, None, :]
            heads.append(s[hd] @ ct[..., None])
        y = torch.cat(heads, -1).transpose(1, 2) + xt * m.D[:, None]  # (B, H, P)
        g = y.reshape(bsz, -1) * F.silu(z[:, t])
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + m.norm.eps) * m.norm.weight
        ys.append(g @ m.out_proj.weight.T)
    return torch.stack(ys, 1)


def lru_loop(m: LRU, x):
    lam = torch.exp(torch.complex(-torch.exp(m.nu_log), torch.exp(m.theta_log)))
    gamma = torch.exp(m.gamma_log)
    b, c = torch.view_as_complex(m.B), torch.view_as_complex(m.C)
    h = torch.zeros(x.shape[0], m.hidden_size, dtype=lam.dtype)
    ys = []
    for t in range(x.shape[1]):
        h = lam * h + gamma * (x[:, t].to(b.dtype) @ b.T)
        ys.append((h @ c.T).real + m.D * x[:, t])
    return torch.stack(ys, 1)


#: (name, constructor kwargs, naive loop): small sizes, every option worth covering
CASES = [
    ("min_gru", MinRNN, {"hidden_size": 6, "kind": "gru"}, min_rnn_loop),
    ("min_lstm", MinRNN, {"kind": "lstm"}, min_rnn_loop),
    ("s4d", S4D, {"d_state": 8}, s4d_loop),
    ("mamba2", Mamba2, {"d_state": 4, "headdim": 4, "ngroups": 2, "chunk_size": 4, "bias": False}, mamba2_loop),
    ("lru", LRU, {"hidden_size": 6, "r_min": 0.5, "r_max": 0.99}, lru_loop),
]
D_MODEL = 8


def make(cls, kwargs, seed=0):
    """A float64 layer with every parameter perturbed (zero biases and unit D would hide bugs)."""
    torch.manual_seed(seed)
    m = cls(D_MODEL, **kwargs).double()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
    return m
