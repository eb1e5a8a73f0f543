"""The mqar pieces in the summary (issue 25): the SWAX window claims at the paper's window
ratios, on multi-query associative recall, scored by key-to-query distance.

What counts (docs/recall.md): a query whose key is within reach of the SWA layers measures
attention, not the recurrent layers, so the window claims use only queries farther from their
key than the SWA stack reaches with the short window (FAR_SWA_LAYERS · w_short) and, for
"beyond the training length", farther than T. Every number beside an accuracy has its
elimination floor (what a model without key→value binding scores on the same queries). The task
counts as learned when the full-attention reference reaches LEARNED at T; otherwise no verdict
is drawn from it.

Claims go into `claims` as lists of tests (report.py applies Holm across all of them):
claims["short_extrap_tests"], claims["stoch_both_tests"], and claims["mqar_note"] (why there
are none: the pieces have not run, the task was not learned, an arm has fewer than 2 seeds)."""
import math
import statistics

from . import report as R
from . import settings as S

LEARNED = 0.9          # the reference's accuracy at T that makes the task a test of recall
FAR_SWA_LAYERS = 2     # SWA layers in the 4-block SWAX stack: what the short window reaches
MIN_EFFECT = 0.10      # the smallest accuracy difference of interest
MARGIN = R.NI_ACC      # "keeps": not worse by more than this (non-inferiority, as the recall tests)
LABELS = dict(full="full attention (reference)", short="SWAX short (w T/128)", long="SWAX long (w T/8)",
              stochastic="SWAX stochastic", swa_only="SWA-only", mlstm_only="mLSTM-only")
PIECES = list(S.MQAR_PIECES)
# What each claim rests on (report.claim_gates: one commit and build, or no verdict).
CLAIM_PIECES = {"short_extrap": ["mqar_ref", "mqar_ref2", "mqar_short", "mqar_long"],
                "stoch_both": ["mqar_ref", "mqar_ref2", "mqar_short", "mqar_long", "mqar_stoch", "niah"]}
SETTINGS = ("T", "task", "model", "steps", "samples", "w_short", "w_long", "lrs")  # must agree across pieces


def label(arm):
    return LABELS.get(arm, f"SWAX w {arm[1:]}" if arm.startswith("w") else arm)


def pooled(run, keep):
    """(accuracy, mean log p, floor, queries) over the cells of one run that keep() accepts."""
    cs = [c for c in run["cells"] if keep(c)]
    n = sum(c["queries"] for c in cs)
    if not n:
        return None, None, None, 0
    return (sum(c["correct"] for c in cs) / n, sum(c["mean_logp"] * c["queries"] for c in cs) / n,
            sum(c["floor"] * c["queries"] for c in cs) / n, n)


def per_seed(res, arm, keep):
    """Per seed of the arm that has such queries: (accuracies, mean log ps, floors)."""
    ps = [p for r in res["runs"] if r["arm"] == arm for p in [pooled(r, keep)] if p[3]]
    return [p[0] for p in ps], [p[1] for p in ps], [p[2] for p in ps]


def ms(xs, digits=3):
    return R.fmt_ms(xs, digits)


def floor_mqar(P, Q):
    """The elimination floor of P pairs and Q queries (phax_mqar_floor, core/recall.c): for the
    validation rows while training, which no output reports."""
    return sum(1 / (P - j) for j in range(Q)) / Q


def merged(out):
    """The mqar pieces that have run, as one result (runs, sweeps and rates of every arm), the
    names of those that have not, and those whose settings differ from the first's."""
    res, missing, differ = None, [], []
    for p in PIECES:
        r = R.load(out, p)
        if not r:
            missing.append(p)
            continue
        if res is None:
            res = dict(r, arms=[], runs=[], sweep=[], best={})
        elif any(r.get(k) != res.get(k) for k in SETTINGS):
            differ.append(p)
        res["arms"] += [a for a in r["arms"] if a not in res["arms"]]
        res["seeds"] = sorted(set(res["seeds"]) | set(r["seeds"]))
        res["runs"] += r["runs"]
        res["sweep"] += r["sweep"]
        res["best"].update(r["best"])
    return res, missing, differ


