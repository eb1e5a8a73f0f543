"""./evals/run_all.sh [--quick | --full] [--data DIR] [--out DIR] [--only EXP,...] [--force]
(run_all.sh installs packages and builds, then runs this with python3 -m)."""
import argparse
import os
import shutil
import subprocess
import sys
import time

from . import archive, provenance, report, runs, settings
from .experiments import Job, save
from .runs import JobError, Runner, note, say

EXPERIMENTS = ["lr", "lr_iso", "lm", "recall", "sandwich", "efficiency", "ptb", "ablation", "iso", "iso_bench",
               "sandwich12", "scaling_s", "scaling_l", "bind", "niah", "niah_ctl"] + \
    list(settings.MQAR_PIECES) + ["precision", "generality"]
HELP = """experiments (--only takes a comma list; default all; each is a resumable piece):
  lr          (full) learning-rate sweep of PHA, transformer and serial on seed 1
              (1e-3, 2e-3, 4e-3, extended by x2 where the best is at an end), chosen
              by validation perplexity; lm, ptb, ablation, sandwich train at its choice
  lr_iso      (full) the same for the iso piece's transformer sizes
  lm          PHA, transformer and serial hybrid with matched non-embedding parameters
              (within 3 %), the same token budget, on WikiText-2; test perplexity,
              validation curves, tokens/s; seeds 1 (quick) or 3 (full)
  ptb         (full) the same on PTB
  ablation    (full) PHA without attention, without GSS, without the FFN branch, with
              a frozen equal mix; matched parameters; 2 seeds
  sandwich    PHA's softplus mix weights per block at the end of training and their
              trajectory, at depths 4 (the lm runs) and 8 (full: 3,000 steps)
  sandwich12  (full) the same at 12 blocks, 3,000 steps, 3 seeds
  scaling_s   (full) PHA, transformer, serial at d 88 (~0.6 M non-embedding parameters),
              the lm runs' tokens per parameter, 3 seeds; scaling_l: d 176 (~2.2 M); the
              middle size is the lm piece
  iso         (full) transformers of five more widths (d 96 ... 320), 3 seeds each; the
              size of PHA's perplexity (interpolated)
  iso_bench   (full) PHA and the two transformers that bracket its perplexity: training
              (tokens/s, peak, workspace, parameter state), prefill and decode (tokens/s,
              state) at T 2k, 8k, 16k; 5 repeats in fresh processes, medians
  recall      SWAX window regimes (short, long, stochastic; full: also SWA-only and
              mLSTM-only) on the synthetic recall task (docs/recall.md), one needle:
              accuracy by length (1x..16x T, 64x in full) and depth
  bind        (full) the same with 4 needles (key-value binding)
  niah        (full) short, long, stochastic SWAX on WikiText-2 with --niah-frac 0.25:
              phax niah accuracy by length and depth, and test perplexity
  niah_ctl    (full) the same for the SWA-only and mLSTM-only controls
  efficiency  training tokens/s and peak memory vs T; prefill and decode tokens/s and
              state memory vs context; every family; fitted log-log slopes
  mqar_ref    (full) multi-query associative recall at the SWAX paper's window ratios
              (T 1024, windows T/128 and T/8; docs/recall.md): the full-attention
              reference; a learning-rate sweep on seed 1, accuracy by key-to-query
              distance at 1x..32x T; mqar_ref2: its seeds 2 and 3 at the chosen rate
              (the other pieces do both: sweep, then 3 seeds)
  mqar_short  (full) the same for SWAX short; mqar_long, mqar_stoch: long, stochastic
  mqar_swa    (full) the same for the SWA-only control; mqar_mlstm: mLSTM-only
  mqar_w32    (full) SWAX at the fixed window T/32 (the short regime's rate; needs
              mqar_short); mqar_w512: T/2. With short (T/128) and long (T/8): the
              window sweep
  precision   PHA, transformer and SWAX at the lm settings, each seed in float32 and in
              the bf16 tier (--precision bf16, docs/precision.md): paired test-perplexity
              differences with their CI, and whether they lie within +-1 %
  generality  (full) the recall piece's short, long and stochastic regimes with full
              attention (family swa_full) and Gated DeltaNet (swax_gdn) in place of SWAX's
              mLSTM, alternating with SWA, 3 seeds: both SWAX claims judged per backbone,
              side by side

Finished runs and outputs in OUT are reused, interrupted runs resumed (phax train
--resume); --force deletes the selected experiments' outputs (not the runs they share).
Times on 2 cores: evals/README.md."""


