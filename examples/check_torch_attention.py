#!/usr/bin/env python3
"""Check a float32 PyTorch attention with phax.check, in process (no files).

The attention below (causal GQA with RoPE, cosine scores, a sliding window: docs/spec.md
§2.6-2.7) runs in float32 with autograd; phax.check judges its output and gradients
against the float64 oracle with the bound of `phax check` (docs/oracle.md). Replace
`attention` with your own to check yours. --bug drops the window, to see a FAIL.

    PYTHONPATH=python /usr/bin/python3 examples/check_torch_attention.py [--seed N] [--bug]

Exit 0: PASS; 1: FAIL; 77: torch is not installed (Debian: apt-get install python3-torch).
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import numpy as np  # noqa: E402

import phax  # noqa: E402

try:
    import torch
except ImportError:
    print("check_torch_attention.py: skipped: torch is not installed (Debian: apt-get install python3-torch)")
    sys.exit(77)


def rope(x, base=10000.0):
    """Rotate-half RoPE on (B, T, H, dh); the angles formed in float64, as the spec asks."""
    T, dh = x.shape[1], x.shape[3]
    half = dh // 2
    theta = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / dh)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    cos = torch.cos(ang).to(x.dtype)[None, :, None, :]
    sin = torch.sin(ang).to(x.dtype)[None, :, None, :]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def attention(q, k, v, logscale, window):
    """Causal GQA, cosine scores: (B, T, Hq, dh), (B, T, Hkv, dh), (B, T, Hkv, dv) -> (B, T, Hq, dv)."""
    T, Hq = q.shape[1], q.shape[2]
    group = Hq // k.shape[2]
    q, k = rope(q), rope(k)
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)  # head h reads kv h // group
    c = torch.exp(logscale.clamp(max=math.log(100.0)))
    z = torch.einsum("bthd,bshd->bhts", q, k) * c[None, :, None, None]
    lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    visible = (lag >= 0) & ((lag < window) if window > 0 else True)
    z = z.masked_fill(~visible, float("-inf"))
    return torch.einsum("bhts,bshd->bthd", torch.softmax(z, dim=-1), v)


def main():
    ap = argparse.ArgumentParser(description="check a float32 torch attention with phax.check")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bug", action="store_true", help="leave the window out (a FAIL)")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    B, T, Hq, Hkv, dh, window = 2, 33, 4, 2, 16, 8
    # float32 inputs: the truth is then of the very values torch computes on.
    q, k, v = (rng.standard_normal((B, T, h, dh)).astype(np.float32) for h in (Hq, Hkv, Hkv))
    logscale = np.log(rng.uniform(5, 20, Hq)).astype(np.float32)
    gy = rng.standard_normal((B, T, Hq, dh)).astype(np.float32)  # the upstream gradient, given to both sides

    ts = {n: torch.tensor(x, requires_grad=True)
          for n, x in (("q", q), ("k", k), ("v", v), ("logscale", logscale))}
    y = attention(ts["q"], ts["k"], ts["v"], ts["logscale"], 0 if a.bug else window)
    y.backward(torch.tensor(gy))
    theirs = {"y": y, **{"grad." + n: t.grad for n, t in ts.items()}}

    inputs = {"q": q, "k": k, "v": v, "logscale": logscale, "grad.y": gy, "score": "cosine", "window": window}
    rep = phax.check("attention", inputs, theirs, precision="f32")
    print(rep, end="")
    return 0 if rep.passed else 1


if __name__ == "__main__":
    sys.exit(main())
