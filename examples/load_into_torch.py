#!/usr/bin/env python3
"""Load a phax checkpoint into a PyTorch nn.Module, names as they are, and compare logits.

`Transformer` below is the `transformer` family written from docs/spec.md (§3.2, the ops of
§2, the layout of §3.6): its state_dict names are phax's parameter names, so
phax.load_checkpoint's dict goes into load_state_dict(strict=True) with no renaming. Its
float64 logits on a random batch are then compared with phax.oracle("model", ...).

    PYTHONPATH=python /usr/bin/python3 examples/load_into_torch.py [--checkpoint RUN] [--phax build/phax]

Without --checkpoint it trains one for 2 steps (phax train --family transformer, tiny sizes,
on a few generated lines) in a temporary folder. Exit 0: the logits agree (max |diff| relative
to max |logit| ≤ 1e-10); 1: they do not; 77: torch is not installed (the phax side, checkpoint
and oracle, has run by then).
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import numpy as np  # noqa: E402

import phax  # noqa: E402


def train_tiny(phax_bin, out):
    data = os.path.join(out, "data")
    os.makedirs(data)
    words = "the cat sat on a mat while one dog ran to an old red house".split()
    rng = np.random.default_rng(0)
    for name, n in (("train.txt", 200), ("valid.txt", 20)):
        with open(os.path.join(data, name), "w") as f:
            f.write("".join(" ".join(rng.choice(words, 8)) + "\n" for _ in range(n)))
    run = os.path.join(out, "run")
    cmd = [phax_bin, "train", "--family", "transformer", "--data", data, "--set", "d_model=32", "--set",
           "n_layers=2", "--set", "attn_window=5", "--seq", "16", "--batch", "4", "--steps", "2", "--warmup", "1",
           "--eval-every", "0", "--out", run]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"load_into_torch.py: {' '.join(cmd)}: {p.stderr.strip()}")
    return run


def torch_model(cfg):
    import torch
    from torch import nn

    class RMSNorm(nn.Module):  # §2.3, eps 1e-6
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return self.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def rope(x, base):  # §2.6, rotate-half, angles in float64
        T, dh = x.shape[1], x.shape[3]
        half = dh // 2
        theta = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / dh)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
        cos, sin = torch.cos(ang)[None, :, None, :].to(x.dtype), torch.sin(ang)[None, :, None, :].to(x.dtype)
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    class Attention(nn.Module):  # §2.7 inside §3.1's attention branch
        def __init__(self, c):
            super().__init__()
            d, self.hq, self.hkv, self.dh = c["d_model"], c["n_heads"], c["n_kv_heads"], c["head_dim"]
            self.cosine, self.window, self.base = c["score"] == "cosine", c["attn_window"], c["rope_base"]
            self.wq = nn.Linear(d, self.hq * self.dh, bias=False)
            self.wk = nn.Linear(d, self.hkv * self.dh, bias=False)
            self.wv = nn.Linear(d, self.hkv * self.dh, bias=False)
            self.wo = nn.Linear(self.hq * self.dh, d, bias=False)
            if self.cosine:
                self.logscale = nn.Parameter(torch.full((self.hq,), math.log(10.0)))

        def forward(self, x):
            B, T, _ = x.shape
            q = rope(self.wq(x).view(B, T, self.hq, self.dh), self.base)
            k = rope(self.wk(x).view(B, T, self.hkv, self.dh), self.base)
            v = self.wv(x).view(B, T, self.hkv, self.dh)
            g = self.hq // self.hkv
            k, v = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
            if self.cosine:
                q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
                k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
                scale = torch.exp(self.logscale.clamp(max=math.log(100.0)))[None, :, None, None]
            else:
                scale = 1.0 / math.sqrt(self.dh)
            z = torch.einsum("bthd,bshd->bhts", q, k) * scale
            lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]
            visible = (lag >= 0) & ((lag < self.window) if self.window > 0 else True)
            p = torch.softmax(z.masked_fill(~visible, float("-inf")), dim=-1)
            return self.wo(torch.einsum("bhts,bshd->bthd", p, v).reshape(B, T, self.hq * self.dh))

    class SwiGLU(nn.Module):  # §2.5
        def __init__(self, d, hid):
            super().__init__()
            self.w_gate = nn.Linear(d, hid, bias=False)
            self.w_up = nn.Linear(d, hid, bias=False)
            self.w_down = nn.Linear(hid, d, bias=False)

        def forward(self, x):
            return self.w_down(nn.functional.silu(self.w_gate(x)) * self.w_up(x))

    class Block(nn.Module):  # §3.2: pre-norm residuals
        def __init__(self, c):
            super().__init__()
            self.norm_attn, self.attn = RMSNorm(c["d_model"]), Attention(c)
            self.norm_ffn, self.ffn = RMSNorm(c["d_model"]), SwiGLU(c["d_model"], c["ffn_hidden"])

        def forward(self, x):
            x = x + self.attn(self.norm_attn(x))
            return x + self.ffn(self.norm_ffn(x))

    class Transformer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.embed = nn.Embedding(c["vocab_size"], c["d_model"])
            self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
            self.norm_f = RMSNorm(c["d_model"])
            self.lm_head = None if c["tie_embeddings"] else nn.Linear(c["d_model"], c["vocab_size"], bias=False)

        def forward(self, tokens):
            x = self.embed(tokens)
            for b in self.blocks:
                x = b(x)
            x = self.norm_f(x)
            return self.lm_head(x) if self.lm_head is not None else x @ self.embed.weight.T

    return Transformer(cfg)


def main():
    ap = argparse.ArgumentParser(description="load a phax checkpoint into a torch nn.Module")
    ap.add_argument("--checkpoint", help="a run folder or model file of the transformer family")
    ap.add_argument("--phax", default=os.path.join(ROOT, "build", "phax"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ck = phax.load_checkpoint(a.checkpoint or train_tiny(a.phax, tmp))
    cfg = ck.config
    if cfg["family"] != "transformer":
        sys.exit(f"load_into_torch.py: the checkpoint is of family {cfg['family']}; this module is the transformer")
    B, T = 2, 12
    tokens = np.random.default_rng(a.seed).integers(0, cfg["vocab_size"], (B, T)).astype(np.int32)
    # The oracle's float64 logits, the checkpoint's float32 parameters promoted exactly.
    truth = phax.oracle("model", dict(ck, tokens=tokens, targets=tokens), config=cfg)["logits"]
    print(f"checkpoint: {len(ck)} tensors, step {ck.step}; phax.oracle logits {truth.shape}")
    try:
        import torch
    except ImportError:
        print("load_into_torch.py: skipped: torch is not installed (Debian: apt-get install python3-torch)")
        return 77
    m = torch_model(cfg).double()
    m.load_state_dict({k: torch.from_numpy(v) for k, v in ck.items()}, strict=True)  # no renaming
    with torch.no_grad():
        logits = m(torch.from_numpy(tokens).long()).numpy()
    err = np.max(np.abs(logits - truth)) / np.max(np.abs(truth))
    ok = err <= 1e-10
    print(f"torch nn.Module (load_state_dict strict, {sum(p.numel() for p in m.parameters())} values) vs "
          f"phax.oracle('model'): max |diff| / max |logit| = {err:.2e}  {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
