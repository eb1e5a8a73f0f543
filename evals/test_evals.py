"""Tests of the main job (meson suite `evals`): the verdict arithmetic on crafted numbers,
and a smoke run of the job itself in its tiny settings (PHAX_EVAL_TINY=1: every piece
in seconds) that must exit 0 and write a summary with the seven claims and no absolute
path. Run from the repository root: python3 evals/test_evals.py [BUILD_DIR]."""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from evals.phax_evals import report  # noqa: E402

BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else "build"


class Archive(unittest.TestCase):
    """Each finished run and output is recorded at once (a run: cmd.txt, DONE, the log
    compressed; never the checkpoint), a finished piece's results too, and a fresh OUT gets
    them back: runs marked as restored, whole pieces marked, OUT's own files never replaced."""

    def test_round_trip(self):
        import lzma
        from evals.phax_evals import archive
        with tempfile.TemporaryDirectory() as t:
            os.environ["PHAX_EVAL_ARCHIVE"] = os.path.join(t, "rec")
            try:
                out = os.path.join(t, "out")
                archive.enable(out)
                run = os.path.join(out, "runs", "lm-x-s1")
                os.makedirs(run)
                os.makedirs(os.path.join(out, "lm"))
                for fn, txt in [("cmd.txt", "phax train\n"), ("log.jsonl", '{"step": 1}\n' * 50),
                                ("checkpoint.safetensors", "x"), ("DONE", "")]:
                    open(os.path.join(run, fn), "w").write(txt)
                archive.record_run(run)
                test = os.path.join(out, "lm", "lm-x-s1.test.json")
                open(test, "w").write('{"ppl": 80.0}')
                archive.record(test)
                rec = os.path.join(t, "rec")
                self.assertTrue(os.path.exists(os.path.join(rec, "runs", "lm-x-s1", "log.jsonl.xz")))
                self.assertFalse(os.path.exists(os.path.join(rec, "runs", "lm-x-s1", "checkpoint.safetensors")))
                with lzma.open(os.path.join(rec, "runs", "lm-x-s1", "log.jsonl.xz"), "rt") as f:
                    self.assertEqual(f.read(), '{"step": 1}\n' * 50)
                # An unfinished piece: its runs and outputs come back, the piece is not whole.
                fresh = os.path.join(t, "fresh")
                self.assertEqual(archive.restore(fresh, ["lm", "iso"]), [])
                self.assertTrue(os.path.exists(os.path.join(fresh, "runs", "lm-x-s1", "DONE")))
                self.assertTrue(os.path.exists(os.path.join(fresh, "runs", "lm-x-s1", archive.MARK)))
                self.assertEqual(open(os.path.join(fresh, "runs", "lm-x-s1", "log.jsonl")).read(), '{"step": 1}\n' * 50)
                self.assertTrue(os.path.exists(os.path.join(fresh, "lm", "lm-x-s1.test.json")))
                self.assertFalse(archive.restored(fresh, "lm"))
                # The piece finishes: recorded whole; a second fresh OUT gets it marked.
                json.dump({"runs": [{"run": run, "test_ppl": 80.0}]}, open(os.path.join(out, "lm", "results.json"), "w"))
                self.assertTrue(archive.save_piece(out, "lm"))
                fresh2 = os.path.join(t, "fresh2")
                self.assertEqual(archive.restore(fresh2, ["lm", "iso"]), ["lm"])
                self.assertTrue(archive.restored(fresh2, "lm"))
                self.assertFalse(archive.save_piece(fresh2, "lm"))  # a restored piece is not recorded again
                # OUT's own run (with its checkpoint) is never overwritten by the record.
                own = os.path.join(t, "own")
                os.makedirs(os.path.join(own, "runs", "lm-x-s1"))
                open(os.path.join(own, "runs", "lm-x-s1", "checkpoint.safetensors"), "w").write("mine")
                archive.restore(own, ["lm"])
                self.assertFalse(os.path.exists(os.path.join(own, "runs", "lm-x-s1", "DONE")))
                self.assertFalse(os.path.exists(os.path.join(own, "runs", "lm-x-s1", archive.MARK)))
            finally:
                del os.environ["PHAX_EVAL_ARCHIVE"]
                archive.enable(None)