def xmid(c):
    """Where a distance bin sits on a log axis: its geometric middle (the open last bin: its start)."""
    return math.sqrt(c["bin_lo"] * c["bin_hi"]) if c["bin_hi"] > 0 else float(c["bin_lo"])


def section(out, st, P, claims):
    res, missing, differ = merged(out)
    if not res:
        claims["mqar_note"] = "the mqar pieces have not run"
        return ""
    T, ws, wl = res["T"], res["w_short"], res["w_long"]
    far = FAR_SWA_LAYERS * ws
    t = res["task"]
    eval_floor = [r["floor"] for r in res["runs"]][:1] or [floor_mqar(t["pairs"], t["eval_queries"])]
    txt = "## mqar: the SWAX window claims at the paper's window ratios (multi-query associative recall)\n\n"
    if missing:
        txt += f"**Pieces not yet run: {', '.join(missing)}** (`./evals/run_all.sh --full --only PIECE`).\n\n"
    if differ:
        txt += (f"**Pieces run with other settings than {PIECES[0] if PIECES[0] not in missing else 'the first'}: "
                f"{', '.join(differ)}**: their arms are not comparable; no verdict is drawn.\n\n")
    txt += (f"Training length T = {T}, windows w_short = T/128 = {ws} and w_long = T/8 = {wl} (the paper: 16k, 128 "
            f"and 2048). Each row opens with {t['pairs']} pairs \"key value\", then queries of distinct pairs at random "
            f"places among fillers, every query scored (docs/recall.md): {t['queries']} per training row (rows vary "
            f"1..{t['pairs']} pairs and the queries' span), {t['eval_queries']} per evaluation prompt (elimination floor "
            f"{eval_floor[0]:.3f}). Model d {res['model']['d_model']}, {res['model']['n_layers']} blocks, "
            f"{len(res['seeds'])} seeds per arm; evaluation: {res['samples']} prompts per length at 1×..32× T, "
            "each model at the window it ended training with (the reference with full attention). A query counts "
            f"as *far* when its key is at least {far} tokens back (beyond what {FAR_SWA_LAYERS} SWA layers of window "
            f"{ws} reach) and *beyond T* when at least {T} back. The floor is the elimination floor of the same queries: "
            "what copying a not-yet-answered value of the prompt scores.\n\n")
    rows = []
    for arm in res["arms"]:
        cells = []
        for x in res["lrs"]:
            r = [q for q in res["sweep"] if q["arm"] == arm and q["lr"] == x]
            v = r[0]["val"] if r and r[0]["val"] else None
            cells.append(f"{v['val_loss']:.3f} / {v['val_acc']:.2f}" if v else "-")
        b = res["best"].get(arm)
        rows.append([label(arm)] + cells + ["-" if b is None else f"{b:g}" + (
            "" if any(q["arm"] == arm for q in res["sweep"]) else " (short's)")])
    val_floor = floor_mqar(t["pairs"], t["queries"])
    txt += (f"Learning rates (seed 1, {res['steps']} steps; final validation loss / accuracy of the answers at T, "
            f"{t['pairs']} pairs and {t['queries']} queries, floor {val_floor:.2f}; the "
            "lowest loss picks the rate every seed uses):\n\n" +
            R.md_table(["arm"] + [f"lr {x:g}" for x in res["lrs"]] + ["chosen"], rows) + "\n")
    # Learning curves (validation accuracy of the answers at T), mean over seeds: what says
    # whether and when each arm learned the task.
    data, nb = "", 0
    for arm in res["arms"]:
        curves = [r["curve"] for r in res["runs"] if r["arm"] == arm and r.get("curve")]
        steps = sorted({l["step"] for c in curves for l in c})
        if not steps:
            continue
        data += f"step\t{label(arm)}\tsd\n"
        for s_ in steps:
            xs = [l["val_acc"] for c in curves for l in c if l["step"] == s_]
            data += f"{s_}\t{statistics.fmean(xs)}\t{R.seed_sd(xs)}\n"
        data += "\n\n"
        nb += 1
    if nb:
        name = P.draw("mqar_curves", "mqar_curves", data,
                      f"MQAR {t['pairs']} pairs/{t['queries']} queries at T {T}, d {res['model']['d_model']}, "
                      f"{len(res['seeds'])} seeds, mean ± sd", floor=val_floor)
        txt += R.fig(name) + "\n"
    at_T = lambda c: c["length"] == T and c["bin_lo"] >= far
    beyond = lambda c: c["bin_lo"] >= T
    ref = per_seed(res, "full", lambda c: c["length"] == T)[0]
    ref_mean = statistics.fmean(ref) if ref else None
    learned = ref_mean is not None and ref_mean >= LEARNED
    rows = []
    for arm in res["arms"]:
        (a_T, _, f_T), (a_b, l_b, f_b) = per_seed(res, arm, at_T), per_seed(res, arm, beyond)
        lrs = sorted({r["lr"] for r in res["runs"] if r["arm"] == arm})
        rows.append([label(arm), ", ".join(f"{x:g}" for x in lrs), ms(per_seed(res, arm, lambda c: c["length"] == T)[0]),
                     ms(a_T), ms(f_T, 2), ms(a_b), ms(l_b, 2), ms(f_b, 2)])
    txt += R.md_table(["arm", "lr", "accuracy at T (all)", f"at T, far (≥ {far})", "floor", f"beyond T (≥ {T})",
                       "mean log p", "floor"], rows) + "\n"
    txt += (f"The reference (full attention) reaches {ref_mean:.3f} at T: " if ref_mean is not None else "No reference: ")
    txt += (f"the task is learned at this size (≥ {LEARNED}) and the window claims are judged on it.\n\n" if learned else
            f"the task was **not learned** at this size (the bar is {LEARNED}); the window claims get no verdict from "
            "it, and the numbers above show how far each arm got.\n\n")
    # Accuracy by distance, pooled over lengths, one line per arm (the window sweep has its own figure).
    main_arms = [a for a in res["arms"] if not a.startswith("w")]
    bins = sorted({(c["bin_lo"], xmid(c)) for r in res["runs"] for c in r["cells"] if c["bin_lo"] >= 1})
    data, nb, floors = "", 0, {}
    for arm in main_arms:
        block = f"distance\t{label(arm)}\tsd\n"
        rows_ = 0
        for b, x in bins:
            xs, _, fl = per_seed(res, arm, lambda c, b=b: c["bin_lo"] == b)
            if not xs:
                continue
            floors.setdefault(x, []).extend(fl)
            block += f"{x:.1f}\t{statistics.fmean(xs)}\t{R.seed_sd(xs)}\n"
            rows_ += 1
        if rows_:
            data += block + "\n\n"
            nb += 1
    if nb:
        data += "distance\telimination floor\tsd\n" + "".join(
            f"{x:.1f}\t{statistics.fmean(v)}\t0\n" for x, v in sorted(floors.items()) if v) + "\n\n"
        name = P.draw("mqar_distance", "mqar_distance", data,
                      f"MQAR {t['pairs']} pairs/{t['queries']} queries, d {res['model']['d_model']}, T {T}, "
                      f"{len(res['seeds'])} seeds, mean ± sd, lengths 1x-32x T pooled", T=T, ws=ws, wl=wl,
                      nblocks=nb + 1)
        txt += R.fig(name) + "\n"
    else:
        txt += "(no distance figure: no arm has scored queries)\n\n"
    # The window sweep: accuracy beyond T vs the training window.
    sweep = [("short", ws)] + [(a, int(a[1:])) for a in res["arms"] if a.startswith("w")] + [("long", wl)]
    sweep = sorted([(a, w, per_seed(res, a, beyond)) for a, w in sweep], key=lambda x: x[1])
    sweep = [(a, w, p) for a, w, p in sweep if p[0]]
    if len(sweep) >= 2:
        data = "window\tSWAX, one window\tsd\n"
        data += "".join(f"{w}\t{statistics.fmean(p[0])}\t{R.seed_sd(p[0])}\n" for _, w, p in sweep)
        extra = {}
        for arm, key in (("swa_only", "swa"), ("mlstm_only", "mlstm")):
            xs = per_seed(res, arm, beyond)[0]
            if xs:
                extra[key] = statistics.fmean(xs)
        name = P.draw("mqar_window", "mqar_window", data,
                      f"MQAR, d {res['model']['d_model']}, T {T}, {len(res['seeds'])} seeds, mean ± sd",
                      floor=statistics.fmean(x for _, _, p in sweep for x in p[2]), **extra)
        txt += R.fig(name) + "\n"
    else:
        txt += "(no window-sweep figure: fewer than two windows have queries beyond T)\n\n"
    # The claims, as tests (report.py: Welch, Holm, power); only when the reference learned the
    # task and every arm a test compares has 2 seeds or more (else the recall piece's tests stand).
    if not learned:
        claims["mqar_note"] = (f"task not learned: the full-attention reference reaches "
                               f"{ref_mean if ref_mean is not None else float('nan'):.2f} < {LEARNED} at T")
        return txt
    (sh_b, _, sh_f), (lo_b, _, _), (st_b, _, _) = (per_seed(res, a, beyond) for a in ("short", "long", "stochastic"))
    lo_T, st_T = per_seed(res, "long", at_T)[0], per_seed(res, "stochastic", at_T)[0]
    thin = [a for a, xs in (("short", sh_b), ("long", lo_b), ("stochastic", st_b)) if len(xs) < 2]
    if differ or thin:
        claims["mqar_note"] = ("pieces with other settings: " + ", ".join(differ) if differ else
                               "arms with fewer than 2 seeds so far: " + ", ".join(thin))
        return txt
    note = f"far from the paper (T {T}, d {res['model']['d_model']}; the paper: 16k, 1.4B)"
    claims["short_extrap_tests"] = [
        dict(label="MQAR beyond T: short vs long", a=sh_b, b=lo_b, direction="greater", min_effect=MIN_EFFECT,
             far_from_paper=note, what="accuracy of queries ≥ T back",
             shown=f"MQAR, queries ≥ T back: short {ms(sh_b)} vs long {ms(lo_b)} (floor {ms(sh_f, 2)})"),
        # Above its own floor, seed by seed: short beating long at the floor is no recall.
        dict(label="MQAR beyond T: short vs its floor", a=sh_b, b=sh_f, direction="greater",
             min_effect=MIN_EFFECT, far_from_paper=note, what="accuracy of queries ≥ T back above the elimination floor",
             shown="")]
    # Non-inferiority: the margin goes into b, one-sided (report.py's contract); and the recall
    # piece's short-context quality test (WikiText-2 perplexity) where the niah piece ran.
    claims["stoch_both_tests"] = [
        dict(label=f"MQAR beyond T: stochastic vs short - {MARGIN}", a=st_b, b=[x - MARGIN for x in sh_b],
             direction="greater", alternative="one-sided", min_effect=MIN_EFFECT, far_from_paper=note,
             what="accuracy of queries ≥ T back (non-inferiority)",
             shown=f"MQAR beyond T: stochastic {ms(st_b)} vs short {ms(sh_b)} (margin {MARGIN})"),
        dict(label=f"MQAR at T: stochastic vs long - {MARGIN}", a=st_T, b=[x - MARGIN for x in lo_T],
             direction="greater", alternative="one-sided", min_effect=MIN_EFFECT, far_from_paper=note,
             what=f"accuracy at T of queries ≥ {far} back (non-inferiority)",
             shown=f"MQAR at T (far queries): stochastic {ms(st_T)} vs long {ms(lo_T)} (margin {MARGIN})"),
    ] + R.tests_stoch(None, claims.get("niah"))
    return txt
