"""The committed record of finished full-mode pieces (evals/results/full/).

A piece's outputs live in evals/out/full (git-ignored, gone with the machine). When a
piece finishes, what the report needs is copied here and committed: its results.json,
piece.json (when and how long) and, per training run it used, cmd.txt and log.jsonl
(every 10th step and every evaluation: tens of KB; checkpoints are not kept). On a fresh machine the job restores these
into OUT, so the summary keeps every piece ever finished and a later piece that builds
on an earlier one (iso on lm) finds its results; --force on a piece runs it again.
"""
import json
import os
import shutil

DIR = os.path.join("evals", "results", "full")
MARK = "RESTORED"  # in OUT/<piece>/: its results came from the record, not from this machine


def root():
    return os.environ.get("PHAX_EVAL_ARCHIVE", DIR)


def _runs_of(res):
    """Run folders (OUT/runs/NAME) a piece's results name."""
    names = set()
    for r in res.get("runs", []) if isinstance(res, dict) else []:
        if isinstance(r, dict) and r.get("run"):
            names.add(os.path.basename(r["run"].rstrip("/")))
    return sorted(names)


THIN = 10  # a run's log.jsonl keeps every 10th training step (and every evaluation line)


def thin_log(src, dst):
    """log.jsonl with every THIN-th training step, the first and last, and every other line
    (evaluations): a per-step log of a PHA run is ~240 KB, the record keeps ~30 KB."""
    with open(src) as f:
        lines = [l for l in f if l.strip()]
    keep = []
    for i, l in enumerate(lines):
        try:
            r = json.loads(l)
        except ValueError:
            continue
        train = "loss" in r and "val_ppl" not in r and "val_loss" not in r
        if not train or r.get("step", 0) % THIN == 0 or r.get("step") == 1 or i == len(lines) - 1:
            keep.append(l if l.endswith("\n") else l + "\n")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst + ".tmp", "w") as f:
        f.writelines(keep)
    os.replace(dst + ".tmp", dst)


def _copy(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = dst + ".tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def save_piece(out, piece, run_names=()):
    """Copy a finished piece's record from OUT into the archive."""
    src = os.path.join(out, piece)
    res_path = os.path.join(src, "results.json")
    if not os.path.exists(res_path) or os.path.exists(os.path.join(src, MARK)):
        return False
    dst = os.path.join(root(), piece)
    with open(res_path) as f:
        res = json.load(f)
    names = sorted(set(_runs_of(res)) | set(run_names))
    for n in names:
        p = os.path.join(out, "runs", n, "cmd.txt")
        if os.path.exists(p):
            _copy(p, os.path.join(root(), "runs", n, "cmd.txt"))
        p = os.path.join(out, "runs", n, "log.jsonl")
        if os.path.exists(p):
            thin_log(p, os.path.join(root(), "runs", n, "log.jsonl"))
    for fn in ("piece.json", "results.json"):  # results last: its presence says the piece is whole
        p = os.path.join(src, fn)
        if os.path.exists(p):
            _copy(p, os.path.join(dst, fn))
    return True


def restore(out, pieces):
    """Copy archived pieces that OUT lacks into OUT (marked); returns their names."""
    done = []
    for piece in pieces:
        a = os.path.join(root(), piece, "results.json")
        d = os.path.join(out, piece)
        if not os.path.exists(a) or os.path.exists(os.path.join(d, "results.json")):
            continue
        for fn in ("piece.json", "results.json"):
            p = os.path.join(root(), piece, fn)
            if os.path.exists(p):
                _copy(p, os.path.join(d, fn))
        open(os.path.join(d, MARK), "w").close()
        done.append(piece)
    return done


def restored(out, piece):
    return os.path.exists(os.path.join(out, piece, MARK))


def run_file(run_dir, fn):
    """OUT/runs/NAME/FN, or the archived copy when this machine no longer has the run."""
    p = os.path.join(run_dir, fn)
    if os.path.exists(p):
        return p
    a = os.path.join(root(), "runs", os.path.basename(run_dir.rstrip("/")), fn)
    return a if os.path.exists(a) else p
