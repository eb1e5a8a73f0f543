"""The committed record of finished full-mode pieces (evals/results/full/).

A piece's outputs live in evals/out/full (git-ignored, gone with the machine). When a
piece finishes, what the report needs is copied here and committed: its results.json,
piece.json (when and how long) and, per training run it used, cmd.txt and log.jsonl
(a few KB each; checkpoints are not kept). On a fresh machine the job restores these
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
        for fn in ("cmd.txt", "log.jsonl"):
            p = os.path.join(out, "runs", n, fn)
            if os.path.exists(p):
                _copy(p, os.path.join(root(), "runs", n, fn))
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