def find_corpora(data_arg):
    """The corpora the job uses: name -> folder, relative to the repository. The repository
    ships both (data/, checked against their SHA256SUMS); --data or $PHAX_DATA_DIR chooses
    another folder (link_outside keeps a folder outside the repository out of the records)."""
    cands = [data_arg] if data_arg else ([os.environ["PHAX_DATA_DIR"]] if os.environ.get("PHAX_DATA_DIR")
                                         else ["data"])
    found = {}
    for d in cands:
        if not os.path.isdir(d):
            continue
        for name, probe in [("wikitext-2", "train.txt"), ("ptb", "ptb.train.txt")]:
            for folder in (os.path.join(d, name), d):
                if os.path.exists(os.path.join(folder, probe)) or os.path.exists(os.path.join(folder, probe + ".xz")):
                    found.setdefault(name, os.path.relpath(folder))
                    break
        if found:
            break
    # PTB missing from the $PHAX_DATA_DIR that had WikiText-2: the repository's own copy.
    if "ptb" not in found and not data_arg:
        for d in ["data"]:
            for folder in (os.path.join(d, "ptb"), d):
                if os.path.exists(os.path.join(folder, "ptb.train.txt")) or os.path.exists(os.path.join(folder, "ptb.train.txt.xz")):
                    found["ptb"] = os.path.relpath(folder)
                    break
            if "ptb" in found:
                break
    return found, cands


