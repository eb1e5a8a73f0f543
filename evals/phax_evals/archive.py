"""The committed record of full-mode work (evals/results/full/), kept as it finishes.

Outputs live in evals/out/full (git-ignored, gone with the machine). So that neither a
lost machine nor a session stopped in the middle of a piece loses finished work, each
finished thing is copied here at once, under the same relative path, and committed:
  runs/NAME/cmd.txt, provenance.json, DONE, log.jsonl.xz
                                           a finished training run (no checkpoint)
  PIECE/NAME.test.json, .csv, ...          each evaluation or benchmark output as made
  PIECE/results.json, piece.json           a finished piece (piece.json: its provenance and
                                           the checksums of the corpora it read)
On a fresh machine the job copies the record back into OUT (restore): a finished run is
reused without its checkpoint unless an output that needs the checkpoint is missing (then
it is trained again), a finished piece is not run again unless --force names it.
"""
import json
import lzma
import os
import shutil

DIR = os.path.join("evals", "results", "full")
MARK = "RESTORED"  # in OUT/<piece>/ or OUT/runs/NAME/: it came from the record
_on = {"out": None}  # recording is on for this OUT (main.py: full mode)


def root():
    return os.environ.get("PHAX_EVAL_ARCHIVE", DIR)


def enable(out):
    _on["out"] = out


def _atomic_copy(src, dst, compress=False, decompress=False):
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    tmp = dst + ".tmp"
    opener = lzma.open if decompress else open
    with opener(src, "rb") as f, (lzma.open(tmp, "wb", preset=9) if compress else open(tmp, "wb")) as g:
        shutil.copyfileobj(f, g)
    os.replace(tmp, dst)


def record(path):
    """Copy OUT/REL (a finished output) to the record's REL; log.jsonl is kept as log.jsonl.xz."""
    out = _on["out"]
    if not out or not os.path.exists(path):
        return
    rel = os.path.relpath(path, out)
    if rel.startswith(".."):
        return
    if os.path.basename(rel) == "log.jsonl":
        _atomic_copy(path, os.path.join(root(), rel + ".xz"), compress=True)
    else:
        _atomic_copy(path, os.path.join(root(), rel))


def record_run(run_dir):
    """A finished training run: its command, its provenance (commit, build, libraries, CPU,
    data checksums), its log, DONE (not the checkpoints)."""
    for fn in ("cmd.txt", "provenance.json", "log.jsonl", "DONE"):
        record(os.path.join(run_dir, fn))


def save_piece(out, piece):
    """A finished piece: piece.json, then results.json (its presence says the piece is whole)."""
    src = os.path.join(out, piece)
    if not _on["out"] or not os.path.exists(os.path.join(src, "results.json")) or \
            os.path.exists(os.path.join(src, MARK)):
        return False
    for fn in ("piece.json", "results.json"):
        record(os.path.join(src, fn))
    return True


def restore(out, pieces):
    """Copy what the record holds and OUT lacks into OUT. Returns the pieces restored whole
    (their results.json came back; they are marked)."""
    rec = root()
    whole = []
    if not os.path.isdir(rec):
        return whole
    for piece in pieces:  # a piece OUT finished itself keeps OUT's results
        if os.path.exists(os.path.join(rec, piece, "results.json")) and \
                not os.path.exists(os.path.join(out, piece, "results.json")):
            whole.append(piece)
    for d, _, files in os.walk(rec):
        for fn in files:
            src = os.path.join(d, fn)
            rel = os.path.relpath(src, rec)
            top = rel.split(os.sep)[0]
            if fn.endswith(".tmp") or (top in pieces and top not in whole and fn in ("results.json", "piece.json")):
                continue
            dst = os.path.join(out, rel[:-3] if fn == "log.jsonl.xz" else rel)
            if os.path.exists(dst):
                continue
            if top == "runs" and os.path.exists(os.path.join(os.path.dirname(dst), "checkpoint.safetensors")):
                continue  # OUT's own run (finished or being resumed) wins
            _atomic_copy(src, dst, decompress=fn == "log.jsonl.xz")
            if top == "runs":
                open(os.path.join(os.path.dirname(dst), MARK), "w").close()
    for piece in whole:
        open(os.path.join(out, piece, MARK), "w").close()
    return whole


def restored(out, piece):
    return os.path.exists(os.path.join(out, piece, MARK))