class Verdicts(unittest.TestCase):
    def test_noise_needs_two_seeds_each(self):
        self.assertEqual(report.beyond_noise([1.0], [5.0]), 0)           # one seed: no spread
        self.assertEqual(report.beyond_noise([10, 10.2, 9.8], [12, 12.1, 11.9]), -1)
        self.assertEqual(report.beyond_noise([12, 12.1, 11.9], [10, 10.2, 9.8]), 1)
        self.assertEqual(report.beyond_noise([10, 12, 8], [10.5, 12.5, 8.5]), 0)  # within 2 SE
        # A NaN seed is dropped (phax eval refuses to report one; a diverged run stops the job).
        self.assertEqual(report.beyond_noise([float("nan"), 1, 2], [5, 6, 7]), -1)
        # NaN never makes a difference count: all-NaN is no data.
        self.assertEqual(report.beyond_noise([float("nan")] * 3, [1, 2, 3]), 0)

    def test_pha_vs_transformer_tolerance(self):
        v, _ = report.verdict_pha_tr([("c", [102.9, 103.0, 102.8], [100.0, 100.1, 99.9])])
        self.assertEqual(v, "holds")  # +2.9 %: within the tolerance
        v, _ = report.verdict_pha_tr([("c", [110.0, 110.1, 109.9], [100.0, 100.1, 99.9])])
        self.assertEqual(v, "does not hold")
        v, _ = report.verdict_pha_tr([("c", [110.0, 100.0, 120.0], [100.0, 110.0, 90.0])])
        self.assertEqual(v, "inconclusive")

    def test_serial(self):
        self.assertEqual(report.verdict_par_ser([("c", [100, 101, 99], [110, 111, 109])])[0], "holds")
        self.assertEqual(report.verdict_par_ser([("c", [110, 111, 109], [100, 101, 99])])[0], "does not hold")

    def test_no_attention_hurts_most(self):
        by = {"pha": [100, 101, 99], "pha_noattn": [130, 131, 129], "pha_nogss": [110, 111, 109],
              "pha_noffn": [105, 106, 104]}
        self.assertEqual(report.verdict_no_attn(by)[0], "holds")
        by["pha_nogss"] = [140, 141, 139]
        self.assertEqual(report.verdict_no_attn(by)[0], "does not hold")

    def test_sandwich_margin(self):
        w = [[0.5, 0.2, 0.3], [0.3, 0.4, 0.3], [0.3, 0.4, 0.3], [0.5, 0.2, 0.3]]
        self.assertTrue(report.sandwich_ok(w))
        flat = [[1 / 3 + 0.005, 1 / 3 - 0.005, 1 / 3]] + [[1 / 3, 1 / 3, 1 / 3]] * 2 + [[1 / 3 + 0.005, 1 / 3 - 0.005, 1 / 3]]
        self.assertFalse(report.sandwich_ok(flat))  # the right shape but below the 0.01 margin
        inverted = [[0.2, 0.5, 0.3], [0.4, 0.3, 0.3], [0.4, 0.3, 0.3], [0.2, 0.5, 0.3]]
        self.assertFalse(report.sandwich_ok(inverted))

    def test_iso_interpolation(self):
        sizes = [(1e6, 200.0, "a"), (2e6, 150.0, "b"), (4e6, 120.0, "c")]
        k0, k1, f, n, ok = report.interp_match(sizes, 135.0)
        self.assertTrue(ok)
        self.assertEqual((k0, k1), ("b", "c"))
        self.assertAlmostEqual(f, 0.5)
        self.assertAlmostEqual(n, math.sqrt(2e6 * 4e6))  # halfway in log parameters
        k0, k1, f, n, ok = report.interp_match(sizes, 100.0)  # better than every size
        self.assertFalse(ok)
        self.assertEqual(k0, "c")

    def test_slope(self):
        xs = [512, 1024, 2048, 4096]
        self.assertAlmostEqual(report.fit_slope(xs, [3 * x for x in xs]), 1.0)
        self.assertAlmostEqual(report.fit_slope(xs, [7.0] * 4), 0.0)
        self.assertIsNone(report.fit_slope([512], [1.0]))


class Smoke(unittest.TestCase):
    def test_tiny_job(self):
        with tempfile.TemporaryDirectory(prefix="phax-evals-") as tmp:
            out = os.path.relpath(os.path.join(tmp, "out"))
            env = dict(os.environ, PHAX_EVAL_TINY="1", BUILD_DIR=os.path.relpath(BUILD), OMP_NUM_THREADS="2")
            r = subprocess.run([sys.executable, "-m", "evals.phax_evals.main", "--only", "lm,recall,sandwich,efficiency",
                                "--out", out], env=env, capture_output=True, text=True, timeout=900)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            with open(os.path.join(out, "summary.md")) as f:
                s = f.read()
            claims = s[s.index("## Claims"):].split("\n\n")[1].splitlines()
            self.assertEqual(len(claims), 2 + 7, claims)
            for name in ("lm", "recall", "sandwich", "efficiency"):
                self.assertTrue(os.path.exists(os.path.join(out, name, "results.json")), name)
            for root in (os.path.abspath("."), os.path.realpath(tmp)):
                # An absolute path starts a word; "../../tmp/x" (relative) holds "/tmp/x" inside it.
                self.assertIsNone(re.search(r"(^|[\s`('\"=])" + re.escape(root), s), root)
            res = json.load(open(os.path.join(out, "recall", "results.json")))
            self.assertEqual(len(res["runs"]), 3 + 1)  # short (twice: w_long, w_short), long, stochastic
            # A second run reuses everything (nothing trained again).
            r2 = subprocess.run([sys.executable, "-m", "evals.phax_evals.main", "--only", "lm", "--out", out],
                                env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(r2.returncode, 0, r2.stderr[-2000:])
            self.assertNotIn("== lm: training", r2.stdout)
            self.assertIn("reusing the finished run", r2.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