def link_outside(corpora, out):
    """A corpus folder outside the repository is handed to phax as OUT/data/NAME, a link to
    it: phax's commands and outputs (which echo the paths they read) then name no folder of
    the machine; piece.json and each run's provenance.json record the corpus by name and
    checksums. Returns corpora with those folders replaced."""
    res = dict(corpora)
    for name, folder in corpora.items():
        if provenance.inside(folder) is not None:
            continue
        link = os.path.join(out, "data", name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not (os.path.islink(link) and os.path.realpath(link) == os.path.realpath(folder)):
            tmp = f"{link}.tmp.{os.getpid()}"
            os.symlink(os.path.realpath(folder), tmp)
            os.replace(tmp, link)
        res[name] = os.path.relpath(link)
    return res


def main(argv):
    ap = argparse.ArgumentParser(prog="./evals/run_all.sh", description=__doc__.split("\n")[0],
                                 epilog=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="(default) a smoke run that still shows the effects, ~15-20 min")
    g.add_argument("--full", action="store_true", help="the reproduction at this machine's scale, <= 10 h on 2 cores")
    ap.add_argument("--data", help="data folder holding wikitext-2/ (and ptb/); default $PHAX_DATA_DIR, else ./data (shipped)")
    ap.add_argument("--out", help="output folder (default evals/out/quick or evals/out/full)")
    ap.add_argument("--only", help="comma list of experiments (see below)")
    ap.add_argument("--force", action="store_true", help="redo the selected experiments' outputs")
    ap.add_argument("--report-only", action="store_true", help="write summary.md and figures from what OUT holds")
    a = ap.parse_args(argv)
    mode = "full" if a.full else "quick"
    tiny = os.environ.get("PHAX_EVAL_TINY") == "1"
    st = settings.mode_settings(mode, tiny)
    out = a.out or f"evals/out/{mode}{'-tiny' if tiny else ''}"
    out = os.path.relpath(out)
    only = EXPERIMENTS
    if a.only:
        only = a.only.split(",")
        for e in only:
            if e not in EXPERIMENTS:
                ap.error(f"--only: unknown experiment '{e}' (one of: {', '.join(EXPERIMENTS)})")
    corpora, looked = find_corpora(a.data)
    if "wikitext-2" not in corpora:
        raise JobError(f"no WikiText-2 found: looked in {', '.join(looked)} (give --data DIR or set PHAX_DATA_DIR)")
    missing = [c for c in st["corpora"] if c not in corpora]
    if missing:
        note(f"note: {', '.join(missing)} not found; the lm study runs on {', '.join(c for c in st['corpora'] if c in corpora)} only")
        st["corpora"] = [c for c in st["corpora"] if c in corpora]
    os.makedirs(out, exist_ok=True)
    corpora = link_outside(corpora, out)
    if a.force:
        for e in only:
            shutil.rmtree(os.path.join(out, e), ignore_errors=True)
    # Finished full-mode pieces are committed (evals/results/full); a fresh machine gets them back.
    keep = st["mode"] == "full" and (not tiny or "PHAX_EVAL_ARCHIVE" in os.environ) and not a.out
    if keep:
        archive.enable(out)
        back = archive.restore(out, [e for e in EXPERIMENTS if not (a.force and e in only)])
        if back:
            note(f"restored from {archive.root()} (the committed record of earlier runs): pieces {', '.join(back)}")
    build = os.environ.get("BUILD_DIR", "build")
    runner = Runner(build, out, corpora)
    job = Job(runner, st, out, a.data, corpora)
    t0 = time.time()
    load0 = open("/proc/loadavg").read().split()[:3]
    if not a.report_only:
        note(f"mode {mode}{' (tiny smoke settings)' if tiny else ''}; data {', '.join(f'{k}: {v}' for k, v in corpora.items())}; output {out}")
        for e in only:
            if archive.restored(out, e):
                note(f"{e}: its committed results are used ({archive.root()}/{e}); --force runs it again")
                continue
            t = time.time()
            l0 = open("/proc/loadavg").read().split()[:3]
            runs.DATA_SEEN.clear()
            runner.runs_used.clear()
            if e in settings.MQAR_PIECES:
                job.mqar_piece(e)
            else:
                getattr(job, f"exp_{e}")()
            note(f"{e}: {time.time() - t:.0f} s")
            if os.path.exists(os.path.join(out, e, "results.json")):
                # When and how long: the pieces' table of the summary.
                commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
                # provenance: the commit, build and machine (provenance.current); data: the
                # corpora its runs and evaluations read, by name and checksums.
                seen = {os.path.realpath(f) for f in runs.DATA_SEEN}
                used = [n for n, f in corpora.items() if os.path.realpath(f) in seen]
                save(os.path.join(out, e, "piece.json"),
                     dict(seconds=round(time.time() - t), finished=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          commit=commit, load_start=l0, load_end=open("/proc/loadavg").read().split()[:3],
                          piece=e, provenance=provenance.current(build),
                          runs=provenance.run_builds(runner.runs_used),
                          data=provenance.corpora_record(corpora, used)))
                if keep and archive.save_piece(out, e):
                    note(f"{e}: recorded in {archive.root()}/{e} (commit it: the outputs in {out} are not)")
    say("report")
    # The invocation as the summary shows it: a --data folder outside the repository by no path.
    shown = [provenance.OUTSIDE if i and argv[i - 1] == "--data" and provenance.inside(x) is None else x
             for i, x in enumerate(argv)]
    report.write(out, st, corpora, dict(load_start=load0, seconds=time.time() - t0,
                                        invocation="./evals/run_all.sh" + ("".join(" " + x for x in shown))))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except JobError as e:
        print(f"run_all: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("run_all: interrupted; run the same command again to resume", file=sys.stderr)
        sys.exit(130)
