"""summary.md: the claims table (claim, the paper's number, what phax measured with
mean ± spread over seeds, the verdict, the figure), then one section per experiment
with its tables and the commands; the figures drawn with gnuplot (plots/*.gp).

Verdict rules (also printed in summary.md):
  * Two means differ "beyond noise" when |a - b| > 2·SE with SE = sqrt(sd_a²/n_a +
    sd_b²/n_b), both with at least 2 seeds; with one seed nothing is beyond noise.
  * A claim "holds" when the measured direction is the paper's and beyond noise (or,
    for "≈", the difference is within the stated tolerance), "does not hold" when the
    opposite is beyond noise, "inconclusive" otherwise, and "not run" without data.
"""
import json
import math
import os
import platform
import statistics
import subprocess
import time

PAPER = {
    "pha_tr": "PHA reaches transformer perplexity (PHA paper: on par or better at 125-180 M)",
    "par_ser": "parallel beats serial stacking (PHA paper)",
    "no_attn": "removing attention hurts most (PHA paper's ablation)",
    "sandwich": "learned mix is a sandwich: GSS dominates first and last blocks, attention the middle",
    "iso": "at 8k context and equal perplexity: +23.9 % training throughput, -22.0 % memory vs attention-only",
    "short_extrap": "short SWA windows make the mLSTM layers learn long-range recall (needles far beyond the training length)",
    "stoch_both": "stochastic windows (annealed to long) keep short-context quality and the long-range recall",
}
CHANCE_RECALL = 1 / 16
SANDWICH_MARGIN = 0.01  # a weight counts as larger when it is larger by this much (weights sum to 1)


def mean_sd(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None, 0
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None), len(xs)


def seed_sd(xs):
    """The spread a figure draws: the sample standard deviation, 0 with one seed (nothing to draw)."""
    return mean_sd(xs)[1] or 0.0


def fmt_ms(xs, digits=2, pct=False):
    m, sd, n = mean_sd(xs)
    if m is None:
        return "n/a"
    f = (lambda v: f"{100 * v:.{digits}f} %") if pct else (lambda v: f"{v:.{digits}f}")
    return f"{f(m)} ± {f(sd)} (n={n})" if sd is not None else f"{f(m)} (n=1)"


def beyond_noise(a, b):
    """+1 when mean a > mean b beyond 2 SE, -1 when below, 0 otherwise."""
    ma, sa, na = mean_sd(a)
    mb, sb, nb = mean_sd(b)
    if ma is None or mb is None or na < 2 or nb < 2:
        return 0
    se = math.sqrt(sa ** 2 / na + sb ** 2 / nb)
    if abs(ma - mb) > 2 * se:
        return 1 if ma > mb else -1
    return 0


