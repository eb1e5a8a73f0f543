#!/usr/bin/python3
"""PyTorch baseline for phax's whole-model training step, next to phax's fast/cpu.

Run with Debian's own python3, which has Debian's torch (python3-torch 1.13, CPU):

    /usr/bin/python3 benchmarks/torch_baseline.py [--build build] [--families transformer,swax,pha]
        [--Ts 512,2048,8192] [--envs plain,tuned] [--steps N] [--threads 2] [--csv FILE]
        [--precision f32|bf16]

--precision bf16: PyTorch's own mixed precision on the CPU (the forward under
torch.autocast("cpu", dtype=torch.bfloat16): its matmuls on bf16 operands, float32 weights and
optimizer) against phax's `bench_model --precision bf16` (docs/precision.md).

For every (family, T) it times a training step — forward, backward, gradient-norm
clipping (1.0) and torch.optim.AdamW (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight
decay 0.1 on the 2-D weights), batch 1 — in PyTorch in two environments, "plain"
(as it comes) and "tuned" (see below), and phax's `bench_model` (BUILD/bench_model)
on the same configuration; each run is a fresh process, whose peak resident memory
(ru_maxrss from wait4) is reported. Tokens/s = T / median step time after warm-up.
The last table gives phax / tuned-torch for speed and memory and checks the target
(phax ≥ 2× tuned tokens/s and ≤ ½ its peak memory at every T ≥ 2048).

The models are written here from docs/spec.md §3 (not from phax's C code), at the
"bench" configuration of benchmarks/bench_model.c: d 256, 4 layers, vocab 8192
untied, attention 8 query / 2 kv heads of head_dim 32 with RoPE, SwiGLU hidden 683,
and each family's defaults otherwise (cosine scores for pha/transformer/serial, dot
for the SWAX family; GSS F 512, H_s 64, N 64; mLSTM 8 heads; SWAX window
w_long = T/8). Attention is the plain materialised form (torch 1.13 has no fused
scaled_dot_product_attention): scores (B, Hq, T, T), a boolean causal/window mask,
softmax, P·V. The mLSTM cell uses the parallel form of docs/spec.md §2.9
(materialised (T, T) gate and score matrices per head; the log forget-gate sums as
differences of a cumulative sum). The GSS convolution is by FFT (torch.fft.rfft,
length 2T); the DSS kernel is formed in float32.

Environments (the script never installs or changes anything system-wide; it only
sets environment variables for its child processes):
  plain  what a user gets: the environment as it is (OPENBLAS_CORETYPE as the
         machine sets it), glibc malloc, Debian's default BLAS alternative; only
         torch.set_num_threads(--threads) is called (as in tuned).
  tuned  what an expert would do: jemalloc that keeps memory (LD_PRELOAD
         libjemalloc.so.2, MALLOC_CONF with decay off and retain) — Debian package
         libjemalloc2; OpenBLAS's OpenMP build (LD_LIBRARY_PATH to
         /usr/lib/x86_64-linux-gnu/openblas-openmp) — package libopenblas0-openmp;
         AVX-512 kernels: OPENBLAS_CORETYPE unset (OpenBLAS picks its own, AVX-512,
         kernel) and ATEN_CPU_CAPABILITY=avx512 (torch's own vectorised kernels);
         OMP_NUM_THREADS = --threads. benchmarks/setup.sh installs the packages. A
         missing piece is never replaced silently: the script names it and exits
         with status 2 (--check-env only checks); with --allow-untuned it runs the
         nearest substitutes (glibc malloc tunables that keep memory instead of
         jemalloc; OPENBLAS_THREAD_TIMEOUT=4 — the setting phax's benchmarks/run.sh
         uses — instead of the OpenMP build of OpenBLAS) under the label "untuned",
         and judges no target. Each tuned run also reports what it mapped; a run in
         which jemalloc, the OpenMP BLAS or AVX-512 ATen did not take effect is left
         out of the tuned figures and makes the script exit with status 1.
  phax   bench_model in the environment as it is (OPENBLAS_CORETYPE as the machine
         sets it: the ceiling is always measured in the same environment as the
         kernels), with OPENBLAS_THREAD_TIMEOUT=4 as `ninja bench` sets it.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

FAMILIES = ["pha", "transformer", "serial", "swax", "swa", "mlstm"]
# Where Debian puts jemalloc and OpenBLAS's OpenMP build; PHAX_BENCH_LIBDIR only for
# benchmarks/test_tuned_env.py, which shows the refusal on a folder without them.
LIB = os.environ.get("PHAX_BENCH_LIBDIR", "/usr/lib/x86_64-linux-gnu")
# What "tuned" needs (benchmarks/setup.sh installs it).
TUNED_PACKAGES = "libjemalloc2 libopenblas0-openmp"


NO_TORCH = ("torch_baseline.py: cannot import torch with %s. Run it with Debian's python3, "
            "which has Debian's torch: /usr/bin/python3 benchmarks/torch_baseline.py "
            "(package python3-torch)." % sys.executable)


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit(NO_TORCH)
    return torch


def probe_torch():
    """torch's version and default thread count, asked of a child process: the driver
    itself never imports torch, so that the processes it forks start small (a child's
    ru_maxrss includes the memory its parent had when it forked)."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        sys.exit(NO_TORCH)
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, "
                        "torch.get_num_threads())"], capture_output=True, text=True)
    if r.returncode:
        sys.exit(NO_TORCH + " (" + (r.stderr.strip().splitlines() or ["?"])[-1] + ")")
    v, n = r.stdout.split()
    return v, int(n)


