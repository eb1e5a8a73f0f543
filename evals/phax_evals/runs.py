"""Running phax: training runs that are reused when finished and resumed when
interrupted, evaluations whose outputs are reused, parameter counts of configs.

Every path handed to phax and written into an output is relative to the
repository root (the job runs there), never an absolute path of the machine. A build
folder outside the repository is written "$BUILD_DIR" in the commands recorded; a corpus
folder outside it is handed to phax through a link in OUT (main.py).

A run's identity (its cmd.txt) does not depend on the build folder or on where its corpus
lies: those are provenance (provenance.json beside cmd.txt: commit, build, libraries, CPU,
the data's checksums), and a finished run whose data checksums differ from the corpus now
is refused, not reused.
"""
import json
import os
import shlex
import shutil
import subprocess

from . import archive, provenance

SHOWN = {}  # path prefix outside the repository -> what recorded commands say instead
DATA_SEEN = set()  # --data folders handed to phax since main.py last cleared it (a piece's corpora)


class JobError(Exception):
    """One line for the user; the job stops with it."""


def say(msg):
    print(f"== {msg} ==", flush=True)


def note(msg):
    print(f"   {msg}", flush=True)


def quote_cmd(argv):
    """The command as recorded: a path under a folder of SHOWN (a build folder outside the
    repository) is written from its placeholder."""
    out = []
    for a in argv:
        for pre, name in SHOWN.items():
            if a == pre or a.startswith(pre + os.sep):
                out.append(name + shlex.quote(a[len(pre):]) if a != pre else name)
                break
        else:
            out.append(shlex.quote(a))
    return " ".join(out)


def note_data(argv):
    argv = list(argv)
    for i, a in enumerate(argv[:-1]):
        if a == "--data":
            DATA_SEEN.add(os.path.normpath(argv[i + 1]))


def corpus_name(folder, corpora):
    """The corpus a --data folder holds: its name in corpora (name -> folder), else the
    folder's own name (data/ptb and ../shared/data/ptb are both 'ptb')."""
    n = os.path.normpath(folder)
    for name, f in (corpora or {}).items():
        if os.path.normpath(f) == n or os.path.realpath(f) == os.path.realpath(folder):
            return name
    return os.path.basename(n)


