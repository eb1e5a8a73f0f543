"""The experiments. Each trains what it needs (reusing finished runs), evaluates,
and writes OUT/<experiment>/results.json, which report.py turns into the claims
table, the tables and the figures."""
import csv
import math
import json
import os
import statistics
import subprocess

from . import settings as S
from .runs import JobError, match_params, note, run_logged, say, write_atomic, write_config


def acc_line(cells):
    """'L=128 0.91, L=256 0.85, ...' from phax recall's cells (accuracy by length, depths averaged)."""
    by = {}
    for c in cells:
        by.setdefault(c["length"], []).append(c["accuracy"])
    return ", ".join(f"L={L} {statistics.fmean(v):.2f}" for L, v in sorted(by.items()))


def save(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def load(path):
    with open(path) as f:
        return json.load(f)


class Job:
    def __init__(self, runner, st, out, data_dir, corpora_dirs):
        self.r = runner
        self.s = st
        self.out = out
        self.data_dir = data_dir
        self.corpora = corpora_dirs  # name -> folder (relative to the repository)
        self.cfg_dir = os.path.join(out, "configs")
        self.cache = os.path.join(out, "cache")

    # --- shared pieces ----------------------------------------------------------------------
    def lm_train_args(self, corpus, cfg_path, seed, steps, T=None, B=None, extra=(), lr=None):
        s = self.s
        lr = lr or s["lr"]  # the floor of the cosine stays a tenth of the peak (2e-4 at the default 2e-3)
        a = ["--config", cfg_path, "--data", self.corpora[corpus], "--tokenizer", "word"]
        vm = s["vocab_max"].get(corpus, 0)
        if vm:
            a += ["--vocab-max", str(vm)]
        a += ["--seq", str(T or s["T"]), "--batch", str(B or s["B"]), "--steps", str(steps),
              "--lr", str(lr), "--min-lr", str(s["min_lr"] if lr == s["lr"] else lr / 10), "--warmup", str(s["warmup"]),
              "--eval-every", str(s["eval_every"]), "--eval-tokens", str(s["eval_tokens"]),
              "--seed", str(seed), "--log-every", "50", "--cache-dir", self.cache]
        return a + list(extra)

    def count_cfg(self, cfg):
        """Non-embedding parameters of a config (vocab_size only for counting)."""
        c = dict(cfg, vocab_size=8192)
        p = write_config(os.path.join(self.cfg_dir, "count"), "probe", c)
        self.r._info.pop(p, None)
        return self.r.counts(p)[1]

    def matched_cfg(self, name, base, overrides, knob, target):
        """A training config (no vocab_size: the tokenizer's) whose non-embedding count is
        within 3 % of target, the knob found on a counting copy."""
        cfg = dict(base, **overrides)
        if knob == "unmatched":  # an arm that keeps the smaller count on purpose (settings.ABLATIONS)
            return write_config(self.cfg_dir, name, cfg), self.count_cfg(cfg)
        if knob:
            cnt_dir = os.path.join(self.cfg_dir, "count")
            path, n = match_params(self.r, cnt_dir, name, dict(cfg, vocab_size=8192), knob, target)
            cfg[knob] = load(path)[knob]
        n = self.count_cfg(cfg)
        if abs(n - target) > 0.03 * target:
            raise JobError(f"match: {name}: {n} non-embedding parameters, not within 3 % of {target}")
        return write_config(self.cfg_dir, name, cfg), n

    def test_ppl(self, stage, run_dir, corpus, prefix, extra=()):
        if not os.path.exists(prefix + ".json"):
            a = [self.r.phax, "eval", run_dir, "--data", self.corpora[corpus], "--split", "test",
                 "--cache-dir", self.cache]
            if self.s["test_max"]:
                a += ["--max-tokens", str(self.s["test_max"])]
            run_logged(stage, a + list(extra) + ["--json", prefix + ".json"], prefix + ".out", prefix + ".cmd",
                       [prefix + ".json"])
        return load(prefix + ".json")["ppl"]

    def run_summary(self, run_dir):
        log = self.r.log(run_dir)
        steps = [l for l in log if "tokens_per_s" in l]
        tps = statistics.median([l["tokens_per_s"] for l in steps]) if steps else None
        val = [l for l in log if "val_ppl" in l]
        return dict(steps=steps[-1]["step"] if steps else 0, tokens_per_s=tps,
                    val_ppl=val[-1]["val_ppl"] if val else None,
                    curve=[[l["step"], l["val_ppl"]] for l in val],
                    mix=[[l["step"], l["mix"]] for l in log if "mix" in l])

    # --- fair learning rates (issue 28): a sweep per model on one seed -------------------------
    def lr_name(self, kind, corpus, key, lr, seed):
        """The run of KEY at rate LR: the default rate keeps the name these runs always had (so a
        sweep's default point is the lm/iso run itself, and the lm piece reuses the sweep's run at
        the chosen rate); another rate names itself."""
        tag = "" if lr == self.s["lr"] else f"-lr{lr:g}"
        return f"{kind}-{corpus}-{key}{tag}-s{seed}"

    def best_lr(self, key):
        """The rate the sweep chose for KEY (OUT/lr or OUT/lr_iso results.json), else the default
        (the sweep not run: every earlier record trained at the default)."""
        for piece in ("lr", "lr_iso"):
            p = os.path.join(self.out, piece, "results.json")
            if os.path.exists(p):
                b = load(p)["best"].get(key)
                if b:
                    return b
        return self.s["lr"]

    def lr_sweep(self, piece, kind, corpus, models):
        """models: key -> (config path, non-embedding count). Seed s['lr_seed'] at every rate of
        s['lr_grid'] (the cosine's floor a tenth of the peak, warmup and steps as the lm runs);
        when the best rate lies at an end of what was tried, the next factor of 2 beyond it is
        tried too, up to s['lr_extend'] times. The rate is chosen by the final validation
        perplexity (32k validation tokens; the test split is never looked at); a run that
        diverges (phax train stops on a non-finite loss) counts as infinite."""
        s = self.s
        seed = s["lr_seed"]
        res = dict(grid=s["lr_grid"], seed=seed, corpus=corpus, steps=s["lm_steps"], default=s["lr"],
                   models={}, best={})
        for key, (path, n) in models.items():
            pts = {}

            def run(lr):
                name = self.lr_name(kind, corpus, key, lr, seed)
                try:
                    d = self.r.train(piece, name, self.lm_train_args(corpus, path, seed, s["lm_steps"], lr=lr))
                except JobError as e:
                    if "is NaN" not in str(e) and "Inf" not in str(e):
                        raise
                    pts[lr] = dict(val_ppl=math.inf, curve=[], run=os.path.join(self.r.runs, name), diverged=True)
                    note(f"{piece}: {key} lr {lr:g}: diverged")
                    return
                rs = self.run_summary(d)
                v = rs["val_ppl"] if rs["val_ppl"] is not None else math.inf
                pts[lr] = dict(val_ppl=v, curve=rs["curve"], run=d, tokens_per_s=rs["tokens_per_s"], diverged=False)
                note(f"{piece}: {key} lr {lr:g}: validation ppl {v:.2f}")

            for lr in s["lr_grid"]:
                run(lr)
            for _ in range(s["lr_extend"]):
                best = min(pts, key=lambda x: pts[x]["val_ppl"])
                nxt = best / 2 if best == min(pts) else best * 2 if best == max(pts) else None
                if nxt is None or nxt in pts:
                    break
                run(nxt)
            best = min(pts, key=lambda x: pts[x]["val_ppl"])
            ends = best in (min(pts), max(pts))
            res["models"][key] = dict(nonemb=n, best=best, at_edge=ends,
                                      points=[dict(lr=lr, **v) for lr, v in sorted(pts.items())])
            res["best"][key] = best
            note(f"{piece}: {key}: best lr {best:g}" + (" (at the end of the range tried)" if ends else ""))
        save(os.path.join(self.out, piece, "results.json"), res)

    def exp_lr(self):
        """PHA, transformer and serial (the lm piece's matched configs), one seed, lr_grid."""
        if not self.s["lr_sweep"]:
            note("lr: not in quick mode (--full)")
            return
        corpus = self.s["corpora"][0]
        say(f"lr: learning-rate sweep of PHA, transformer, serial on {corpus}, seed {self.s['lr_seed']}, rates "
            + ", ".join(f"{x:g}" for x in self.s["lr_grid"]))
        cfgs, _ = self.lm_configs()
        self.lr_sweep("lr", "lm", corpus, cfgs)

    def iso_cfgs(self):
        """The iso piece's transformer sizes: key transformer_d<D> -> (config path, count)."""
        s = self.s
        out = {}
        for dm in s["iso_dims"]:
            cfg = dict(s["lm_base"], family="transformer", d_model=dm, head_dim=max(1, dm // s["lm_base"]["n_heads"]))
            key = f"transformer_d{dm}"
            out[key] = (write_config(self.cfg_dir, key, cfg), self.count_cfg(cfg))
        return out

    def exp_lr_iso(self):
        """The iso piece's transformer sizes, one seed, lr_grid."""
        if not self.s["lr_sweep"] or not self.s["iso"]:
            note("lr_iso: not in quick mode (--full)")
            return
        corpus = self.s["corpora"][0]
        say(f"lr_iso: learning-rate sweep of the iso transformers on {corpus}, seed {self.s['lr_seed']}")
        self.lr_sweep("lr_iso", "iso", corpus, self.iso_cfgs())

    # --- (a) PHA, transformer, serial on each corpus, matched parameter counts ---------------
    def pha_target(self, base=None):
        return self.count_cfg(dict(base or self.s["lm_base"], family="pha"))

    def lm_configs(self, base=None, tag=""):
        base = dict(base or self.s["lm_base"])
        target = self.pha_target(base)
        out = {}
        for m in self.s["lm_models"]:
            knob = None if m == "pha" else "ffn_hidden"
            out[m] = self.matched_cfg(f"{m}{tag}", dict(base, family=m), {}, knob, target)
        return out, target

    def exp_lm(self):
        self.lm_study("lm", self.s["corpora"][0])

    def exp_ptb(self):
        if "ptb" not in self.s["corpora"]:
            note("ptb: not in this mode or no PTB found (--full; data/ptb or --data)")
            return
        self.lm_study("ptb", "ptb")

    # --- precision: the same models in float32 and in the bf16 tier (docs/precision.md) --------
    def exp_precision(self):
        """PHA, transformer and SWAX at the lm piece's settings, each seed trained twice: float32
        (--precision f32) and bf16 matmul operands (--precision bf16); test perplexity of each
        in its own precision. Paired by seed: does the precision move the answer?"""
        s = self.s
        if not s["precision"]:
            note("precision: not in quick mode (--full)")
            return
        why = self.bf16_unavailable()
        if why:  # no oneDNN in the build, or none of its bf16 matmuls on this CPU (AVX2 only)
            note(f"precision: not run: the bf16 tier is unavailable here: {why}")
            return
        corpus = s["corpora"][0]
        base = dict(s["lm_base"])
        models = s["prec_models"]
        say(f"precision: {', '.join(models)} on {corpus} in f32 and bf16; seeds " + ",".join(map(str, s["prec_seeds"])))
        cfgs = {m: write_config(self.cfg_dir, f"prec-{m}", dict(base, family=m)) for m in models}
        res = dict(models=models, seeds=s["prec_seeds"], precisions=["f32", "bf16"], corpus=corpus, base=base,
                   steps=s["lm_steps"], tokens=s["lm_steps"] * s["B"] * s["T"],
                   configs={m: load(p) for m, p in cfgs.items()}, runs=[])
        for seed in s["prec_seeds"]:
            for m in models:
                for prec in ("f32", "bf16"):
                    name = f"prec-{corpus}-{m}-{prec}-s{seed}"
                    prefix = os.path.join(self.out, "precision", name + ".test")
                    d = self.r.train("precision", name, self.lm_train_args(corpus, cfgs[m], seed, s["lm_steps"],
                                                                           extra=["--precision", prec]),
                                     needs=[prefix + ".json"])
                    # Scored in the precision it trained in (the bf16 tier's forward: bf16 matmuls).
                    ppl = self.test_ppl("precision", d, corpus, prefix,
                                        extra=["--backend", "cpu_bf16" if prec == "bf16" else "cpu"])
                    rec = self.run_summary(d)
                    rec.update(test_ppl=ppl, seed=seed, model=m, precision=prec, run=d)
                    res["runs"].append(rec)
                    note(f"precision: {name}: test ppl {ppl:.2f}, {rec['tokens_per_s'] or 0:.0f} tokens/s")
        save(os.path.join(self.out, "precision", "results.json"), res)

    def bf16_unavailable(self):
        """None when this build and CPU run the cpu_bf16 tier, else why not (`phax info`'s line)."""
        r = subprocess.run([self.r.phax, "info"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("cpu_bf16: "):
                v = line[len("cpu_bf16: "):]
                return None if v.startswith("available") else v
        return "phax info names no cpu_bf16 tier"

    def lm_study(self, exp, corpus):
        s = self.s
        say(f"{exp}: PHA, transformer, serial on {corpus}; matched non-embedding parameters; seeds " +
            ",".join(map(str, s["lm_seeds"])))
        cfgs, target = self.lm_configs()
        res = dict(target=target, models={}, corpora=[corpus], seeds=s["lm_seeds"],
                   steps=s["lm_steps"], tokens=s["lm_steps"] * s["B"] * s["T"], base=s["lm_base"])
        for m, (path, n) in cfgs.items():
            note(f"lm: {m}: {n} non-embedding parameters (PHA {target}, {100 * (n - target) / target:+.1f} %)")
            res["models"][m] = dict(config=path, nonemb=n, config_json=load(path))
        # Each model at the rate the lr piece chose for it on WikiText-2 (the default without it).
        lrs = {m: self.best_lr(m) for m in cfgs}
        for m in cfgs:
            res["models"][m]["lr"] = lrs[m]
        for seed in s["lm_seeds"]:
            for m, (path, n) in cfgs.items():
                name = self.lr_name("lm", corpus, m, lrs[m], seed)
                prefix = os.path.join(self.out, exp, name + ".test")
                d = self.r.train(exp, name, self.lm_train_args(corpus, path, seed, s["lm_steps"], lr=lrs[m]),
                                 needs=[prefix + ".json"])
                ppl = self.test_ppl(exp, d, corpus, prefix)
                rec = self.run_summary(d)
                rec.update(test_ppl=ppl, corpus=corpus, seed=seed, model=m, run=d, lr=lrs[m],
                           params=self.r.counts(d)[0])
                res.setdefault("runs", []).append(rec)
                note(f"{exp}: {name}: test ppl {ppl:.2f}")
        save(os.path.join(self.out, exp, "results.json"), res)

    # --- (a) ablations ---------------------------------------------------------------------------
    def exp_ablation(self):
        s = self.s
        if not s["ablation"]:
            note("ablation: not in quick mode (--full)")
            return
        say("ablation: PHA without attention, GSS, FFN; frozen equal mix; seeds " +
            ",".join(map(str, s["abl_seeds"])))
        base = dict(s["lm_base"], family="pha")
        target = self.pha_target()
        models = {"pha": (write_config(self.cfg_dir, "pha", base), target)}
        for name, (ov, knob) in S.ABLATIONS.items():
            models[name] = self.matched_cfg(name, base, ov, knob, target)
        # Every arm at PHA's rate (the lr piece's choice; the arms are PHA with a branch off).
        lr = self.best_lr("pha")
        res = dict(target=target, models={m: dict(nonemb=n, config_json=load(p)) for m, (p, n) in models.items()},
                   seeds=s["abl_seeds"], steps=s["abl_steps"], lr=lr, runs=[])
        corpus = s["corpora"][0]
        for seed in s["abl_seeds"]:
            for m, (path, n) in models.items():
                if seed not in s["abl_seeds"][:S.ABL_FEW_SEEDS.get(m, len(s["abl_seeds"]))]:
                    continue
                # PHA itself is the lm run when the settings agree (same name, same command).
                lm_pha = m == "pha" and s["abl_steps"] == s["lm_steps"]
                name = self.lr_name("lm" if lm_pha else "abl", corpus, m, lr, seed)
                if lm_pha:
                    path = write_config(self.cfg_dir, "pha", base)
                prefix = os.path.join(self.out, "lm" if lm_pha else "ablation", name + ".test")
                d = self.r.train("ablation", name, self.lm_train_args(corpus, path, seed, s["abl_steps"], lr=lr),
                                 needs=[prefix + ".json"])
                ppl = self.test_ppl("ablation", d, corpus, prefix)
                rec = self.run_summary(d)
                rec.update(model=m, seed=seed, test_ppl=ppl, nonemb=n, run=d, lr=lr)
                res["runs"].append(rec)
                note(f"ablation: {name}: test ppl {ppl:.2f}")
        save(os.path.join(self.out, "ablation", "results.json"), res)

    # --- (c) sandwich: mix weights at two depths ---------------------------------------------------
    def exp_sandwich(self):
        """Depths below 12: the lm depth (the lm runs) and the deeper ones, trained
        sandwich_deep_steps (3x the lm runs in full mode)."""
        self.sandwich_study("sandwich", [L for L in self.s["sandwich_depths"] if L < 12])

    def exp_sandwich12(self):
        """12 blocks (and deeper), 3 seeds, trained sandwich_deep_steps: ~90 min alone."""
        deep = [L for L in self.s["sandwich_depths"] if L >= 12]
        if not deep:
            note("sandwich12: not in quick mode (--full)")
            return
        self.sandwich_study("sandwich12", deep)

    def sandwich_study(self, exp, depths):
        s = self.s
        say(f"{exp}: PHA mix weights at depths " + ",".join(map(str, depths)))
        corpus = s["corpora"][0]
        res = dict(depths={}, seeds=s["sandwich_seeds"], steps={})
        lr = self.best_lr("pha")
        for L in depths:
            base = dict(s["lm_base"], family="pha", n_layers=L)
            lm_depth = L == s["lm_base"]["n_layers"]
            path = write_config(self.cfg_dir, "pha" if lm_depth else f"pha_L{L}", base)
            steps = s["lm_steps"] if lm_depth else s["sandwich_deep_steps"]
            runs = []
            for seed in s["sandwich_seeds"]:
                name = self.lr_name("lm", corpus, "pha", lr, seed) if lm_depth \
                    else self.lr_name("mix", corpus, f"pha_L{L}_n{steps}", lr, seed)
                d = self.r.train(exp, name, self.lm_train_args(corpus, path, seed, steps, lr=lr))
                rs = self.run_summary(d)
                if not rs["mix"]:
                    raise JobError(f"{exp}: {d}/log.jsonl has no mix weights")
                runs.append(dict(seed=seed, final=rs["mix"][-1][1], trajectory=rs["mix"], run=d, val_ppl=rs["val_ppl"]))
            res["depths"][str(L)] = runs
            res["steps"][str(L)] = steps
        save(os.path.join(self.out, exp, "results.json"), res)

    # --- scaling: three widths at a fixed tokens-per-parameter budget ---------------------------
    def exp_scaling_s(self):
        self.scaling_piece("scaling_s")

    def exp_scaling_l(self):
        self.scaling_piece("scaling_l")

    def scaling_piece(self, exp):
        """PHA, transformer and serial at d_model settings.SCALE_DIMS[exp] (4 blocks, head dim d/4),
        the other two families matched to PHA's count by the FFN width (as in lm); steps =
        the lm runs' steps x PHA's count here / PHA's count at the lm width (the same tokens per
        parameter); each family at its lr-piece rate; test perplexity on the whole test split.
        The middle size is the lm piece."""
        s = self.s
        if not s["scaling"]:
            note(f"{exp}: not in quick mode (--full)")
            return
        corpus = s["corpora"][0]
        dm = s["scale_dims"][exp]
        base = dict(s["lm_base"], d_model=dm, head_dim=max(1, dm // s["lm_base"]["n_heads"]))
        cfgs, target = self.lm_configs(base, tag=f"_d{dm}")
        mid = self.pha_target()
        steps = max(1, round(s["lm_steps"] * target / mid))
        say(f"{exp}: PHA, transformer, serial at d {dm} ({target:,} non-embedding parameters, "
            f"{steps} steps: the lm runs' tokens per parameter); seeds " + ",".join(map(str, s["scale_seeds"])))
        res = dict(d_model=dm, target=target, mid_target=mid, steps=steps, tokens=steps * s["B"] * s["T"],
                   seeds=s["scale_seeds"], models={}, runs=[])
        for m, (path, n) in cfgs.items():
            res["models"][m] = dict(nonemb=n, config_json=load(path), lr=self.best_lr(m))
        for seed in s["scale_seeds"]:
            for m, (path, n) in cfgs.items():
                lr = res["models"][m]["lr"]
                name = self.lr_name("scale", corpus, f"{m}_d{dm}", lr, seed)
                prefix = os.path.join(self.out, exp, name + ".test")
                d = self.r.train(exp, name, self.lm_train_args(corpus, path, seed, steps, lr=lr),
                                 needs=[prefix + ".json"])
                ppl = self.test_ppl(exp, d, corpus, prefix)
                rec = self.run_summary(d)
                rec.update(test_ppl=ppl, seed=seed, model=m, run=d, lr=lr, nonemb=n)
                res["runs"].append(rec)
                note(f"{exp}: {name}: test ppl {ppl:.2f}")
        save(os.path.join(self.out, exp, "results.json"), res)

    # --- (b) iso-perplexity efficiency ------------------------------------------------------------
    def bench_model(self, stage, cfg_path, family, T, prefix):
        if not os.path.exists(prefix + ".csv"):
            a = [os.path.join(self.r.build_dir, "bench_model"), "--family", family, "--T", str(T),
                 "--config", cfg_path, "--steps", str(self.s["eff_steps"]), "--csv", prefix + ".csv"]
            run_logged(stage, a, prefix + ".out", prefix + ".cmd", [prefix + ".csv"])
        with open(prefix + ".csv") as f:
            row = next(csv.DictReader(f))
        return dict(tokens_per_s=float(row["tokens_per_s"]), peak_mb=float(row["peak_rss_mb"]),
                    state_mb=float(row["state_mb"]), ws_mb=float(row["ws_mb"]))

    def bench_decode(self, stage, cfg_path, family, contexts, prefix):
        if not os.path.exists(prefix + ".csv"):
            a = [os.path.join(self.r.build_dir, "bench_decode"), "--family", family, "--config", cfg_path,
                 "--contexts", ",".join(map(str, contexts)), "--csv", prefix + ".csv"]
            run_logged(stage, a, prefix + ".out", prefix + ".cmd", [prefix + ".csv"])
        with open(prefix + ".csv") as f:
            return {int(r["context"]): dict(prefill_tok_s=float(r["prefill_tok_s"]),
                                            step_tok_s=float(r["step_tok_s"]),
                                            state_bytes=float(r["state_bytes"]),
                                            peak_mb=float(r["peak_rss_mb"]),
                                            params=int(r["params"])) for r in csv.DictReader(f)}

    def exp_iso(self):
        s = self.s
        if not s["iso"]:
            note("iso: not in quick mode (--full)")
            return
        say("iso: transformers of sizes d " + ",".join(map(str, s["iso_dims"])) + " for the iso-perplexity pair")
        corpus = s["corpora"][0]
        lmres = os.path.join(self.out, "lm", "results.json")  # WikiText-2
        if not os.path.exists(lmres):
            self.exp_lm()
        lm = load(lmres)
        for m, v in lm["models"].items():  # lm restored from the record: its config files are not here
            if not os.path.exists(v["config"]):
                v["config"] = write_config(self.cfg_dir, os.path.splitext(os.path.basename(v["config"]))[0], v["config_json"])
        sizes = {}
        # The lm transformer (matched parameters) is one size; the others scale d_model.
        sizes[f"d{s['lm_base']['d_model']}_matched"] = dict(config=lm["models"]["transformer"]["config"], nonemb=lm["models"]["transformer"]["nonemb"], lr=lm["models"]["transformer"].get("lr", s["lr"]),
                           runs=[r for r in lm["runs"] if r["model"] == "transformer" and r["corpus"] == corpus])
        for key, (path, n) in self.iso_cfgs().items():
            lr = self.best_lr(key)
            runs = []
            for seed in s["iso_seeds"]:
                name = self.lr_name("iso", corpus, key, lr, seed)
                prefix = os.path.join(self.out, "iso", name + ".test")
                d = self.r.train("iso", name, self.lm_train_args(corpus, path, seed, s["lm_steps"], lr=lr),
                                 needs=[prefix + ".json"])
                ppl = self.test_ppl("iso", d, corpus, prefix)
                rec = self.run_summary(d)
                rec.update(seed=seed, test_ppl=ppl, run=d, lr=lr)
                runs.append(rec)
            sizes[key[len("transformer_"):]] = dict(config=path, nonemb=n, runs=runs, lr=lr)
        pha_ppl = [r["test_ppl"] for r in lm["runs"] if r["model"] == "pha" and r["corpus"] == corpus]
        save(os.path.join(self.out, "iso", "results.json"),
             dict(pha_ppl=pha_ppl, pha_nonemb=lm["models"]["pha"]["nonemb"],
                  pha_lr=lm["models"]["pha"].get("lr", s["lr"]), pha_config=lm["models"]["pha"]["config_json"],
                  sizes={k: dict(nonemb=v["nonemb"], lr=v["lr"], config=load(v["config"]),
                                 test_ppl=[r["test_ppl"] for r in v["runs"]]) for k, v in sizes.items()},
                  T=s["iso_T"]))

    def exp_iso_bench(self):
        """Timings and memory of PHA and of the transformers whose perplexities bracket PHA's
        (the iso piece's; the nearest when none does), batch 1 at each iso_T: training step
        (bench_model: tokens/s, peak resident memory of the fresh process, its activation
        workspace and its parameters + gradients + AdamW state), prefill and decode (bench_decode:
        tokens/s, decoder state bytes, peak). iso_reps repeats, each a fresh process, the models
        taken in turn within a repeat so that a slow spell of the machine falls on all of them;
        the report takes medians and prints the spread and the load."""
        from .report import interp_match, mean_sd
        s = self.s
        if not s["iso"]:
            note("iso_bench: not in quick mode (--full)")
            return
        ip = os.path.join(self.out, "iso", "results.json")
        if not os.path.exists(ip):
            raise JobError("iso_bench: needs the iso piece's results (run --only iso first)")
        iso = load(ip)
        sizes = [(v["nonemb"], mean_sd(v["test_ppl"])[0], k) for k, v in iso["sizes"].items() if v["test_ppl"]]
        k0, k1, f, n_match, bracketed = interp_match(sizes, mean_sd(iso["pha_ppl"])[0])
        chosen = [k0] + ([k1] if k1 != k0 else [])
        say(f"iso_bench: PHA and transformer {', '.join(chosen)} at T {', '.join(map(str, s['iso_T']))}; "
            f"{s['iso_reps']} repeats")
        cfgs = {"pha": (write_config(self.cfg_dir, "iso_pha", iso["pha_config"]), "pha")}
        for k in chosen:
            cfgs[k] = (write_config(self.cfg_dir, f"iso_transformer_{k}", iso["sizes"][k]["config"]), "transformer")
        d = os.path.join(self.out, "iso_bench")
        os.makedirs(d, exist_ok=True)
        res = dict(T=s["iso_T"], reps=s["iso_reps"], pair=chosen, fraction=f, n_match=n_match, bracketed=bracketed,
                   params={}, train={k: {str(T): [] for T in s["iso_T"]} for k in cfgs},
                   decode={k: {str(T): [] for T in s["iso_T"]} for k in cfgs}, loads=[])
        for rep in range(s["iso_reps"]):
            res["loads"].append(open("/proc/loadavg").read().split()[:3])
            for key, (path, fam) in cfgs.items():
                for T in s["iso_T"]:
                    res["train"][key][str(T)].append(self.bench_model("iso_bench", path, fam, T,
                                                                      os.path.join(d, f"bench_{key}_T{T}_r{rep}")))
                dec = self.bench_decode("iso_bench", path, fam, s["iso_T"], os.path.join(d, f"decode_{key}_r{rep}"))
                for T in s["iso_T"]:
                    res["decode"][key][str(T)].append(dec[T])
                res["params"][key] = dec[s["iso_T"][0]].get("params")
            note(f"iso_bench: repeat {rep + 1}/{s['iso_reps']} done")
        save(os.path.join(d, "results.json"), res)

    # --- (d) SWAX window study: the synthetic recall task --------------------------------------------
    def recall_args(self, model, task, seed, family=None):
        """phax train's arguments of a recall run: regime `model` of S.REGIMES, its family or
        `family` in its place (the generality study's backbones)."""
        s = self.s
        fam, ov = S.REGIMES[model]
        cfg = dict(s["recall_model"], family=family or fam, **ov)
        path = write_config(self.cfg_dir, f"recall_{model}" + (f"_{family}" if family else ""), cfg)
        t = s["recall_tasks"][task]
        return ["--config", path, "--task", "recall", "--recall-pairs", str(t["pairs"]),
                "--recall-queries", str(t["queries"]), "--seq", str(S.RECALL_T), "--batch", str(S.RECALL_B),
                "--steps", str(t["steps"]), "--lr", str(S.RECALL_LR), "--min-lr", str(S.RECALL_LR / 10),
                "--warmup", str(min(100, t["steps"] // 10)), "--eval-every", str(max(1, t["steps"] // 4)),
                "--eval-tokens", str(64 * S.RECALL_T), "--seed", str(seed), "--log-every", "100"]

    def exp_recall(self):
        self.recall_study("recall", "needle")

    def exp_bind(self):
        if "bind" not in self.s["recall_tasks"]:
            note("bind: not in quick mode (--full)")
            return
        self.recall_study("bind", "bind")

    def exp_generality(self):
        """The recall piece's window regimes with another backbone in place of SWAX's mLSTM
        (S.GEN_BACKBONES: full attention alternating with SWA), the same task (one needle), sizes,
        seeds and evaluation; report.section_generality judges the two SWAX claims on each."""
        if not self.s["generality"]:
            note("generality: not in quick mode (--full)")
            return
        self.recall_study("generality", "needle", backbones=self.s["gen_backbones"], mults=self.s["gen_lengths"])

    def recall_study(self, exp, only_task, backbones=None, mults=None):
        """The window regimes on the recall task: SWAX's (backbones None), or each backbone's
        family in SWAX's place (runs tagged with the backbone; the regimes of S.GEN_REGIMES), read
        at the multiples of T `mults` (default the recall piece's)."""
        s = self.s
        say(f"{exp}: SWAX window regimes on the synthetic recall task ({only_task})"
            + (f", backbones {', '.join(backbones)}" if backbones else ""))
        lengths = [k * S.RECALL_T for k in (mults or s["recall_lengths"])]
        depths = s["recall_depths"]
        models = [m for m in s["recall_models"] if m in S.GEN_REGIMES] if backbones else s["recall_models"]
        res = dict(T=S.RECALL_T, lengths=lengths, depths=depths, samples=s["recall_samples"],
                   tasks={only_task: s["recall_tasks"][only_task]}, models=models, seeds=s["recall_seeds"],
                   w_short=s["recall_model"]["w_short"], w_long=s["recall_model"]["w_long"], runs=[])
        if backbones:
            res["backbones"] = dict(backbones)
        task, t = only_task, s["recall_tasks"][only_task]
        for bb, fam in (backbones or {None: None}).items():
            for model in models:
                for seed in s["recall_seeds"]:
                    self.recall_run(exp, res, task, t, model, seed, bb, fam, lengths, depths)
        save(os.path.join(self.out, exp, "results.json"), res)

    def recall_run(self, exp, res, task, t, model, seed, backbone, family, lengths, depths):
        """One regime and seed: trained, then read by phax recall at w_long (short: also at its
        w_short); its cells appended to res["runs"]."""
        s = self.s
        name = f"recall-{task}-{model}-s{seed}" if not family else f"gen-{family}-{task}-{model}-s{seed}"
        windows = [None]
        if model == "short":
            windows.append(s["recall_model"]["w_short"])  # also at its training window
        needs = [os.path.join(self.out, exp, name + (f"-w{w}" if w else "")) + ".json" for w in windows]
        d = self.r.train(exp, name, self.recall_args(model, task, seed, family), needs=needs)
        for w in windows:
            prefix = os.path.join(self.out, exp, name + (f"-w{w}" if w else ""))
            if not os.path.exists(prefix + ".json"):
                a = [self.r.phax, "recall", "--ckpt", d, "--lengths", ",".join(map(str, lengths)),
                     "--depths", ",".join(map(str, depths)), "--samples", str(s["recall_samples"]),
                     "--pairs", str(t["pairs"]), "--seed", "0"]
                if w:
                    a += ["--window", str(w)]
                run_logged(exp, a + ["--json", prefix + ".json"], prefix + ".out", prefix + ".cmd",
                           [prefix + ".json"])
            cells = load(prefix + ".json")["cells"]
            run = dict(task=task, model=model, seed=seed, window=w, cells=cells, run=d,
                       val_loss=[l for l in self.r.log(d) if "val_loss" in l][-1:])
            if backbone:
                run["backbone"] = backbone
            res["runs"].append(run)
            note(f"{exp}: {name}{' at w ' + str(w) if w else ''}: {acc_line(cells)}")

    # --- (d') SWAX window study at the paper's ratios: multi-query associative recall -----------
    def mqar_arm(self, arm):
        """(family, config overrides, evaluation window, length multiples) of an arm: a regime of
        S.MQAR_ARMS or a fixed-window point "w<W>" of the window sweep (swax at window W)."""
        s = self.s
        T, m = s["mqar_T"], s["mqar_model"]
        if arm.startswith("w"):
            w = int(arm[1:])
            return "swax", dict(w_short=w, w_long=w, p_short=0.0), w, s["mqar_lengths"]
        if arm == "full":
            return "swa", dict(w_short=T, w_long=T, p_short=0.0), 0, s["mqar_full_lengths"]
        fam, ov = S.MQAR_ARMS[arm]
        # Each model is read at the window it ended training with: short at w_short, the others
        # at w_long (stochastic anneals to it); mlstm_only has no window. Short trains at w_short
        # only, so its w_long is w_short too: the validation while training (at w_long) then
        # reads it at its own window, which the learning-rate choice and the curves need.
        if arm == "short":
            ov = dict(ov, w_long=m["w_short"])
        w = m["w_short"] if arm == "short" else -1
        return fam, ov, w, s["mqar_lengths"]

    def mqar_train(self, exp, arm, seed, lr, needs=()):
        s = self.s
        fam, ov, _, _ = self.mqar_arm(arm)
        cfg = dict(s["mqar_model"], family=fam, **ov)
        path = write_config(self.cfg_dir, f"mqar_{arm}", cfg)
        t, steps = s["mqar_task"], s["mqar_steps"]
        a = ["--config", path, "--task", "mqar", "--recall-pairs", str(t["pairs"]), "--recall-queries", str(t["queries"]),
             "--recall-vary", str(t["vary"]), "--seq", str(s["mqar_T"]), "--batch", str(s["mqar_B"]),
             "--steps", str(steps), "--lr", str(lr), "--min-lr", str(lr / 10), "--wd", "0",
             "--warmup", str(max(1, steps // 20)), "--eval-every", str(max(1, steps // 6)),
             "--eval-tokens", str(64 * s["mqar_T"]), "--seed", str(seed), "--log-every", "100"]
        return self.r.train(exp, f"mqar-{arm}-lr{lr:g}-s{seed}", a, needs=needs)

    def mqar_piece(self, exp):
        """One mqar piece (S.MQAR_PIECES): per arm a learning-rate sweep on seed 1 (the lowest final
        validation loss of the answers at T picks the rate; the window sweep's fixed windows take
        the short regime's, from mqar_short), then every seed at that rate, each read by phax recall
        --task mqar at multiples of T: accuracy, mean log-probability and the elimination floor by
        key-to-query distance bin."""
        s = self.s
        if not s["mqar"]:
            note(f"{exp}: not in quick mode (--full)")
            return
        arms = s["mqar_pieces"][exp]
        say(f"{exp}: multi-query recall at the SWAX paper's window ratios: {', '.join(arms)}")
        T, t = s["mqar_T"], s["mqar_task"]
        res = dict(T=T, task=t, model=s["mqar_model"], seeds=s["mqar_seeds"], samples=s["mqar_samples"],
                   steps=s["mqar_steps"], lrs=s["mqar_lrs"], arms=arms, w_short=s["mqar_model"]["w_short"],
                   w_long=s["mqar_model"]["w_long"], sweep=[], best={}, runs=[])
        seeds = s["mqar_seeds"]
        if exp == "mqar_ref":  # the sweep and seed 1; mqar_ref2 the other seeds at its rate
            seeds = seeds[:1]
        elif exp == "mqar_ref2":
            seeds = seeds[1:]
        res["seeds"] = seeds
        for arm in arms:
            if exp == "mqar_ref2":
                rp = os.path.join(self.out, "mqar_ref", "results.json")
                if not os.path.exists(rp):
                    raise JobError(f"{exp}: takes the rate mqar_ref chose: run mqar_ref first "
                                   "(./evals/run_all.sh --full --only mqar_ref)")
                res["best"][arm] = load(rp)["best"][arm]
            elif arm.startswith("w"):
                sl = os.path.join(self.out, "mqar_short", "results.json")
                if not os.path.exists(sl):
                    raise JobError(f"{exp}: the window sweep takes the short regime's rate: run mqar_short first "
                                   "(./evals/run_all.sh --full --only mqar_short)")
                res["best"][arm] = load(sl)["best"]["short"]
            else:
                for lr in s["mqar_lrs"]:
                    d = self.mqar_train(exp, arm, 1, lr)
                    curve = [l for l in self.r.log(d) if "val_loss" in l]
                    v = curve[-1] if curve else None
                    res["sweep"].append(dict(arm=arm, lr=lr, run=d, val=v, curve=curve))
                    note(f"{exp}: {arm} lr {lr:g}: " + (f"val_loss {v['val_loss']:.4f} val_acc {v['val_acc']:.3f}"
                                                        if v else "no validation line"))
                ok = [r for r in res["sweep"] if r["arm"] == arm and r["val"] and math.isfinite(r["val"]["val_loss"])]
                res["best"][arm] = min(ok, key=lambda r: r["val"]["val_loss"])["lr"] if ok else s["mqar_lrs"][0]
            _, _, w, mult = self.mqar_arm(arm)
            lengths = [k * T for k in mult]
            for seed in seeds:
                lr = res["best"][arm]
                prefix = os.path.join(self.out, exp, f"mqar-{arm}-s{seed}")
                d = self.mqar_train(exp, arm, seed, lr, needs=[prefix + ".json"])
                if not os.path.exists(prefix + ".json"):
                    a = [self.r.phax, "recall", "--ckpt", d, "--task", "mqar", "--pairs", str(t["pairs"]),
                         "--queries", str(t["eval_queries"]), "--lengths", ",".join(map(str, lengths)),
                         "--samples", str(s["mqar_samples"]), "--seed", "0", "--window", str(w)]
                    run_logged(exp, a + ["--json", prefix + ".json"], prefix + ".out", prefix + ".cmd",
                               [prefix + ".json"])
                ev = load(prefix + ".json")
                curve = [l for l in self.r.log(d) if "val_loss" in l]
                res["runs"].append(dict(arm=arm, seed=seed, lr=lr, window=ev["window"], run=d,
                                        val=curve[-1] if curve else None, curve=curve, floor=ev["floor"],
                                        cells=ev["cells"]))
                at_T = [c for c in ev["cells"] if c["length"] == T]
                n = sum(c["queries"] for c in at_T)
                acc = sum(c["correct"] for c in at_T) / n if n else float("nan")
                note(f"{exp}: {arm} s{seed} (lr {lr:g}, window {ev['window']}): accuracy at T {acc:.3f} "
                     f"(floor {ev['floor']:.3f})")
        save(os.path.join(self.out, exp, "results.json"), res)

    # --- (d) SWAX window study: RULER-style needles in WikiText-2 -----------------------------------
    def exp_niah(self):
        self.niah_study("niah", ["short", "long", "stochastic"])

    def exp_niah_ctl(self):
        self.niah_study("niah_ctl", ["swa_only", "mlstm_only"])

    def niah_study(self, exp, regimes):
        s = self.s
        if not s["niah"]:
            note(f"{exp}: not in quick mode (--full)")
            return
        corpus = "wikitext-2"
        if corpus not in self.corpora:
            note("niah: skipped (needs WikiText-2: PTB has no digits)")
            return
        say("niah: word-level SWAX regimes with --niah-frac " + str(s["niah_frac"]))
        T = s["T"]
        lengths = [k * T for k in s["niah_lengths"]]
        res = dict(T=T, lengths=lengths, runs=[], variants=s["niah_variants"], haystacks=s["niah_haystacks"])
        for model in [m for m in s["niah_models"] if m in regimes]:
            fam, ov = S.REGIMES[model]
            cfg = dict(s["lm_base"], family=fam, **ov)
            path = write_config(self.cfg_dir, f"niah_{model}", cfg)
            for seed in s["niah_seeds"]:
                name = f"niah-{corpus}-{model}-s{seed}"
                prefix = os.path.join(self.out, "niah", name)
                d = self.r.train("niah", name, self.lm_train_args(corpus, path, seed, s["niah_steps"],
                                                                  extra=["--niah-frac", str(s["niah_frac"])]),
                                 needs=[prefix + ".csv", prefix + ".test.json"])
                if not os.path.exists(prefix + ".csv"):
                    a = [self.r.phax, "niah", d, "--data", self.corpora[corpus], "--lengths", ",".join(map(str, lengths)),
                         "--variants", s["niah_variants"], "--haystacks", s["niah_haystacks"],
                         "--n-depths", str(s["niah_depths"]), "--samples", str(s["niah_samples"]), "--seed", "0",
                         "--csv", prefix + ".csv"]
                    run_logged("niah", a, prefix + ".out", prefix + ".cmd", [prefix + ".csv"])
                ppl = self.test_ppl("niah", d, corpus, prefix + ".test")
                with open(prefix + ".csv") as f:
                    cells = [dict(variant=r["variant"], haystack=r["haystack"], length=int(r["length"]),
                                  depth=float(r["depth"]), samples=int(r["samples"]), accuracy=float(r["accuracy"]))
                             for r in csv.DictReader(f)]
                res["runs"].append(dict(model=model, seed=seed, test_ppl=ppl, cells=cells, run=d))
                note(f"niah: {name}: test ppl {ppl:.2f}")
        save(os.path.join(self.out, exp, "results.json"), res)

    # --- (e) efficiency curves ----------------------------------------------------------------------
    def exp_efficiency(self):
        s = self.s
        say("efficiency: training, prefill and decode cost vs T for " + ", ".join(s["eff_families"]))
        res = dict(T=s["eff_T"], contexts=s["eff_contexts"], families={})
        d = os.path.join(self.out, "efficiency")
        os.makedirs(d, exist_ok=True)
        for fam in s["eff_families"]:
            cfg = dict(s["lm_base"], family=fam)
            path = write_config(self.cfg_dir, f"eff_{fam}", dict(cfg, vocab_size=8192))
            train = {}
            for T in s["eff_T"]:
                train[str(T)] = self.bench_model("efficiency", path, fam, T, os.path.join(d, f"train_{fam}_T{T}"))
            dec = self.bench_decode("efficiency", path, fam, s["eff_contexts"], os.path.join(d, f"decode_{fam}"))
            res["families"][fam] = dict(train=train, decode={str(k): v for k, v in dec.items()})
            note(f"efficiency: {fam}: " + ", ".join(f"T {T} {train[str(T)]['tokens_per_s']:.0f} tok/s" for T in s["eff_T"]))
        save(os.path.join(d, "results.json"), res)