# =====================================================================================
# The models (docs/spec.md §3), built only in the worker process.
# =====================================================================================
def bench_cfg(family, T):
    d = 256
    c = dict(family=family, V=8192, d=d, L=4, Hq=8, Hkv=2, dh=32, ffn=683, ffn_aux=d // 2,
             F=2 * d, Hs=d // 4, N=64, NH=8, cosine=family in ("pha", "transformer", "serial"),
             tie=False)
    c["w_long"] = max(max(1, T // 128), T // 8)  # train_len = T (docs/spec.md §3.4)
    return c


def build_model(torch, c, T):
    nn, F = torch.nn, torch.nn.functional
    EPS_RMS, EPS_LN, EPS_HN, EPS_ML = 1e-6, 1e-5, 1e-6, 1e-6
    LOG100 = math.log(100.0)

    def lin(i, o):
        m = nn.Linear(i, o, bias=False)
        nn.init.normal_(m.weight, std=1 / math.sqrt(i))
        return m

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS_RMS) * self.weight

    # RoPE, rotate-half pairing (i, i + dh/2); angles formed in double, then rounded.
    def rope_table(T, dh):
        inv = 10000.0 ** (-torch.arange(0, dh // 2, dtype=torch.float64) * 2 / dh)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        dt = torch.get_default_dtype()
        return torch.cos(ang).to(dt), torch.sin(ang).to(dt)  # (T, dh/2)

    cos_t, sin_t = rope_table(T, c["dh"])

    def rope(x):  # x: (B, H, T, dh)
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
        return torch.cat([a * cos_t - b * sin_t, b * cos_t + a * sin_t], dim=-1)

    def vis_mask(T, w):  # True where key s is visible to query t: 0 <= t - s < w (w = 0: full)
        t = torch.arange(T)
        diff = t[:, None] - t[None, :]
        m = diff >= 0
        if w > 0:
            m &= diff < w
        return m

    class Attn(nn.Module):  # GQA, RoPE, dot or cosine scores, causal with an optional window
        def __init__(self, window):
            super().__init__()
            d, Hq, Hkv, dh = c["d"], c["Hq"], c["Hkv"], c["dh"]
            self.wq, self.wk, self.wv = lin(d, Hq * dh), lin(d, Hkv * dh), lin(d, Hkv * dh)
            self.wo = lin(Hq * dh, d)
            self.cosine = c["cosine"]
            if self.cosine:
                self.logscale = nn.Parameter(torch.full((Hq,), math.log(10.0)))
            self.register_buffer("mask", vis_mask(T, window), persistent=False)

        def forward(self, x):
            B, T_, _ = x.shape
            Hq, Hkv, dh = c["Hq"], c["Hkv"], c["dh"]
            q = rope(self.wq(x).view(B, T_, Hq, dh).transpose(1, 2))
            k = rope(self.wk(x).view(B, T_, Hkv, dh).transpose(1, 2))
            v = self.wv(x).view(B, T_, Hkv, dh).transpose(1, 2)
            k = k.repeat_interleave(Hq // Hkv, dim=1)  # query head h reads kv head h // (Hq/Hkv)
            v = v.repeat_interleave(Hq // Hkv, dim=1)
            if self.cosine:
                q = F.normalize(q, dim=-1, eps=1e-12) * torch.exp(
                    torch.clamp(self.logscale, max=LOG100)).view(1, Hq, 1, 1)
                k = F.normalize(k, dim=-1, eps=1e-12)
                s = q @ k.transpose(-1, -2)
            else:
                s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
            s = s.masked_fill(~self.mask, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            return self.wo(o.transpose(1, 2).reshape(B, T_, Hq * dh))

    class SwiGLU(nn.Module):
        def __init__(self):
            super().__init__()
            d, h = c["d"], c["ffn"]
            self.w_gate, self.w_up, self.w_down = lin(d, h), lin(d, h), lin(h, d)

        def forward(self, x):
            return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))

    class FFNAux(nn.Module):
        def __init__(self):
            super().__init__()
            self.w3, self.w4 = lin(c["d"], c["ffn_aux"]), lin(c["ffn_aux"], c["d"])

        def forward(self, x):
            return self.w4(F.gelu(self.w3(x)))

    class GSS(nn.Module):  # docs/spec.md §3.1 and §2.8 (DSS-EXP, Δ = 1), convolution by FFT
        def __init__(self):
            super().__init__()
            d, Fw, Hs, N = c["d"], c["F"], c["Hs"], c["N"]
            self.wv, self.wu, self.wc, self.wo = lin(d, Fw), lin(d, Hs), lin(Hs, Fw), lin(Fw, d)
            self.ln = nn.LayerNorm(Hs, eps=EPS_LN)
            self.lambda_re = nn.Parameter(torch.randn(N))
            self.lambda_im = nn.Parameter(torch.randn(N))
            self.c_re = nn.Parameter(torch.randn(Hs, N))
            self.c_im = nn.Parameter(torch.randn(Hs, N))
            self.d = nn.Parameter(torch.randn(Hs))

        def kernel(self, T_):  # K: (Hs, T)
            a, b = -torch.exp(self.lambda_re), torch.exp(self.lambda_im)  # λ = a + ib
            # (e^λ − 1)/λ
            er = torch.expm1(a) * torch.cos(b) - 2 * torch.sin(b / 2) ** 2
            ei = torch.exp(a) * torch.sin(b)
            den = a * a + b * b
            zr, zi = (er * a + ei * b) / den, (ei * a - er * b) / den
            ctr = self.c_re * zr - self.c_im * zi  # C̃ = C·(e^λ − 1)/λ
            cti = self.c_re * zi + self.c_im * zr
            l = torch.arange(T_, dtype=torch.get_default_dtype())
            mag = torch.exp(a[:, None] * l[None, :])  # (N, T)
            ang = b[:, None] * l[None, :]
            return ctr @ (mag * torch.cos(ang)) - cti @ (mag * torch.sin(ang))

        def forward(self, x):
            B, T_, _ = x.shape
            v = F.gelu(self.wv(x))
            u = self.ln(F.gelu(self.wu(x)))  # (B, T, Hs)
            K = self.kernel(T_)
            n = 2 * T_
            ut = u.transpose(1, 2)  # (B, Hs, T)
            y = torch.fft.irfft(torch.fft.rfft(ut, n=n) * torch.fft.rfft(K, n=n), n=n)[..., :T_]
            y = y.transpose(1, 2) + u * self.d
            return self.wo(self.wc(y) * v)

    class MLSTM(nn.Module):  # docs/spec.md §3.3, the parallel form of §2.9
        def __init__(self):
            super().__init__()
            d, NH = c["d"], c["NH"]
            self.wq, self.wk, self.wv = lin(d, d // 2), lin(d, d // 2), lin(d, d)
            self.ogate = lin(d, d)
            self.igate, self.fgate = nn.Linear(d, NH), nn.Linear(d, NH)
            nn.init.normal_(self.igate.weight, std=1 / math.sqrt(d))
            nn.init.normal_(self.fgate.weight, std=1 / math.sqrt(d))
            nn.init.constant_(self.igate.bias, -10.0)
            nn.init.constant_(self.fgate.bias, math.log(0.95 / 0.05))
            self.headnorm = nn.Module()
            self.headnorm.weight = nn.Parameter(torch.ones(d))
            self.out = lin(d, d)
            self.register_buffer("causal", vis_mask(T, 0), persistent=False)

        def forward(self, x):
            B, T_, d = x.shape
            NH = c["NH"]
            dqk, dv = d // (2 * NH), d // NH
            q = self.wq(x).view(B, T_, NH, dqk).transpose(1, 2) * (1.0 / math.sqrt(dqk))
            k = self.wk(x).view(B, T_, NH, dqk).transpose(1, 2)
            v = self.wv(x).view(B, T_, NH, dv).transpose(1, 2)
            ig = 15 * torch.tanh(self.igate(x) / 15).transpose(1, 2)  # (B, NH, T)
            fg = 15 * torch.tanh(self.fgate(x) / 15).transpose(1, 2)
            cs = torch.cumsum(F.logsigmoid(fg), dim=-1)
            Dm = cs[..., :, None] - cs[..., None, :] + ig[..., None, :]  # F_ts + ĩ_s
            Dm = Dm.masked_fill(~self.causal, float("-inf"))
            m = Dm.max(dim=-1, keepdim=True).values
            W = (q @ k.transpose(-1, -2)) * torch.exp(Dm - m)
            nrm = torch.maximum(W.sum(-1, keepdim=True).abs(), torch.exp(-m))
            h = (W @ v) / (nrm + EPS_ML)  # (B, NH, T, dv)
            h = F.layer_norm(h, (dv,), eps=EPS_HN)  # headnorm: per head, no bias
            h = h.transpose(1, 2).reshape(B, T_, d) * self.headnorm.weight
            return self.out(torch.sigmoid(self.ogate(x)) * h)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            fam, d, L = c["family"], c["d"], c["L"]
            self.fam = fam
            self.embed = nn.Embedding(c["V"], d)
            nn.init.normal_(self.embed.weight, std=0.02)
            self.blocks = nn.ModuleList()
            for l in range(L):
                b = nn.Module()
                if fam in ("pha", "serial"):
                    b.gss, b.norm_gss = GSS(), RMSNorm(d)
                if fam in ("pha", "transformer", "serial"):
                    b.attn, b.norm_attn = Attn(0), RMSNorm(d)
                    b.ffn, b.norm_ffn = SwiGLU(), RMSNorm(d)
                if fam in ("pha", "serial"):
                    b.ffn_aux = FFNAux()
                if fam == "pha":
                    b.mix = nn.Module()
                    b.mix.p = nn.Parameter(torch.zeros(3))
                    b.norm_res = RMSNorm(d)
                if fam in ("swax", "swa", "mlstm"):
                    is_mlstm = fam == "mlstm" or (fam == "swax" and l % 2 == 0)  # mlstm_first
                    b.norm_mixer, b.ffn, b.norm_ffn = RMSNorm(d), SwiGLU(), RMSNorm(d)
                    if is_mlstm:
                        b.mlstm = MLSTM()
                    else:
                        b.attn = Attn(c["w_long"])
                self.blocks.append(b)
            if fam == "pha":
                self.norm_emb = RMSNorm(d)
                self.alpha = (2 * L) ** 0.25
            else:
                self.norm_f = RMSNorm(d)
            self.lm_head = lin(d, c["V"])
            nn.init.normal_(self.lm_head.weight, std=0.02)

        def forward(self, tok, tgt):
            x = self.embed(tok)
            if self.fam == "pha":
                x = self.norm_emb(x)
                for b in self.blocks:
                    br = [b.norm_gss(b.gss(x)), b.norm_attn(b.attn(x)),
                          b.norm_ffn(b.ffn(x) + b.ffn_aux(x))]
                    sp = F.softplus(b.mix.p)
                    w = sp / sp.sum()
                    m = w[0] * br[0] + w[1] * br[1] + w[2] * br[2]
                    x = b.norm_res(self.alpha * x + m)
            else:
                for b in self.blocks:
                    if self.fam == "transformer":
                        x = x + b.attn(b.norm_attn(x))
                        x = x + b.ffn(b.norm_ffn(x))
                    elif self.fam == "serial":
                        x = x + b.gss(b.norm_gss(x))
                        x = x + b.attn(b.norm_attn(x))
                        h = b.norm_ffn(x)
                        x = x + b.ffn(h) + b.ffn_aux(h)
                    else:
                        mixer = b.mlstm if "mlstm" in b._modules else b.attn
                        x = x + mixer(b.norm_mixer(x))
                        x = x + b.ffn(b.norm_ffn(x))
                x = self.norm_f(x)
            logits = self.lm_head(x)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1), ignore_index=-1)

    return Model()


def median(x):
    x = sorted(x)
    n = len(x)
    return x[n // 2] if n % 2 else 0.5 * (x[n // 2 - 1] + x[n // 2])


def openblas_info():
    """The BLAS library this process mapped and the kernel OpenBLAS chose."""
    import ctypes
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if any(s in p for s in ("blas", "jemalloc", "tcmalloc")) and p.startswith("/"):
                paths.add(p)
    core, threads = "?", -1
    for p in sorted(paths):
        if "blas" not in p:
            continue
        try:
            lib = ctypes.CDLL(p)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            core = lib.openblas_get_corename().decode()
            threads = lib.openblas_get_num_threads()
            break
        except (OSError, AttributeError):
            pass
    return sorted(paths), core, threads


def worker(a):
    torch = need_torch()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    c = bench_cfg(a.family, a.T)
    model = build_model(torch, c, a.T)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    params = list(model.parameters())
    g = torch.Generator().manual_seed(1)
    seq = torch.randint(0, c["V"], (1, a.T + 1), generator=g)
    tok, tgt = seq[:, :-1].clone(), seq[:, 1:].clone()
    times, cpus, losses = [], [], []
    bf16 = getattr(a, "precision", "f32") == "bf16"
    for s in range(a.warmup + a.steps):
        c0, t0 = time.process_time(), time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(tok, tgt)
            loss = loss.float()
        else:
            loss = model(tok, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        t1, c1 = time.perf_counter(), time.process_time()
        losses.append(float(loss))
        if s >= a.warmup:
            times.append(t1 - t0)
            cpus.append(c1 - c0)
    med, n = median(times), len(times)
    libs, core, bthreads = openblas_info()
    res = dict(family=a.family, T=a.T, steps=n, ms=med * 1e3, tok_s=a.T / med,
               cpu_ms=median(cpus) * 1e3, ms_min=min(times) * 1e3,
               params=sum(p.numel() for p in params), loss_first=losses[0], loss_last=losses[-1],
               peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,
               torch_threads=torch.get_num_threads(), openblas_core=core,
               openblas_threads=bthreads, libs=libs,
               cpu_capability=next((l.split(":", 1)[1].strip()
                                    for l in torch.__config__.show().splitlines()
                                    if "CPU capability usage" in l), "?"))
    print("RESULT " + json.dumps(res), flush=True)


# =====================================================================================
# --check: the torch models against `phax oracle model` (float64), so that the
# benchmark compares the same functions.
# =====================================================================================
def phax_json_cfg(family, T):
    return json.dumps(dict(family=family, vocab_size=8192, d_model=256, n_layers=4, n_heads=8,
                           n_kv_heads=2, head_dim=32, ffn_hidden=683, tie_embeddings=False,
                           train_len=T))


def check(a, fams):
    """Loss and every parameter gradient of each torch model (float64, T = 24) against
    `phax oracle model` on the same parameters and tokens."""
    torch = need_torch()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from safetensors_np import read_safetensors, write_safetensors
    torch.set_default_dtype(torch.float64)
    phax = a.phax or os.path.join(a.build, "phax")
    if not os.access(phax, os.X_OK):
        sys.exit(f"torch_baseline.py --check: {phax} not found (ninja -C {a.build} phax)")
    T, bad = 24, 0
    for fam in fams:
        torch.manual_seed(3)
        c = bench_cfg(fam, T)
        model = build_model(torch, c, T)
        with torch.no_grad():  # move the zero/one-initialised tensors off their special values
            for n_, p_ in model.named_parameters():
                if "norm" in n_ or n_.endswith(("ln.weight", "ln.bias", "mix.p")):
                    p_.add_(0.1 * torch.randn_like(p_))
        g = torch.Generator().manual_seed(4)
        seq = torch.randint(0, c["V"], (1, T + 1), generator=g)
        tok, tgt = seq[:, :-1].clone(), seq[:, 1:].clone()
        tgt[0, 5] = -1  # one ignored target
        model.zero_grad()
        loss = model(tok, tgt)
        loss.backward()
        tensors = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        tensors["tokens"] = tok.numpy().astype("int32")
        tensors["targets"] = tgt.numpy().astype("int32")
        with tempfile.TemporaryDirectory() as d:
            fin, fout = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
            write_safetensors(fin, tensors, {"config": phax_json_cfg(fam, T), "window": "-1"})
            r = subprocess.run([phax, "oracle", "model", fin, fout], capture_output=True, text=True)
            if r.returncode:
                print(f"{fam:11s} phax oracle failed: {r.stderr.strip()}")
                bad += 1
                continue
            out = read_safetensors(fout)[0]
        ref_loss = float(out["loss"].reshape(-1)[0])
        worst, where = 0.0, ""
        for n_, p_ in model.named_parameters():
            gr = out.get("grad." + n_)
            if gr is None:
                worst, where = float("inf"), n_ + " (no oracle gradient)"
                break
            gt = p_.grad.numpy()
            e = float(abs(gt - gr).max() / max(abs(gr).max(), 1e-300))
            if not e <= worst:
                worst, where = e, n_
        lerr = abs(float(loss) - ref_loss) / abs(ref_loss)
        ok = lerr <= 1e-10 and worst <= 1e-8
        bad += not ok
        print(f"{fam:11s} loss torch {float(loss):.12f} oracle {ref_loss:.12f} (rel {lerr:.1e}); "
              f"worst gradient rel err {worst:.1e} ({where}) {'ok' if ok else 'MISMATCH'}")
    return 1 if bad else 0


# =====================================================================================
# The driver: environments, child processes, tables.
# =====================================================================================
def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(l.startswith("flags") and " avx512f" in l for l in f)
    except OSError:
        return False


def make_envs(threads, allow_untuned=False):
    """(plain env, tuned env, notes on the tuned pieces, missing pieces).

    "tuned" is a claim about the run, so a piece that is not installed is not
    silently replaced: the caller refuses (missing non-empty), or with
    --allow-untuned runs the substitutes under the label "untuned"."""
    plain = dict(os.environ)
    tuned = dict(os.environ)
    notes, missing = [], []
    je = next((p for p in (f"{LIB}/libjemalloc.so.2", f"{LIB}/libjemalloc.so") if os.path.exists(p)),
              None)
    if je:
        tuned["LD_PRELOAD"] = (je + " " + tuned.get("LD_PRELOAD", "")).strip()
        tuned["MALLOC_CONF"] = "background_thread:true,dirty_decay_ms:-1,muzzy_decay_ms:-1,retain:true"
        notes.append(f"jemalloc: {je}, MALLOC_CONF={tuned['MALLOC_CONF']} (memory kept)")
    else:
        missing.append(f"jemalloc ({LIB}/libjemalloc.so.2; Debian package libjemalloc2; "
                       "without it \"tuned\" torch ran 9x slower at T = 2048, issue 11)")
        # glibc keeps freed memory with these (tensors above 32 MB are still mmapped).
        tuned["GLIBC_TUNABLES"] = ("glibc.malloc.mmap_threshold=33554432:"
                                   "glibc.malloc.trim_threshold=17179869184")
        notes.append("jemalloc: NOT INSTALLED (Debian package libjemalloc2); substitute: "
                     f"GLIBC_TUNABLES={tuned['GLIBC_TUNABLES']}")
    omp_dir = f"{LIB}/openblas-openmp"
    if os.path.exists(f"{omp_dir}/libblas.so.3"):
        tuned["LD_LIBRARY_PATH"] = (omp_dir + ":" + tuned.get("LD_LIBRARY_PATH", "")).rstrip(":")
        notes.append(f"OpenBLAS OpenMP build: LD_LIBRARY_PATH={omp_dir}")
    else:
        missing.append(f"OpenBLAS's OpenMP build ({omp_dir}/libblas.so.3; Debian package "
                       "libopenblas0-openmp)")
        tuned["OPENBLAS_THREAD_TIMEOUT"] = "4"
        notes.append("OpenBLAS OpenMP build: NOT INSTALLED (Debian package libopenblas0-openmp); "
                     "substitute: the pthread build with OPENBLAS_THREAD_TIMEOUT=4")
    ct = tuned.pop("OPENBLAS_CORETYPE", None)
    if cpu_has_avx512():
        notes.append("AVX-512 kernels: OPENBLAS_CORETYPE unset (was %s), ATEN_CPU_CAPABILITY=avx512"
                     % (ct if ct else "unset already"))
        tuned["ATEN_CPU_CAPABILITY"] = "avx512"
    else:  # not a missing package: the CPU's best is what tuned can ask for
        notes.append("AVX-512 kernels: this CPU has none; OPENBLAS_CORETYPE unset (was %s), "
                     "ATen's default capability" % (ct if ct else "unset already"))
    tuned["OMP_NUM_THREADS"] = str(threads)
    return plain, tuned, notes, missing


def not_tuned(res, env):
    """What of the tuned environment did not take effect in a worker's run (a list)."""
    bad = []
    libs = res.get("libs", [])
    if "LD_PRELOAD" in env and "jemalloc" in env["LD_PRELOAD"] and not any("jemalloc" in p for p in libs):
        bad.append("jemalloc was not mapped (LD_PRELOAD ignored?)")
    if "LD_LIBRARY_PATH" in env and "openblas-openmp" in env["LD_LIBRARY_PATH"] and \
            not any("openblas-openmp" in p for p in libs):
        bad.append("BLAS is not OpenBLAS's OpenMP build (mapped: %s)"
                   % (", ".join(p for p in libs if "blas" in p) or "none"))
    if env.get("ATEN_CPU_CAPABILITY") == "avx512" and "AVX512" not in res.get("cpu_capability", "").upper():
        bad.append("ATen runs %s kernels, not AVX-512" % res.get("cpu_capability", "?"))
    return bad


def run_child(cmd, env, timeout):
    """Run cmd; return (stdout text, peak RSS MB from wait4, exit status, stderr tail)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
        t0 = time.time()
        out = b""
        try:
            import select
            while True:
                left = timeout - (time.time() - t0)
                if left <= 0:
                    p.kill()
                    break
                r, _, _ = select.select([p.stdout], [], [], min(left, 5.0))
                if r:
                    chunk = os.read(p.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    out += chunk
        finally:
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace").strip().splitlines()[-3:]
    return out.decode(errors="replace"), ru.ru_maxrss * 1024 / 1e6, p.returncode, " | ".join(tail)


def mem_available_mb():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return float("inf")


def torch_est_mb(family, T):
    """A rough upper estimate of the torch run's peak (materialised T×T matrices).

    Two float (Hq, T, T) score-sized tensors per attention layer: the tuned runs
    measured 1.72 GB at T = 2048 and 4.58 GB at 4096 for the transformer, ~1.9
    such tensors per layer above a 0.6 GB base (the estimate gives 2.2 and 6.0)."""
    c = bench_cfg(family, T)
    n_att = {"pha": 4, "transformer": 4, "serial": 4, "swax": 2, "swa": 4, "mlstm": 0}[family]
    n_ml = {"swax": 2, "mlstm": 4}.get(family, 0)
    tt = T * T * 4 / 1e6
    return 600 + 8 * T * c["V"] * 4 / 1e6 + n_att * 2 * c["Hq"] * tt + n_ml * 4 * c["NH"] * tt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="phax build directory with bench_model (default build)")
    ap.add_argument("--families", default="transformer,swax,pha")
    ap.add_argument("--Ts", default="512,2048,8192", help="comma list, e.g. 512,1024,2048,4096,8192")
    ap.add_argument("--envs", default="plain,tuned")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default 3, 2 at T >= 4096)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                    help="bf16: torch.autocast(cpu, bfloat16) against bench_model --precision bf16")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    ap.add_argument("--no-phax", action="store_true")
    ap.add_argument("--check", action="store_true",
                    help="check the torch models against `phax oracle model` (float64) and exit")
    ap.add_argument("--phax", default=None, help="the phax binary for --check (default BUILD/phax)")
    ap.add_argument("--csv", default=None, help="default BUILD/bench/torch_baseline.csv")
    ap.add_argument("--allow-untuned", action="store_true",
                    help="when a piece of the tuned environment is missing, run the substitutes "
                         "and label that environment \"untuned\" (default: refuse, exit 2)")
    ap.add_argument("--check-env", action="store_true",
                    help="say whether the tuned environment is complete (exit 0) or not (exit 2)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the torch and phax runs of each (family, T) this many times "
                         "and report each one's median run (this machine's 2-thread speed "
                         "swings by about 30%% over seconds)")
    # internal: one torch run in this process
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--family", help=argparse.SUPPRESS)
    ap.add_argument("--T", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)

    fams = [f for f in a.families.split(",") if f]
    for f in fams:
        if f not in FAMILIES:
            sys.exit(f"torch_baseline.py: unknown family {f!r} (one of {', '.join(FAMILIES)})")
    if a.check:
        sys.exit(check(a, fams))
    Ts = [int(t) for t in a.Ts.split(",") if t]
    envs = [e for e in a.envs.split(",") if e]
    for e in envs:
        if e not in ("plain", "tuned"):
            sys.exit(f"torch_baseline.py: unknown environment {e!r} (plain, tuned)")
    plain, tuned, notes, missing = make_envs(a.threads)
    # A "tuned" baseline without its pieces ran 9x slower at T = 2048 and made phax's ratio
    # read 18x instead of 2x: never call such a run tuned.
    tuned_label = "untuned" if missing else "tuned"
    if a.check_env or (missing and "tuned" in envs and not a.allow_untuned):
        for m in missing:
            print("torch_baseline.py: tuned environment: missing " + m, file=sys.stderr)
        if missing:
            print("torch_baseline.py: not a tuned environment; install the missing pieces "
                  f"(benchmarks/setup.sh, or apt-get install {TUNED_PACKAGES}), or pass "
                  "--allow-untuned to run it labelled \"untuned\", or --envs plain",
                  file=sys.stderr)
            sys.exit(2)
        print("torch_baseline.py: tuned environment complete:\n  - " + "\n  - ".join(notes))
        sys.exit(0)
    envs = [tuned_label if e == "tuned" else e for e in envs]
    torch_version, torch_default_threads = probe_torch()
    env_of = {"plain": plain, tuned_label: tuned}
    degraded = []  # tuned runs in which a piece did not take effect
    bench = os.path.join(a.build, "bench_model")
    have_phax = not a.no_phax and os.access(bench, os.X_OK)
    phax_env = dict(os.environ)
    phax_env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    phax_env["OMP_NUM_THREADS"] = str(a.threads)
    csv_path = a.csv or (os.path.join(a.build, "bench", "torch_baseline.csv")
                         if os.path.isdir(a.build) else None)

    print(f"torch_baseline: {sys.executable}, torch {torch_version} "
          f"({torch_default_threads} thread(s) by default here; runs use {a.threads}); "
          f"{os.cpu_count()} CPUs; load average {' '.join('%.2f' % x for x in os.getloadavg())}")
    print(f"OPENBLAS_CORETYPE in this environment: {os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"{tuned_label} environment:")
    for n in notes:
        print("  - " + n)
    if missing:
        print("  NOT TUNED (--allow-untuned): its runs are labelled \"untuned\" and no target is judged")
    if not have_phax and not a.no_phax:
        print(f"phax: {bench} not built (ninja -C {a.build} bench_model); torch only")
    print("step = forward + backward + clip_grad_norm_(1.0) + AdamW.step, batch 1; "
          "tokens/s = T / median step; peak MB = ru_maxrss of that run's process (it includes "
          "the %.0f MB this driver had when it forked)\n"
          % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6))

    rows = []  # dicts per (family, T)
    hdr = "%-11s %5s %-6s %10s %10s %9s %8s  %s" % ("family", "T", "run", "tokens/s", "ms/step",
                                                    "peak MB", "loss", "notes")
    print(hdr)
    for fam in fams:
        for T in Ts:
            steps = a.steps or (2 if T >= 4096 else 3)
            row = dict(family=fam, T=T)
            samples = {}  # run -> results over the rounds
            for rnd in range(max(1, a.rounds)):
                for e in envs:
                    est = torch_est_mb(fam, T)
                    if est > 0.95 * mem_available_mb():
                        print("%-11s %5d %-6s %10s   skipped: ~%.0f MB needed, %.0f MB available" %
                              (fam, T, e, "-", est, mem_available_mb()))
                        continue
                    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--family", fam,
                           "--T", str(T), "--steps", str(steps), "--warmup", str(a.warmup),
                           "--threads", str(a.threads), "--precision", a.precision]
                    out, peak, rc, err = run_child(cmd, env_of[e], a.timeout)
                    res = next((json.loads(l[7:]) for l in out.splitlines() if l.startswith("RESULT ")), None)
                    if rc != 0 or res is None:
                        print("%-11s %5d %-6s FAILED (exit %s): %s" % (fam, T, e, rc, err))
                        continue
                    res["peak_mb"] = peak
                    if e == "tuned" and not_tuned(res, env_of[e]):
                        why = "; ".join(not_tuned(res, env_of[e]))
                        print("%-11s %5d %-6s NOT TUNED: %s (run not counted as tuned)" % (fam, T, e, why))
                        degraded.append(f"{fam} T={T}: {why}")
                        continue
                    samples.setdefault(e, []).append(res)
                    print("%-11s %5d %-6s %10.1f %10.1f %9.0f %8.3f  %d params; OpenBLAS %s, %d thr; "
                          "ATen %s; %s" % (fam, T, e, res["tok_s"], res["ms"], peak, res["loss_last"],
                                           res["params"], res["openblas_core"],
                                           res["openblas_threads"], res["cpu_capability"],
                                           ", ".join(os.path.basename(p) for p in res["libs"])),
                          flush=True)
                if have_phax:
                    with tempfile.NamedTemporaryFile(suffix=".csv") as tf:
                        cmd = [bench, "--family", fam, "--T", str(T), "--B", "1", "--csv", tf.name,
                               "--precision", a.precision]
                        out, peak, rc, err = run_child(cmd, phax_env, a.timeout)
                        lines = open(tf.name).read().splitlines()
                    if rc != 0 or len(lines) < 2:
                        print("%-11s %5d %-6s FAILED (exit %s): %s" % (fam, T, "phax", rc, err))
                    else:
                        r = dict(zip(lines[0].split(","), lines[1].split(",")))
                        res = dict(tok_s=float(r["tokens_per_s"]), ms=float(r["ms_per_step"]),
                                   peak_mb=peak, params=int(float(r["params"])),
                                   loss_last=float(r["loss_last"]), ws_mb=float(r["ws_mb"]))
                        samples.setdefault("phax", []).append(res)
                        core = next((l.split("OpenBLAS core ")[1].split(" ")[0] for l in out.splitlines()
                                     if "OpenBLAS core " in l), "?")
                        print("%-11s %5d %-6s %10.1f %10.1f %9.0f %8.3f  %d params; OpenBLAS %s; "
                              "workspace %.0f MB" % (fam, T, "phax", res["tok_s"], res["ms"], peak,
                                                     res["loss_last"], res["params"], core, res["ws_mb"]),
                              flush=True)
            for k, rs in samples.items():  # the median run (by tokens/s); peak: the largest
                rs = sorted(rs, key=lambda x: x["tok_s"])
                med = dict(rs[(len(rs) - 1) // 2])
                med["peak_mb"] = max(x["peak_mb"] for x in rs)
                med["runs"] = len(rs)
                row[k] = med
            rows.append(row)

    # Summary and ratios.
    print("\nsummary (tokens/s; peak MB):")
    print("%-11s %5s %10s %10s %10s %9s %9s %9s %9s %9s %9s  %s" % (
        "family", "T", "plain", tuned_label, "phax", "plain MB", tuned_label[:5] + " MB", "phax MB",
        tuned_label[:3] + "/pln", "phax/" + tuned_label[:3], "mem p/t", "target (T>=2048: >=2x, <=0.5x mem)"))
    csv_rows = []
    for r in rows:
        g = lambda k, f: r[k][f] if k in r else float("nan")  # noqa: E731
        tp, tt, tx = g("plain", "tok_s"), g(tuned_label, "tok_s"), g("phax", "tok_s")
        mp, mt, mx = g("plain", "peak_mb"), g(tuned_label, "peak_mb"), g("phax", "peak_mb")
        sp, mr = tx / tt, mx / mt
        if r["T"] < 2048:
            verdict = "-"
        elif tuned_label != "tuned":
            verdict = "n/a (no tuned baseline)"
        elif math.isnan(sp) or math.isnan(mr):
            verdict = "n/a"
        else:
            verdict = ("speed %s" % ("ok" if sp >= 2 else "MISSED")) + (
                ", memory %s" % ("ok" if mr <= 0.5 else "MISSED"))
        print("%-11s %5d %10.1f %10.1f %10.1f %9.0f %9.0f %9.0f %9.2f %9.2f %9.2f  %s" % (
            r["family"], r["T"], tp, tt, tx, mp, mt, mx, tt / tp, sp, mr, verdict))
        csv_rows.append([r["family"], r["T"], tp, tt, tx, mp, mt, mx, tt / tp, sp, mr, verdict])
    if csv_path:
        os.makedirs(os.path.dirname(csv_path) or ".", exist_ok=True)
        with open(csv_path, "w") as f:
            f.write(f"family,T,torch_plain_tok_s,torch_{tuned_label}_tok_s,phax_tok_s,torch_plain_peak_mb,"
                    f"torch_{tuned_label}_peak_mb,phax_peak_mb,{tuned_label}_over_plain,phax_over_{tuned_label},"
                    f"phax_mem_over_{tuned_label},target\n")
            for c in csv_rows:
                f.write(",".join(("%.3f" % v) if isinstance(v, float) else str(v) for v in c) + "\n")
        print(f"CSV: {csv_path}")
    print("load average at the end: " + " ".join("%.2f" % x for x in os.getloadavg()))
    if degraded:
        print("torch_baseline.py: %d tuned run(s) were not tuned and were left out:\n  " % len(degraded)
              + "\n  ".join(degraded), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