def load(out, exp):
    p = os.path.join(out, exp, "results.json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def load_merged(out, exps, list_keys):
    """Several pieces' results as one: the first piece's fields, the list fields joined
    and the dict fields (e.g. tasks) merged."""
    res = None
    for e in exps:
        r = load(out, e)
        if not r:
            continue
        if res is None:
            res = r
            continue
        for k in list_keys:
            res[k] = res.get(k, []) + [x for x in r.get(k, []) if x not in res.get(k, [])]
        for k, v in r.items():
            if isinstance(v, dict) and isinstance(res.get(k), dict):
                res[k] = dict(res[k], **v)
    return res


def cpu_name():
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
    except OSError:
        return ""


# --- figures ------------------------------------------------------------------------------------
class Plots:
    def __init__(self, out, subtitle, local_only):
        tiny = local_only
        self.out = out
        self.dir = os.path.join(out, "plots")
        os.makedirs(self.dir, exist_ok=True)
        self.subtitle = subtitle
        self.tiny = tiny
        self.made = []

    def draw(self, script, name, data, sub, **vars_):
        """Write data (text) beside the figure, run gnuplot plots/<script>.gp."""
        tsv = os.path.join(self.dir, name + ".tsv")
        with open(tsv, "w") as f:
            f.write(data)
        png = os.path.join(self.dir, name + ".png") if self.tiny else os.path.join("plots", name + ".png")
        # gnuplot single-quoted string: a quote is written twice; '_' would start a subscript.
        s = (self.subtitle + "; " + sub).replace("_", "\\\\_").replace("'", "''")
        v = f"in='{tsv}'; out='{png}'; subtitle='{s}'"
        for k, x in vars_.items():
            v += f"; {k}={x!r}" if isinstance(x, str) else f"; {k}={x}"
        r = subprocess.run(["gnuplot", "-e", v, f"plots/{script}.gp"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"   figure {name}: gnuplot failed: {r.stderr.strip().splitlines()[-1:]}")
            return None
        if not self.tiny:
            subprocess.run(["cp", png, os.path.join(self.dir, name + ".png")])
        self.made.append(name)
        return name


def fig(name):
    return f"![{name}](plots/{name}.png)\n" if name else "(figure not drawn: see the job's output)\n"


def md_table(header, rows):
    s = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
    for r in rows:
        s += "| " + " | ".join(str(x) for x in r) + " |\n"
    return s


def cmds(paths):
    lines = []
    for p in paths:
        if os.path.exists(p):
            lines += [l.rstrip() for l in open(p) if l.strip() and not l.startswith("#")]
    return "```sh\n" + "\n".join(lines) + "\n```\n" if lines else ""


# --- per experiment: tables, figures and the claims they answer ----------------------------------
def section_lm(out, st, P, claims):
    lm = load_merged(out, ["lm", "ptb"], ["runs", "corpora"])
    if not lm:
        return ""
    txt = "## lm: PHA, transformer, serial hybrid (matched parameters, same tokens)\n\n"
    txt += (f"Models: {json.dumps(lm['base'])}, T {st['T']}, batch {st['B']}, {lm['steps']} steps = "
            f"{lm['tokens']:,} training tokens each (the same token budget), AdamW lr {st['lr']} → {st['min_lr']}. "
            f"Non-embedding parameters matched to PHA's {lm['target']:,} within 3 % by the FFN hidden width:\n\n")
    txt += md_table(["model", "non-embedding params", "vs PHA", "ffn_hidden"],
                    [[m, f"{v['nonemb']:,}", f"{100 * (v['nonemb'] - lm['target']) / lm['target']:+.1f} %",
                      v["config_json"].get("ffn_hidden", "default")] for m, v in lm["models"].items()])
    txt += "\n"
    runs = lm["runs"]
    for corpus in lm["corpora"]:
        rows, by = [], {}
        for m in lm["models"]:
            rs = [r for r in runs if r["corpus"] == corpus and r["model"] == m]
            if not rs:
                continue
            by[m] = [r["test_ppl"] for r in rs]
            rows.append([m, len(rs), fmt_ms(by[m]), fmt_ms([r["val_ppl"] for r in rs]),
                         fmt_ms([r["tokens_per_s"] for r in rs], 0),
                         ", ".join(f"{r['test_ppl']:.2f}" for r in rs)])
        txt += f"**{corpus}** test perplexity ({'the whole test split' if not st['test_max'] else 'the first %d test tokens' % st['test_max']}, windows of T):\n\n"
        txt += md_table(["model", "seeds", "test ppl (mean ± sd)", "last val ppl", "train tokens/s", "per seed"], rows) + "\n"
        # Curves: mean ± sd over seeds at each validation.
        data = ""
        for m in lm["models"]:
            rs = [r for r in runs if r["corpus"] == corpus and r["model"] == m]
            if not rs:
                continue
            steps = sorted({s for r in rs for s, _ in r["curve"]})
            data += f"tokens\t{m}\tsd\n"
            for s_ in steps:
                vals = [v for r in rs for s2, v in r["curve"] if s2 == s_]
                mu, sd, _ = mean_sd(vals)
                data += f"{s_ * st['B'] * st['T']}\t{mu}\t{sd or 0}\n"
            data += "\n\n"
        name = P.draw("lm_curves", f"lm_curves_{corpus}", data,
                      f"{corpus}, d {lm['base']['d_model']}, {lm['base']['n_layers']} layers, "
                      f"{lm['target'] / 1e6:.2f} M non-embedding parameters each, "
                      f"{len(lm['seeds'])} seed(s), mean ± sd")
        txt += fig(name) + "\n"
        if "pha" in by and "transformer" in by:
            claims.setdefault("pha_tr", []).append((corpus, by["pha"], by["transformer"]))
        if "pha" in by and "serial" in by:
            claims.setdefault("par_ser", []).append((corpus, by["pha"], by["serial"]))
    txt += cmds([os.path.join(r["run"], "cmd.txt") for r in runs[:3]])  # the record restores cmd.txt there
    return txt


def verdict_pha_tr(items):
    if not items:
        return "not run", "n/a"
    parts, vs = [], []
    for corpus, pha, tr in items:
        mp, _, _ = mean_sd(pha)
        mt, _, _ = mean_sd(tr)
        rel = mp / mt - 1
        b = beyond_noise(pha, tr)
        if rel <= 0.03:
            v = "holds"
        elif b > 0:
            v = "does not hold"
        else:
            v = "inconclusive"
        vs.append(v)
        parts.append(f"{corpus}: PHA {fmt_ms(pha)} vs transformer {fmt_ms(tr)} ({100 * rel:+.1f} %)")
    v = vs[0] if len(set(vs)) == 1 else "mixed: " + ", ".join(vs)
    return v, "; ".join(parts)


def verdict_par_ser(items):
    if not items:
        return "not run", "n/a"
    parts, vs = [], []
    for corpus, pha, ser in items:
        b = beyond_noise(ser, pha)
        vs.append("holds" if b > 0 else "does not hold" if b < 0 else "inconclusive (within seed noise)")
        mp, _, _ = mean_sd(pha)
        ms, _, _ = mean_sd(ser)
        parts.append(f"{corpus}: PHA {fmt_ms(pha)} vs serial {fmt_ms(ser)} ({100 * (mp / ms - 1):+.1f} %)")
    v = vs[0] if len(set(vs)) == 1 else "mixed: " + ", ".join(vs)
    return v, "; ".join(parts)


def section_ablation(out, st, P, claims):
    ab = load(out, "ablation")
    if not ab:
        return ""
    txt = "## ablation: which PHA branch matters\n\n"
    txt += (f"PHA and PHA with one change, {ab['steps']} steps each, non-embedding parameters matched to PHA's "
            f"{ab['target']:,} within 3 % (the removed branch's parameters given to the FFN, or to the GSS "
            f"expansion when the FFN is removed). Test perplexity on {st['corpora'][0]}:\n\n")
    rows, by = [], {}
    for m, info in ab["models"].items():
        rs = [r for r in ab["runs"] if r["model"] == m]
        by[m] = [r["test_ppl"] for r in rs]
        knob = {k: info["config_json"][k] for k in ("ffn_hidden", "gss_expand") if k in info["config_json"]}
        rows.append([m, f"{info['nonemb']:,}", json.dumps(knob) if knob else "-", fmt_ms(by[m]),
                     ", ".join(f"{x:.2f}" for x in by[m])])
    txt += md_table(["model", "non-embedding params", "width changed", "test ppl (mean ± sd)", "per seed"], rows) + "\n"
    data = "model\tppl\tsd\n"
    for i, m in enumerate(ab["models"]):
        mu, sd, _ = mean_sd(by[m])
        data += f"{i}\t{mu}\t{sd or 0}\t{m}\n"
    txt += fig(P.draw("ablation", "ablation", data,
                      f"{st['corpora'][0]}, PHA d {st['lm_base']['d_model']}, {st['lm_base']['n_layers']} blocks "
                      f"and its ablations, {len(ab['seeds'])} seeds, mean ± sd")) + "\n"
    claims["no_attn"] = by
    return txt


def verdict_no_attn(by):
    if not by or "pha" not in by:
        return "not run", "n/a"
    mp, _, _ = mean_sd(by["pha"])
    deltas = {}
    for m in ("pha_noattn", "pha_nogss", "pha_noffn"):
        if m in by and by[m]:
            deltas[m] = mean_sd(by[m])[0] - mp
    if "pha_noattn" not in deltas:
        return "not run", "n/a"
    others = {k: v for k, v in deltas.items() if k != "pha_noattn"}
    worst_other = max(others, key=others.get) if others else None
    msg = ", ".join(f"{k.replace('pha_', '-').replace('no', '')}: {v:+.2f} ppl" for k, v in deltas.items())
    if worst_other is None:
        return "inconclusive", msg
    b = beyond_noise(by["pha_noattn"], by[worst_other])
    v = "holds" if b > 0 else "does not hold" if b < 0 else "inconclusive (within seed noise)"
    return v, f"test ppl change vs PHA {fmt_ms(by['pha'])}: {msg}"


def sandwich_ok(w):
    """w: per block [gss, attn, ...]. GSS above its middle mean in the first and the last
    block, attention above its edge values in the middle (mean of the middle blocks)."""
    L = len(w)
    if L < 3 or len(w[0]) < 2:
        return None
    mid = range(1, L - 1)
    g_mid = statistics.fmean(w[i][0] for i in mid)
    a_mid = statistics.fmean(w[i][1] for i in mid)
    m = SANDWICH_MARGIN
    return w[0][0] > g_mid + m and w[-1][0] > g_mid + m and a_mid > w[0][1] + m and a_mid > w[-1][1] + m


def section_sandwich(out, st, P, claims):
    sw = load(out, "sandwich")
    if not sw:
        return ""
    txt = "## sandwich: PHA's learned mix weights per block\n\n"
    txt += ("Softplus-normalised branch weights [GSS, attention, FFN] of each block at the end of training "
            "(block 0 nearest the embedding), mean over seeds; the sandwich test per seed: GSS weight in the "
            "first and the last block above its mean over the middle blocks, and attention's middle mean above "
            "its first and last block, each by more than 0.01.\n\n")
    results = []
    for L, runs in sw["depths"].items():
        ws = [r["final"] for r in runs]
        nb = len(ws[0][0])
        branches = ["gss", "attn", "ffn", "ffn_aux"][:nb]
        rows = []
        for b in range(int(L)):
            rows.append([b] + [fmt_ms([w[b][k] for w in ws], 3) for k in range(nb)])
        txt += f"**{L} blocks** ({len(runs)} seeds):\n\n" + md_table(["block"] + branches, rows) + "\n"
        ok = [sandwich_ok(w) for w in ws]
        txt += f"Sandwich per seed: {', '.join('yes' if o else 'no' for o in ok)}.\n\n"
        results.append((L, ok))
        data = ""
        for b in range(int(L)):
            for k in range(nb):
                v = [w[b][k] for w in ws]
                data += f"{k}\t{b}\t{statistics.fmean(v):.4f}\t{seed_sd(v):.4f}\n"
        txt += fig(P.draw("sandwich", f"sandwich_L{L}", data,
                          f"PHA d {st['lm_base']['d_model']}, {L} blocks, {st['corpora'][0]}, mean ± sd of "
                          f"{len(runs)} seeds", nb=nb, nblocks=int(L))) + "\n"
        # Trajectory: each block's GSS and attention weight vs step, mean over seeds.
        data = ""
        steps = sorted({s for r in runs for s, _ in r["trajectory"]})
        for b in range(int(L)):
            for k, br in enumerate(branches[:2]):
                data += f"step\tblock {b} {br}\n"
                for s_ in steps:
                    vals = [m[b][k] for r in runs for s2, m in r["trajectory"] if s2 == s_]
                    data += f"{s_}\t{statistics.fmean(vals):.4f}\t{seed_sd(vals):.4f}\n"
                data += "\n\n"
        txt += fig(P.draw("mix_trajectory", f"sandwich_trajectory_L{L}", data,
                          f"PHA d {st['lm_base']['d_model']}, {L} blocks, {st['corpora'][0]}, "
                          f"mean of {len(runs)} seeds, band ± sd")) + "\n"
    claims["sandwich"] = results
    return txt


def verdict_sandwich(results):
    if not results:
        return "not run", "n/a"
    n_ok = sum(1 for _, ok in results for o in ok if o)
    n = sum(len(ok) for _, ok in results)
    msg = "; ".join(f"{L} blocks: {sum(1 for o in ok if o)}/{len(ok)} seeds" for L, ok in results)
    v = "holds" if n_ok == n else "does not hold" if n_ok == 0 else "partly"
    return v, "sandwich in " + msg


def interp_match(sizes, pha_ppl):
    """Transformer sizes [(nonemb, mean ppl, key)] sorted by size; the fraction between the
    two sizes bracketing PHA's perplexity (linear in log parameters)."""
    pts = sorted(sizes)
    for (n0, p0, k0), (n1, p1, k1) in zip(pts, pts[1:]):
        if (p0 - pha_ppl) * (p1 - pha_ppl) <= 0 and p0 != p1:
            f = (p0 - pha_ppl) / (p0 - p1)
            return k0, k1, f, math.exp(math.log(n0) + f * (math.log(n1) - math.log(n0))), True
    # Not bracketed: the nearest end.
    best = min(pts, key=lambda t: abs(t[1] - pha_ppl))
    return best[2], best[2], 0.0, best[0], False


def section_iso(out, st, P, claims):
    iso = load(out, "iso")
    if not iso:
        return ""
    txt = "## iso: PHA against an attention-only transformer of the same perplexity\n\n"
    pha_m = mean_sd(iso["pha_ppl"])[0]
    sizes = [(v["nonemb"], mean_sd(v["test_ppl"])[0], k) for k, v in iso["sizes"].items() if v["test_ppl"]]
    rows = [[k, f"{n:,}", fmt_ms(iso["sizes"][k]["test_ppl"])] for n, _, k in sorted(sizes)]
    rows.append(["PHA", f"{iso['pha_nonemb']:,}", fmt_ms(iso["pha_ppl"])])
    txt += md_table(["model", "non-embedding params", "test ppl"], rows) + "\n"
    k0, k1, f, n_match, bracketed = interp_match(sizes, pha_m)
    txt += (f"PHA's perplexity {pha_m:.2f} is matched by a transformer of ~{n_match:,.0f} non-embedding parameters "
            + (f"(interpolated between {k0} and {k1}, fraction {f:.2f}, linear in log parameters; its costs are "
               f"interpolated geometrically)" if bracketed else
               f"— not bracketed by the sizes trained: the nearest, {k0}, stands in (the ratios below are then "
               f"{'a lower bound of PHA’s advantage' if pha_m < min(s[1] for s in sizes) else 'an upper bound'})")
            + ".\n\n")
    eff = iso["efficiency"]

    def tr(metric, T, part="train"):
        a = eff[k0][part][str(T)][metric]
        b = eff[k1][part][str(T)][metric]
        return math.exp((1 - f) * math.log(a) + f * math.log(b))

    rows, data = [], "T\ttrain_tok_s\tpeak_mem\tprefill_tok_s\tdecode_tok_s\tstate_bytes\n"
    at8k = None
    for T in iso["T"]:
        r_tps = eff["pha"]["train"][str(T)]["tokens_per_s"] / tr("tokens_per_s", T)
        r_mem = eff["pha"]["train"][str(T)]["peak_mb"] / tr("peak_mb", T)
        r_pre = eff["pha"]["decode"][str(T)]["prefill_tok_s"] / tr("prefill_tok_s", T, "decode")
        r_dec = eff["pha"]["decode"][str(T)]["step_tok_s"] / tr("step_tok_s", T, "decode")
        r_st = eff["pha"]["decode"][str(T)]["state_bytes"] / tr("state_bytes", T, "decode")
        rows.append([T, f"{eff['pha']['train'][str(T)]['tokens_per_s']:.0f} / {tr('tokens_per_s', T):.0f} = {r_tps:.2f}",
                     f"{eff['pha']['train'][str(T)]['peak_mb']:.0f} / {tr('peak_mb', T):.0f} MB = {r_mem:.2f}",
                     f"{r_pre:.2f}", f"{r_dec:.2f}", f"{r_st:.2f}"])
        data += f"{T}\t{r_tps}\t{r_mem}\t{r_pre}\t{r_dec}\t{r_st}\n"
        if T == 8192:
            at8k = (r_tps, r_mem)
    txt += ("PHA over the matched transformer (ratio > 1: PHA higher), batch 1, bench_model (training step, peak "
            "resident memory of a fresh process) and bench_decode (prefill, per-token decode at that context, "
            "decoder state/KV bytes):\n\n")
    txt += md_table(["T", "training tokens/s PHA / tr", "peak memory PHA / tr", "prefill", "decode", "state/KV memory"], rows) + "\n"
    txt += fig(P.draw("iso", "iso_efficiency", data,
                      f"PHA {iso['pha_nonemb'] / 1e6:.2f} M / transformer {n_match / 1e6:.2f} M non-embedding params "
                      + (f"of PHA's {st['corpora'][0]} ppl" if bracketed else
                         f"({k0}: nearest PHA's ppl, not equal)") + "; batch 1, one timing")) + "\n"
    claims["iso"] = (at8k, bracketed)
    return txt


def verdict_iso(x):
    if not x or not x[0]:
        return "not run", "n/a"
    (r_tps, r_mem), bracketed = x
    msg = f"at 8k: training throughput {100 * (r_tps - 1):+.1f} %, peak memory {100 * (r_mem - 1):+.1f} %"
    if not bracketed:
        msg += " (perplexity match not bracketed)"
    if r_tps > 1 and r_mem < 1:
        return "holds (direction)", msg
    if r_tps <= 1 and r_mem >= 1:
        return "does not hold", msg
    return "partly", msg


def cells_of(run):
    """A run's (length, depth) cells (results.json of earlier versions held phax recall's whole JSON)."""
    c = run["cells"]
    return c["cells"] if isinstance(c, dict) else c


def mean_acc(run, lengths_pred):
    xs = [c["accuracy"] for c in cells_of(run) if lengths_pred(c["length"])]
    return statistics.fmean(xs) if xs else None


def length_curve(label, rs, lengths):
    """Per length the seeds' mean accuracy (depths averaged) as 'mean ± sd' cells, and the
    block of recall_length.gp's input."""
    cells, data = [], f"length\t{label}\tsd\n"
    for L in lengths:
        mu, sd, _ = mean_sd([mean_acc(r, lambda x, L=L: x == L) for r in rs])
        cells.append(f"{mu:.2f}" + (f" ± {sd:.2f}" if sd is not None else ""))
        data += f"{L}\t{mu}\t{sd or 0}\n"
    return cells, data + "\n\n"


def heatmap_panel(rs, lengths, depths):
    """One panel of heatmap_panels.gp's input: the seeds' mean accuracy per (length, depth)."""
    data = ""
    for li, L in enumerate(lengths):
        for di, dep in enumerate(depths):
            vals = [c["accuracy"] for r in rs for c in cells_of(r) if c["length"] == L and abs(c["depth"] - dep) < 1e-9]
            data += f"{li}\t{di}\t{statistics.fmean(vals) if vals else 0:.4f}\n"
        data += "\n"
    return data + "\n"


def section_recall(out, st, P, claims):
    rc = load_merged(out, ["recall", "bind"], ["runs"])
    if not rc:
        return ""
    T = rc["T"]
    txt = "## recall: SWAX window regimes on the synthetic recall task\n\n"
    txt += (f"docs/recall.md: vocabulary 64 (16 keys, 16 values without replacement, 32 fillers), d "
            f"{st['recall_model']['d_model']}, {st['recall_model']['n_layers']} blocks (mLSTM, SWA, ...), T {T}, "
            f"windows w_short {rc['w_short']} / w_long {rc['w_long']}, batch 32, lr 3e-3. Accuracy of the first "
            f"query only (chance 1/16 = 0.06), {rc['samples']} prompts per (length, depth) cell, depths "
            f"{', '.join(map(str, rc['depths']))}. Evaluated at w_long (the short regime also at its w_short).\n\n")
    res = {}
    for task, t in rc["tasks"].items():
        txt += f"**task {task}** ({t['pairs']} needle(s), {t['steps']} steps):\n\n"
        rows, data = [], ""
        for model in rc["models"]:
            for w in ([None, rc["w_short"]] if model == "short" else [None]):
                rs = [r for r in rc["runs"] if r["task"] == task and r["model"] == model and r["window"] == w]
                if not rs:
                    continue
                label = model + (f" (eval w {w})" if w else "")
                cells, block = length_curve(label, rs, rc["lengths"])
                row = [label, len(rs)] + cells
                data += block
                beyond = [mean_acc(r, lambda x: x > T) for r in rs]
                at_t = [mean_acc(r, lambda x: x == T) for r in rs]
                res[(task, label)] = dict(beyond=beyond, at_t=at_t)
                row.append(fmt_ms(beyond))
                rows.append(row)
        txt += md_table(["model", "seeds"] + [f"L={L}" for L in rc["lengths"]] + ["mean beyond T"], rows) + "\n"
        best_at_t = max((sum(v["at_t"]) / len(v["at_t"]) for (tk, _), v in res.items() if tk == task and v["at_t"]),
                        default=None)
        if best_at_t is not None and best_at_t < 0.5:
            # Said from the numbers, not assumed: a task no regime learns even at T cannot rank the windows.
            guess = f"; picking one of the {t['pairs']} values in the prompt at random scores {1 / t['pairs']:.2f}" \
                if t["pairs"] > 1 else ""
            txt += (f"**No model learned task {task} even at the training length** (best mean accuracy at T "
                    f"{best_at_t:.2f}{guess}): at this width and step budget it does not tell the window regimes "
                    f"apart (evals/README.md, known limitation); the window claims are judged on the tasks "
                    f"the models learned.\n\n")
        txt += fig(P.draw("recall_length", f"recall_{task}_length", data,
                          f"SWAX d {st['recall_model']['d_model']}, {st['recall_model']['n_layers']} blocks, T {T}; "
                          f"task {task}, {len(rc['seeds'])} seed(s), mean ± sd over seeds, depths averaged",
                          T=T, chance=CHANCE_RECALL)) + "\n"
        # Length x depth heatmaps, one panel per model (seed mean).
        data = ""
        labels = []
        for model in rc["models"]:
            rs = [r for r in rc["runs"] if r["task"] == task and r["model"] == model and r["window"] is None]
            if not rs:
                continue
            labels.append(model)
            data += heatmap_panel(rs, rc["lengths"], rc["depths"])
        txt += fig(P.draw("heatmap_panels", f"recall_{task}_depth", data,
                          f"SWAX d {st['recall_model']['d_model']}, T {T}; task {task}: accuracy by length and depth, "
                          f"mean of {len(rc['seeds'])} seed(s)",
                          panels=len(labels), labels=" ".join(labels),
                          xlabels=" ".join(str(L) for L in rc["lengths"]),
                          ylabels=" ".join(str(d) for d in rc["depths"]))) + "\n"
    claims["recall"] = (res, list(rc["tasks"]))
    return txt


def verdict_short_extrap(x):
    if not x:
        return "not run", "n/a"
    res, tasks = x
    task = "needle" if "needle" in tasks else tasks[0]  # binding did not form at this budget (evals/README.md)
    s = res.get((task, f"short (eval w {st_w_short(res, task)})")) or res.get((task, "short"))
    l = res.get((task, "long"))
    if not s or not l:
        return "not run", "n/a"
    b = beyond_noise(s["beyond"], l["beyond"])
    ms = mean_sd(s["beyond"])[0]
    v = ("holds" if b > 0 and ms > 2 * CHANCE_RECALL else "does not hold" if b < 0 or ms <= 2 * CHANCE_RECALL and
         mean_sd(l["beyond"])[0] >= ms else "inconclusive")
    return v, f"task {task}, accuracy beyond T: short {fmt_ms(s['beyond'])} vs long {fmt_ms(l['beyond'])}"


def st_w_short(res, task):
    for (t, label) in res:
        if t == task and label.startswith("short (eval w "):
            return label[len("short (eval w "):-1]
    return None


def verdict_stoch(x, niah):
    if not x:
        return "not run", "n/a"
    res, tasks = x
    task = "needle" if "needle" in tasks else tasks[0]  # binding did not form at this budget (evals/README.md)
    s = res.get((task, f"short (eval w {st_w_short(res, task)})")) or res.get((task, "short"))
    l = res.get((task, "long"))
    z = res.get((task, "stochastic"))
    if not (s and l and z):
        return "not run", "n/a"
    far = beyond_noise(s["beyond"], z["beyond"])  # +1: short clearly better far away
    near = beyond_noise(l["at_t"], z["at_t"])     # +1: long clearly better at T
    msg = (f"task {task}: beyond T stochastic {fmt_ms(z['beyond'])} vs short {fmt_ms(s['beyond'])}; at T "
           f"stochastic {fmt_ms(z['at_t'])} vs long {fmt_ms(l['at_t'])}")
    if niah:
        msg += "; " + niah
    if far <= 0 and near <= 0 and mean_sd(z["beyond"])[0] > mean_sd(l["beyond"])[0]:
        return "holds", msg
    if far > 0 or near > 0:
        return "does not hold", msg
    return "inconclusive", msg


def section_niah(out, st, P, claims):
    nh = load_merged(out, ["niah", "niah_ctl"], ["runs"])
    if not nh:
        return ""
    T = nh["T"]
    txt = "## niah: the window regimes on WikiText-2 needles (phax niah, RULER-style)\n\n"
    rows, data = [], ""
    models = sorted({r["model"] for r in nh["runs"]}, key=lambda m: ["short", "long", "stochastic", "swa_only", "mlstm_only"].index(m))
    ppl_line = []
    for m in models:
        rs = [r for r in nh["runs"] if r["model"] == m]
        ppl_line.append(f"{m} {fmt_ms([r['test_ppl'] for r in rs])}")
        cells, block = length_curve(m, rs, nh["lengths"])
        data += block
        rows.append([m, len(rs), fmt_ms([r["test_ppl"] for r in rs])] + cells)
    txt += (f"Word-level SWAX models (d {st['lm_base']['d_model']}, T {T}) trained with --niah-frac {st['niah_frac']}; "
            f"variants {nh['variants']}, haystacks {nh['haystacks']}; accuracy (string_match_all) by prompt length, "
            f"mean over variants, haystacks, depths and samples; test perplexity at T (short-context quality):\n\n")
    txt += md_table(["model", "seeds", "test ppl"] + [f"L={L}" for L in nh["lengths"]], rows) + "\n"
    # Say so when no model retrieved a single needle: the figures then answer no window claim.
    if all(c["accuracy"] == 0 for r in nh["runs"] for c in r["cells"]):
        txt += ("**No model retrieved a single needle at any length, the training length included**: at this "
                "scale (d 128, 1,000 steps) the word-level models do not learn the RULER-style task, so these "
                "runs give no verdict on the window claims; only their test perplexity (the short-context "
                "half of the trade-off) counts. The synthetic recall task above is where the window regimes "
                "are told apart.\n\n")
    nseeds = max(sum(1 for r in nh["runs"] if r["model"] == m) for m in models)
    txt += fig(P.draw("recall_length", "niah_length", data,
                      f"WikiText-2 NIAH, word-level SWAX d {st['lm_base']['d_model']}, T {T}; "
                      f"{nseeds} seed(s), mean ± sd over seeds", T=T, chance=0)) + "\n"
    depths = sorted({c["depth"] for r in nh["runs"] for c in r["cells"]})
    data = "".join(heatmap_panel([r for r in nh["runs"] if r["model"] == m], nh["lengths"], depths) for m in models)
    txt += fig(P.draw("heatmap_panels", "niah_depth", data,
                      f"WikiText-2 NIAH, SWAX d {st['lm_base']['d_model']}, T {T}: accuracy by length and depth, "
                      f"mean of {nseeds} seed(s)",
                      panels=len(models), labels=" ".join(models), xlabels=" ".join(str(L) for L in nh["lengths"]),
                      ylabels=" ".join(f"{d:g}" for d in depths))) + "\n"
    claims["niah_ppl"] = "test ppl at T: " + ", ".join(ppl_line)
    return txt


def fit_slope(xs, ys):
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else None


def section_efficiency(out, st, P, claims):
    ef = load(out, "efficiency")
    if not ef:
        return ""
    txt = "## efficiency: how cost grows with length\n\n"
    txt += ("bench_model (one training step at batch 1, fresh process: tokens/s and peak resident memory) and "
            "bench_decode (prefill tokens/s, per-token decode tokens/s at that context, decoder state/KV bytes), "
            f"models d {st['lm_base']['d_model']}, {st['lm_base']['n_layers']} layers, vocabulary 8192. Slopes: "
            "least-squares fit of log(cost) on log(T): seconds per training token, peak memory, seconds per "
            "decoded token, state bytes (0 = flat, 1 = linear growth).\n\n")
    rows, d_train, d_dec = [], "", ""
    for fam, v in ef["families"].items():
        Ts = sorted(int(t) for t in v["train"])  # numeric order: the json's keys are strings, sorted as such
        tps = [v["train"][str(t)]["tokens_per_s"] for t in Ts]
        mem = [v["train"][str(t)]["peak_mb"] for t in Ts]
        Cs = sorted(int(c) for c in v["decode"])
        dec = [v["decode"][str(c)]["step_tok_s"] for c in Cs]
        stt = [v["decode"][str(c)]["state_bytes"] for c in Cs]
        pre = [v["decode"][str(c)]["prefill_tok_s"] for c in Cs]
        sl = [fit_slope(Ts, [1 / x for x in tps]), fit_slope(Ts, mem), fit_slope(Cs, [1 / x for x in dec]),
              fit_slope(Cs, stt)]
        rows.append([fam] + [f"{tps[i]:.0f}" for i in range(len(Ts))] + ["-" if s is None else f"{s:.2f}" for s in sl])
        d_train += f"T\t{fam}\tpeak_mb\n" + "".join(f"{t}\t{a}\t{b}\n" for t, a, b in zip(Ts, tps, mem)) + "\n\n"
        d_dec += f"context\t{fam}\tprefill\tstate\n" + "".join(f"{c}\t{a}\t{p}\t{s_}\n" for c, a, p, s_ in zip(Cs, dec, pre, stt)) + "\n\n"
    txt += md_table(["family"] + [f"train tok/s T={t}" for t in ef["T"]] +
                    ["slope s/token", "slope memory", "slope decode s/token", "slope state"], rows) + "\n"
    size = f"d {st['lm_base']['d_model']}, {st['lm_base']['n_layers']} layers, vocabulary 8192, one timing run"
    txt += fig(P.draw("efficiency_train", "efficiency_train", d_train, f"training step, batch 1; {size}")) + "\n"
    txt += fig(P.draw("efficiency_decode", "efficiency_decode", d_dec, f"prefill and decode, batch 1; {size}")) + "\n"
    return txt


def write(out, st, corpora, meta):
    tiny = st.get("tiny", False)
    sub = f"{st['mode']} mode{' (tiny)' if tiny else ''}"
    # Only a full run's figures go to plots/ (the repository's); quick and tiny keep theirs in OUT/plots.
    P = Plots(out, sub, tiny or st["mode"] != "full")
    claims = {}
    body = ""
    for sec in (section_lm, section_ablation, section_sandwich, section_iso, section_recall, section_niah,
                section_efficiency):
        body += sec(out, st, P, claims)
    rows = []

    def add(key, v_m, figs):
        v, m = v_m
        if "(n=1)" in m and "n=2" not in m and "n=3" not in m and v not in ("not run",):
            v += " (one seed: no spread)"
        rows.append([PAPER[key], v, m, figs])
    add("pha_tr", verdict_pha_tr(claims.get("pha_tr")), "lm_curves_*")
    add("par_ser", verdict_par_ser(claims.get("par_ser")), "lm_curves_*")
    add("no_attn", verdict_no_attn(claims.get("no_attn")), "ablation")
    add("sandwich", verdict_sandwich(claims.get("sandwich")), "sandwich_L*")
    add("iso", verdict_iso(claims.get("iso")), "iso_efficiency")
    add("short_extrap", verdict_short_extrap(claims.get("recall")), "recall_*_length")
    add("stoch_both", verdict_stoch(claims.get("recall"), claims.get("niah_ppl")), "recall_*_length, niah_length")
    commit = sh("git rev-parse --short HEAD")
    dirty = " (with uncommitted changes)" if sh("git status --porcelain --untracked-files=no") else ""
    head = f"# phax evaluation — {st['mode']} mode{' (tiny smoke settings)' if tiny else ''}\n\n"
    if st["mode"] == "quick":
        head += ("**A smoke run**: one seed, minutes of training per model, no ablations, iso-perplexity or "
                 "WikiText-2 NIAH (those run in `--full`). Its verdicts say what this scale shows, not whether a "
                 "claim holds.\n\n")
    head += (f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
             f"- commit: {commit}{dirty}\n"
             f"- machine: {os.cpu_count()} CPUs ({cpu_name()}), load average at start "
             f"{' '.join(meta['load_start'])}, at end {' '.join(open('/proc/loadavg').read().split()[:3])}\n"
             f"- invocation: `{meta['invocation']}` (from the repository root; {meta['seconds']:.0f} s, reused outputs not counted)\n"
             f"- data: {', '.join(f'{k} ({v})' for k, v in corpora.items())}\n\n")
    pieces = ["lm", "ptb", "ablation", "sandwich", "iso", "recall", "bind", "niah", "niah_ctl", "efficiency"]
    done = [p for p in pieces if load(out, p)]
    if st["mode"] == "full" and len(done) < len(pieces):
        head += (f"**Pieces run so far: {', '.join(done) or 'none'}; not yet: "
                 f"{', '.join(p for p in pieces if p not in done)}** (`./evals/run_all.sh --full --only PIECE`). "
                 "Claims without their pieces say \"not run\".\n\n")
    prow = []
    for p in pieces:
        pj = os.path.join(out, p, "piece.json")
        if os.path.exists(pj):
            d = json.load(open(pj))
            prow.append([p, f"{d['seconds'] / 60:.1f} min" + (f" ({d['note']})" if d.get("note") else ""),
                         d["finished"], d["commit"], " ".join(d["load_start"]), " ".join(d["load_end"])])
    if prow:
        head += "Pieces (wall time on this machine):\n\n" + md_table(
            ["piece", "time", "finished", "commit", "load at start", "load at end"], prow) + "\n"
    head += "## Claims\n\n" + md_table(["claim (paper)", "verdict", "what phax measured (mean ± sd over seeds)", "figure"], rows)
    head += ("\nVerdicts: a difference counts when it exceeds 2 standard errors of the difference of the seed means "
             "(at least 2 seeds each); \"≈\" holds within 3 %; with one seed nothing is beyond noise, so quick-mode "
             "verdicts are mostly \"inconclusive\". The scale is this machine's (about a million non-embedding "
             "parameters, minutes to an hour of training on 2 cores), not the papers'.\n\n")
    with open(os.path.join(out, "summary.md.tmp"), "w") as f:
        f.write(head + body + f"\nEverything is under `{out}`: runs/ (cmd.txt, log.jsonl, train.out, checkpoints), "
                "configs/, one folder per experiment (results.json, each command's .cmd/.out), plots/ (figures and "
                "their data).\n")
    os.replace(os.path.join(out, "summary.md.tmp"), os.path.join(out, "summary.md"))
    if st["mode"] == "full" and not tiny:
        # The committed answer sheet (evals/results/summary.md): the same, its figures named
        # from where it lies.
        text = open(os.path.join(out, "summary.md")).read().replace("](plots/", "](../../plots/")
        os.makedirs(os.path.join("evals", "results"), exist_ok=True)
        with open(os.path.join("evals", "results", "summary.md.tmp"), "w") as f:
            f.write(text)
        os.replace(os.path.join("evals", "results", "summary.md.tmp"), os.path.join("evals", "results", "summary.md"))
    print(open(os.path.join(out, "summary.md")).read())