def identity(text, corpora=None):
    """cmd.txt's text with what is provenance, not identity, taken out: the program's folder
    (build, build-dev, "$BUILD_DIR") and where the corpus lies (--data by corpus name)."""
    lines = text.strip().splitlines()
    if not lines:
        return ""
    try:
        argv = shlex.split(lines[0])
    except ValueError:
        return text.strip()
    if argv:
        argv[0] = os.path.basename(argv[0])
    for i in range(len(argv) - 1):
        if argv[i] == "--data":
            argv[i + 1] = "<" + corpus_name(argv[i + 1], corpora) + ">"
    return "\n".join([" ".join(argv)] + lines[1:])


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_logged(stage, argv, log, cmdfile=None, outputs=()):
    """Run argv with its output in log; a failure ends the job with its last line. The
    outputs it made (and cmdfile, log) go into the record (evals/results/full)."""
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    note_data(argv)
    if cmdfile:
        write_atomic(cmdfile, quote_cmd(argv) + "\n")
    with open(log, "w") as f:
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        if cmdfile and os.path.exists(cmdfile):
            os.remove(cmdfile)
        last = ""
        with open(log, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
            last = lines[-1] if lines else "(no output)"
        raise JobError(f"{stage}: {os.path.basename(argv[0])} failed: {last} (log: {log})")
    for p in list(outputs) + [log] + ([cmdfile] if cmdfile else []):
        archive.record(p)


class Runner:
    def __init__(self, build_dir, out, corpora=None):
        build_dir = os.path.relpath(build_dir)  # commands and summaries name no machine's folders
        if provenance.inside(build_dir) is None:  # recorded commands name no folder outside
            SHOWN[build_dir] = '"$BUILD_DIR"'
        self.phax = os.path.join(build_dir, "phax")
        self.build_dir = build_dir
        self.out = out
        self.corpora = corpora or {}  # name -> folder: a run's data by name and checksums
        self.runs = os.path.join(out, "runs")
        os.makedirs(self.runs, exist_ok=True)
        self._info = {}
        self.runs_used = []  # (run, provenance.json or None) of the runs the current piece used

    # --- training -------------------------------------------------------------------------
    def train(self, stage, name, args, desc=None, needs=()):
        """Train OUT/runs/NAME with `phax train ARGS --out DIR`, or reuse/resume it.
        needs: outputs made from the run's checkpoint; a run restored from the record (no
        checkpoint) is trained again when one of them is missing. Returns the run folder."""
        d = os.path.join(self.runs, name)
        note_data(args)
        if os.path.exists(os.path.join(d, archive.MARK)) and any(not os.path.exists(p) for p in needs):
            note(f"{stage}: {name} is in the record without its checkpoint, which an output needs: training it again")
            shutil.rmtree(d)
        argv = [self.phax, "train"] + list(args) + ["--out", d]
        line = quote_cmd(argv)
        if "--config" in args:  # the run is what the file says: its text is part of the identity
            cfg = args[list(args).index("--config") + 1]
            line += "\n# " + cfg + ": " + json.dumps(json.load(open(cfg)), sort_keys=True)
        desc = desc or name
        ck = os.path.join(d, "checkpoint.safetensors")
        cmd_txt = os.path.join(d, "cmd.txt")
        if os.path.exists(ck) or os.path.exists(os.path.join(d, "DONE")):
            old = open(cmd_txt).read().strip() if os.path.exists(cmd_txt) else ""
            if identity(old, self.corpora) != identity(line, self.corpora):
                raise JobError(f"{stage}: {d} holds a run made with other settings (see its cmd.txt); "
                               f"redo it with --force, or use another --out")
            other = self.other_data(d, args)
            if other:
                raise JobError(f"{stage}: {d} was trained on other {other} data than the corpus now "
                               f"(the checksums in its provenance.json); redo it with --force, or use another --out")
            if os.path.exists(os.path.join(d, "DONE")):
                note(f"{stage}: reusing the finished run {desc}")
                self.note_used(d)
                return d
            say(f"{stage}: resuming {desc} ({d})")
            argv = [self.phax, "train", "--resume", "--log-every", "50", "--out", d]
        else:
            shutil.rmtree(d, ignore_errors=True)  # a run folder without a checkpoint: started over
            os.makedirs(d, exist_ok=True)
            write_atomic(cmd_txt, line + "\n")
            say(f"{stage}: training {desc}")
        resumed = argv[2] == "--resume"
        with open(os.path.join(d, "train.out"), "a") as log:
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            last = ""
            for l in p.stdout:
                log.write(l)
                log.flush()
                if l.strip():
                    last = l.rstrip()
                if l.startswith(("done", "stopped", "training", "resuming")) or " step " in l[:20]:
                    print("   " + l.rstrip(), flush=True)
            rc = p.wait()
        if rc != 0:
            raise JobError(f"{stage}: training {name} failed: {last} (log: {d}/train.out)")
        write_atomic(os.path.join(d, "provenance.json"),
                     json.dumps(dict(provenance.current(self.build_dir), data=self.run_data(args), resumed=resumed),
                                indent=1, sort_keys=True) + "\n")
        open(os.path.join(d, "DONE"), "w").close()
        archive.record_run(d)
        self._info.pop(d, None)
        self.note_used(d)
        return d

    # --- provenance -----------------------------------------------------------------------------
    def note_used(self, d):
        """Keep the provenance of a run a piece uses (runs_used: main.py writes the builds they
        were made with into piece.json, so a run reused from an older build shows as mixed)."""
        try:
            with open(os.path.join(d, "provenance.json")) as f:
                pv = json.load(f)
        except (OSError, ValueError):
            pv = None  # a run of before provenance: nothing known about its build
        self.runs_used.append((os.path.basename(d), pv))

    def run_data(self, args):
        """{corpus: {folder, files: {file: sha256}}} of the corpus a run reads (none for the
        synthetic tasks)."""
        args = list(args)
        if "--data" not in args[:-1]:
            return {}
        folder = args[args.index("--data") + 1]
        name = corpus_name(folder, self.corpora)
        return provenance.corpora_record({name: folder})

    def other_data(self, d, args):
        """The corpus name when the finished run d recorded other checksums for it than the
        corpus has now (files compared by name, .xz or not); None when they agree or d
        recorded none."""
        try:
            with open(os.path.join(d, "provenance.json")) as f:
                old = json.load(f).get("data") or {}
        except (OSError, ValueError):
            return None

        def files(rec):
            return {k[:-3] if k.endswith(".xz") else k: v for k, v in rec.get("files", {}).items()}
        for name, rec in self.run_data(args).items():
            if name in old and files(old[name]) != files(rec):
                return name
        return None

    # --- what a run holds -----------------------------------------------------------------------
    def log(self, run_dir):
        out = []
        with open(os.path.join(run_dir, "log.jsonl")) as f:
            for l in f:
                l = l.strip()
                if l:
                    out.append(json.loads(l))
        return out

    def info_text(self, path):
        if path not in self._info:
            r = subprocess.run([self.phax, "info", path], capture_output=True, text=True)
            if r.returncode != 0:
                raise JobError(f"phax info {path} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
            self._info[path] = r.stdout
        return self._info[path]

    def counts(self, path):
        """(total, non-embedding) parameters of a run folder, checkpoint or config file."""
        txt = self.info_text(path)
        total = emb = head = None
        in_params = False
        for l in txt.splitlines():
            if l.startswith("parameters"):
                in_params = True
            if not in_params:
                continue
            w = l.split()
            if not w:
                continue
            if w[0] == "embedding":
                emb = int(w[1].replace(",", ""))
            elif w[0] == "head":
                head = 0 if w[1] == "tied" else int(w[1].replace(",", ""))
            elif w[0] == "total":
                total = int(w[1].replace(",", ""))
                break
        if total is None or emb is None or head is None:
            raise JobError(f"phax info {path}: no parameter counts in its output")
        return total, total - emb - head

    def config(self, path):
        txt = self.info_text(path)
        s = txt.index("config (resolved):")
        body = txt[s:].split("\n", 1)[1]
        depth, end = 0, 0
        for i, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
        return json.loads(body[:end])


def match_params(runner, cfg_dir, name, cfg, knob, target, lo=1, hi=None, tol=0.03):
    """Set cfg[knob] (an integer width) so that the non-embedding parameter count is
    nearest `target`; the config file is written to cfg_dir/name.json. Returns
    (path, count). Error when no value comes within tol."""
    os.makedirs(cfg_dir, exist_ok=True)
    path = os.path.join(cfg_dir, f"{name}.json")
    hi = hi or 64 * cfg["d_model"]

    def count(v):
        c = dict(cfg)
        c[knob] = v
        write_atomic(path, json.dumps(c, indent=1) + "\n")
        runner._info.pop(path, None)
        return runner.counts(path)[1]

    a, b = lo, hi
    while b - a > 1:  # counts grow with the knob
        m = (a + b) // 2
        if count(m) < target:
            a = m
        else:
            b = m
    na, nb = count(a), count(b)
    best, n = (a, na) if abs(na - target) <= abs(nb - target) else (b, nb)
    count(best)  # the file holds the chosen value
    if abs(n - target) > tol * target:
        raise JobError(f"match: {name}: no {knob} gives {target} non-embedding parameters within "
                       f"{tol:.0%} (nearest {n} at {knob} {best})")
    return path, n


def write_config(cfg_dir, name, cfg):
    os.makedirs(cfg_dir, exist_ok=True)
    path = os.path.join(cfg_dir, f"{name}.json")
    text = json.dumps(cfg, indent=1) + "\n"
    if not os.path.exists(path) or open(path).read() != text:
        write_atomic(path, text)
    return path

