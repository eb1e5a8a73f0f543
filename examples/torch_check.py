#!/usr/bin/env python3
"""Check a PyTorch implementation of phax ops against `phax oracle`.

Writes each op's inputs to a safetensors file (numpy only, no safetensors
package needed), runs `phax oracle OP IN OUT`, reads OUT, and compares the
oracle's outputs and gradients with torch autograd on the same inputs and the
same upstream gradient. Run with Debian's python3 (python3-numpy, python3-torch):

    /usr/bin/python3 examples/torch_check.py [--phax build/phax] [--seed N]

The torch code below is written from docs/spec.md, independently of phax's C
code; replace it with your own implementation to check yours.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:  # the example needs torch for autograd (exit 77: the test suite's skip)
    print("torch_check.py: needs torch (Debian: apt-get install python3-torch; run with /usr/bin/python3)",
          file=sys.stderr)
    sys.exit(77)

torch.set_default_dtype(torch.float64)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402


def oracle(phax, op, tensors, meta):
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        write_safetensors(fin, tensors, meta)
        r = subprocess.run([phax, "oracle", op, fin, fout], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"phax oracle {op} failed: {r.stderr.strip()}")
        return read_safetensors(fout)[0]


# ---------------------------------------------------------------------------
# Reference implementations in torch, from docs/spec.md.
def rope(x, base=10000.0, pos0=0):  # x: (B, T, H, dh), rotate-half pairing (i, i + dh/2)
    B, T, H, dh = x.shape
    half = dh // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / dh)
    ang = (pos0 + torch.arange(T, dtype=torch.float64))[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).to(x.dtype)[None, :, None, :], torch.sin(ang).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention(q, k, v, logscale, score, window):  # q: (B,T,Hq,dh), k: (B,T,Hkv,dh), v: (B,T,Hkv,dv)
    B, T, Hq, dh = q.shape
    g = Hq // k.shape[2]
    q, k = rope(q), rope(k)
    k = k.repeat_interleave(g, dim=2)  # query head h reads kv head h // g
    v = v.repeat_interleave(g, dim=2)
    if score == "cosine":
        q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        scale = torch.exp(logscale.clamp(max=math.log(100.0)))[None, :, None, None]
    else:
        scale = 1.0 / math.sqrt(dh)
    s = torch.einsum("bthd,bshd->bhts", q, k) * scale
    t = torch.arange(T)
    diff = t[:, None] - t[None, :]
    visible = (diff >= 0) & ((diff < window) if window > 0 else True)
    s = s.masked_fill(~visible, float("-inf"))
    return torch.einsum("bhts,bshd->bthd", torch.softmax(s, dim=-1), v)


def dss_kernel(lre, lim, cre, cim, T):  # K: (H, T)
    lam = torch.complex(-torch.exp(lre), torch.exp(lim))
    C = torch.complex(cre, cim) * (torch.exp(lam) - 1) / lam
    l = torch.arange(T, dtype=torch.float64)
    return torch.real(C @ torch.exp(lam[:, None] * l[None, :]))


def ssm_conv(u, K, D):  # u: (B, T, H), K: (H, T), D: (H)
    B, T, H = u.shape
    y = torch.zeros_like(u)
    for t in range(T):
        y[:, t] = torch.einsum("bsh,hs->bh", u[:, : t + 1], K[:, : t + 1].flip(-1))
    return y + D * u


def mlstm_parallel(q, k, v, igate, fgate, eps=1e-6):  # q, k: (B,T,H,dqk), v: (B,T,H,dv), gates (B,T,H)
    B, T, H, dqk = q.shape
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, T, d)
    ig, fg = igate.transpose(1, 2), fgate.transpose(1, 2)
    lf = torch.nn.functional.logsigmoid(fg)
    # F[t, s] = Σ_{r=s+1..t} logσ(f̃_r), accumulated directly (not as a difference
    # of cumulative sums, which loses precision for long sequences).
    rows = []
    for t in range(T):
        acc, row = torch.zeros_like(lf[..., 0]), [None] * T
        for s in range(T - 1, -1, -1):
            if s > t:
                row[s] = torch.full_like(acc, float("-inf"))
            else:
                row[s] = acc
                acc = acc + lf[..., s]
        rows.append(torch.stack(row, dim=-1))
    F = torch.stack(rows, dim=-2)
    D = F + ig[..., None, :]
    m = D.max(dim=-1, keepdim=True).values
    Cb = (q @ k.transpose(-1, -2)) / math.sqrt(dqk) * torch.exp(D - m)
    n = torch.maximum(Cb.sum(-1, keepdim=True).abs(), torch.exp(-m))
    return ((Cb @ v) / (n + eps)).transpose(1, 2)


# ---------------------------------------------------------------------------
def gdn(q, k, v, g, beta, initial_state, scale=None):  # q, k: (B,T,H,dk), v: (B,T,H,dv), g, beta: (B,T,H)
    """Gated DeltaNet, step by step: S ← e^g S (I − β k̂k̂ᵀ) + β v k̂ᵀ, o = S q̂; the state kept as
    flash-linear-attention keeps it, (B, H, dk, dv), so S here is its transpose."""
    dk = q.shape[-1]
    scale = dk ** -0.5 if scale is None else scale
    qn = scale * q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    kn = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    S, outs = initial_state, []
    for t in range(q.shape[1]):
        a, b = torch.exp(g[:, t])[..., None, None], beta[:, t][..., None, None]
        kt = kn[:, t]
        Sk = torch.einsum("bhkv,bhk->bhv", S, kt)  # S_{t-1} k̂ (before the decay)
        S = a * S + b * torch.einsum("bhk,bhv->bhkv", kt, v[:, t] - a[..., 0] * Sk)
        outs.append(torch.einsum("bhkv,bhk->bhv", S, qn[:, t]))
    return torch.stack(outs, 1), S


def check(phax, name, op, fn, inputs, meta, out_name, tol, rng):
    """Run torch fn with autograd and the oracle on the same inputs; compare."""
    ts = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items() if v.dtype == np.float64}
    y = fn(**ts)
    gy = rng.standard_normal(y.shape)
    y.backward(torch.tensor(gy))
    res = oracle(phax, op, {**inputs, f"grad.{out_name}": gy}, meta)
    worst = 0.0
    pairs = [(out_name, y.detach().numpy())] + [(f"grad.{k}", t.grad.numpy()) for k, t in ts.items()]
    for key, ref in pairs:
        got = res[key]
        err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-300)
        worst = max(worst, err) if np.isfinite(err) else math.inf
    ok = worst <= tol
    print(f"{name:<44} worst rel. err {worst:9.2e}  tol {tol:.0e}  {'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phax", default=os.environ.get("PHAX", "build/phax"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    R = lambda *s, lo=-1.0, hi=1.0: rng.uniform(lo, hi, s)  # noqa: E731
    # Both sides compute in float64, summing the same terms in different orders:
    # the difference is a few ulps per term times the number of terms (≤ ~1e3
    # here), so 1e-10 relative to the largest value leaves ample margin while any
    # wrong formula misses it by many orders of magnitude.
    tol = 1e-10
    ok = True
    B, T = 2, 9
    for score, Hq, Hkv, w in [("dot", 4, 2, 3), ("cosine", 4, 2, 3), ("cosine", 3, 1, 0), ("dot", 2, 2, 20)]:
        q, k, v = R(B, T, Hq, 6), R(B, T, Hkv, 6), R(B, T, Hkv, 5)
        ls = rng.uniform(math.log(2), math.log(20), Hq)
        inputs = {"q": q, "k": k, "v": v}
        if score == "cosine":
            inputs["logscale"] = ls
        fn = (lambda q, k, v, logscale=None, s=score, w=w: attention(q, k, v, logscale, s, w))
        ok &= check(a.phax, f"attention {score} GQA {Hq}:{Hkv} window {w}", "attention", fn, inputs,
                    {"score": score, "window": w}, "y", tol, rng)
    H, N = 3, 5
    lre, lim = R(N, lo=-2, hi=0.5), R(N, lo=-2, hi=1)
    cre, cim = R(H, N), R(H, N)
    ok &= check(a.phax, "gss dss_kernel (H 3, N 5, T 9)", "dss_kernel",
                lambda lambda_re, lambda_im, c_re, c_im: dss_kernel(lambda_re, lambda_im, c_re, c_im, T),
                {"lambda_re": lre, "lambda_im": lim, "c_re": cre, "c_im": cim}, {"T": T}, "k", tol, rng)
    u, d = R(B, T, H), R(H)
    ok &= check(a.phax, "gss ssm_conv", "ssm_conv", lambda u, k, d: ssm_conv(u, k, d),
                {"u": u, "k": R(H, T), "d": d}, {}, "y", tol, rng)
    ok &= check(a.phax, "gss ssm_recurrent (= kernel + conv)", "ssm_recurrent",
                lambda u, lambda_re, lambda_im, c_re, c_im, d: ssm_conv(u, dss_kernel(lambda_re, lambda_im, c_re, c_im, T), d),
                {"u": u, "lambda_re": lre, "lambda_im": lim, "c_re": cre, "c_im": cim, "d": d}, {}, "y", tol, rng)
    Hm, dqk, dv = 2, 3, 5
    ml = {"q": R(B, T, Hm, dqk), "k": R(B, T, Hm, dqk), "v": R(B, T, Hm, dv),
          "igate": R(B, T, Hm, lo=-3, hi=3), "fgate": R(B, T, Hm, lo=1, hi=5)}
    ok &= check(a.phax, "mlstm parallel form", "mlstm", mlstm_parallel, ml, {"form": "parallel"}, "h", tol, rng)
    # The recurrent form has another stabiliser; with eps = 1e-6 it differs from
    # the parallel one by at most eps·|h| relative (docs/spec.md §2.9): tolerance 1e-5.
    ok &= check(a.phax, "mlstm recurrent form vs torch parallel", "mlstm", mlstm_parallel, ml,
                {"form": "recurrent"}, "h", 1e-5, rng)
    # Gated DeltaNet: two outputs (o and the final state), an upstream gradient for each.
    dk, dv = 6, 5
    gi = {"q": R(B, T, Hm, dk), "k": R(B, T, Hm, dk), "v": R(B, T, Hm, dv), "g": R(B, T, Hm, lo=-0.7, hi=0.0),
          "beta": R(B, T, Hm, lo=0.1, hi=0.9), "initial_state": R(B, Hm, dk, dv, lo=-0.5, hi=0.5)}
    ts = {key: torch.tensor(val, requires_grad=True) for key, val in gi.items()}
    o, S = gdn(**ts)
    go, gS = rng.standard_normal(o.shape), rng.standard_normal(S.shape)
    ((o * torch.tensor(go)).sum() + (S * torch.tensor(gS)).sum()).backward()
    res = oracle(a.phax, "gdn", {**gi, "grad.o": go, "grad.final_state": gS}, {})
    pairs = [("o", o.detach().numpy()), ("final_state", S.detach().numpy())]
    pairs += [(f"grad.{key}", t.grad.numpy()) for key, t in ts.items()]
    worst = max(np.max(np.abs(res[key] - ref)) / max(np.max(np.abs(ref)), 1e-300) for key, ref in pairs)
    print(f"{'gated deltanet (o, final state, 6 gradients)':<44} worst rel. err {worst:9.2e}  tol {tol:.0e}  "
          f"{'ok' if worst <= tol else 'MISMATCH'}")
    ok &= bool(worst <= tol)
    print("all agree" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
