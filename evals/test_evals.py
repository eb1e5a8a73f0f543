"""Tests of the main job (meson suite `evals`): the verdict arithmetic on crafted numbers,
and a smoke run of the job itself in its tiny settings (PHAX_EVAL_TINY=1: every piece
in seconds) that must exit 0 and write a summary with the eight claims and no absolute
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
    """The claims' verdict functions on crafted seeds (report.verdict_*: one claim judged alone,
    Holm across its own tests). Every PHA claim is far from the paper's scale, so a word other
    than "holds" reads "not reproduced at this scale (<the word>)"."""
    FAR = "not reproduced at this scale"

    def test_noise_needs_two_seeds_each(self):
        one = report.judge([("c", [dict(label="x", a=[1.0], b=[5.0], direction="less", min_effect=1.0,
                                        far_from_paper=False, what="")])])["c"][0]
        self.assertEqual(one["word"], "inconclusive (one seed)")            # one seed: no spread
        self.assertIsNone(one["p"])

        def word(a, b):
            return report.judge([("c", [dict(label="x", a=a, b=b, direction="less", min_effect=1.0,
                                             far_from_paper=False, what="")])])["c"][0]["word"]
        self.assertEqual(word([10, 10.2, 9.8], [12, 12.1, 11.9]), "holds")
        self.assertEqual(word([12, 12.1, 11.9], [10, 10.2, 9.8]), "opposite measured")
        self.assertEqual(word([10, 12, 8], [10.5, 12.5, 8.5]), "inconclusive")  # within noise
        # A NaN seed is dropped (phax eval refuses to report one; a diverged run stops the job).
        self.assertEqual(word([float("nan"), 1, 2], [5, 6, 7]), "holds")
        # NaN never makes a difference count: all-NaN is no data.
        self.assertEqual(word([float("nan")] * 3, [1, 2, 3]), "inconclusive (one seed)")

    def test_pha_vs_transformer_tolerance(self):
        v, m = report.verdict_pha_tr([("c", [101.0, 101.1, 100.9], [100.0, 100.1, 99.9])])
        self.assertEqual(v, "holds")  # +1 %: clearly within the 3 % margin
        self.assertIn("+1.0 %", m)
        v, _ = report.verdict_pha_tr([("c", [110.0, 110.1, 109.9], [100.0, 100.1, 99.9])])
        self.assertEqual(v, self.FAR + " (opposite measured)")  # +10 %: clearly beyond it
        v, _ = report.verdict_pha_tr([("c", [110.0, 100.0, 120.0], [100.0, 110.0, 90.0])])
        self.assertEqual(v, self.FAR + " (inconclusive)")

    def test_serial(self):
        self.assertEqual(report.verdict_par_ser([("c", [100, 101, 99], [110, 111, 109])])[0], "holds")
        self.assertEqual(report.verdict_par_ser([("c", [110, 111, 109], [100, 101, 99])])[0],
                         self.FAR + " (opposite measured)")

    def test_no_attention_hurts_most(self):
        by = {"pha": [100, 101, 99], "pha_noattn": [130, 131, 129], "pha_nogss": [110, 111, 109],
              "pha_noffn": [105, 106, 104]}
        self.assertEqual(report.verdict_no_attn(by)[0], "holds")
        by["pha_nogss"] = [140, 141, 139]
        v = report.verdict_no_attn(by)[0]
        self.assertTrue(v.startswith("partly: "), v)  # above -ffn, below -gss: not all tests hold
        self.assertIn("-attn vs -gss: " + self.FAR + " (opposite measured)", v)
        self.assertIn("-attn vs -ffn: holds", v)

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
            self.assertEqual(len(claims), 2 + 8, claims)
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

    def test_tiny_generality(self):
        """The generality piece end to end in its tiny full-mode settings: the three regimes with
        swa_full and with swax_gdn in SWAX's place, 3 seeds, every run tagged with its backbone and
        trained as its family; the section's claims table has each backbone's row beside SWAX's (no
        recall piece here: that row says so)."""
        with tempfile.TemporaryDirectory(prefix="phax-evals-") as tmp:
            out = os.path.relpath(os.path.join(tmp, "out"))
            env = dict(os.environ, PHAX_EVAL_TINY="1", BUILD_DIR=os.path.relpath(BUILD), OMP_NUM_THREADS="2")
            r = subprocess.run([sys.executable, "-m", "evals.phax_evals.main", "--full", "--only", "generality",
                                "--out", out], env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            with open(os.path.join(out, "generality", "results.json")) as f:
                res = json.load(f)
            self.assertEqual(res["backbones"], {"full attention": "swa_full", "Gated DeltaNet": "swax_gdn"})
            # per backbone: short twice (w_long, w_short), long, stochastic; 3 seeds
            self.assertEqual(len(res["runs"]), 2 * 3 * (3 + 1))
            for run in res["runs"]:
                fam = res["backbones"][run["backbone"]]
                with open(os.path.join(run["run"], "train.out")) as f:
                    self.assertIn(f"training {fam}:", f.read())
            with open(os.path.join(out, "summary.md")) as f:
                s = f.read()
            sec = s[s.index("## generality"):]
            self.assertIn("| mLSTM (SWAX) | `swax` | no runs (the recall piece)", sec)
            self.assertRegex(sec, r"\| full attention \| `swa_full` \| ")
            self.assertRegex(sec, r"\| Gated DeltaNet \| `swax_gdn` \| ")

    def test_tiny_precision(self):
        """The precision piece end to end in its tiny settings: 3 models x 2 precisions x 2 seeds,
        the bf16 runs on the cpu_bf16 backend, the section with one verdict per model."""
        phax = os.path.join(BUILD, "phax")
        probe = subprocess.run([phax, "train", "--precision", "bf16", "--backend", "ref", "--family", "pha",
                                "--task", "recall", "--out", "x"], capture_output=True, text=True)
        if "only with the cpu backend" not in probe.stderr:
            self.fail("phax train --precision bf16 --backend ref did not refuse: " + probe.stderr[-500:])
        with tempfile.TemporaryDirectory(prefix="phax-evals-") as tmp:
            out = os.path.relpath(os.path.join(tmp, "out"))
            env = dict(os.environ, PHAX_EVAL_TINY="1", BUILD_DIR=os.path.relpath(BUILD), OMP_NUM_THREADS="2")
            r = subprocess.run([sys.executable, "-m", "evals.phax_evals.main", "--only", "precision", "--out", out],
                               env=env, capture_output=True, text=True, timeout=600)
            if "the bf16 tier is unavailable here" in r.stderr + r.stdout:  # no oneDNN, or an AVX2-only CPU
                self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
                self.assertFalse(os.path.exists(os.path.join(out, "precision", "results.json")))
                self.skipTest("the bf16 tier is unavailable on this build or CPU")
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            res = json.load(open(os.path.join(out, "precision", "results.json")))
            self.assertEqual(len(res["runs"]), 3 * 2 * 2)
            for run in res["runs"]:
                with open(os.path.join(run["run"], "cmd.txt")) as f:
                    cmd = f.read()
                self.assertIn("--precision " + run["precision"], cmd)
            with open(os.path.join(out, "summary.md")) as f:
                s = f.read()
            self.assertIn("## precision: float32 or the bf16 tier", s)
            sec = s[s.index("## precision"):]
            for m in ("pha", "transformer", "swax"):
                self.assertRegex(sec, r"\| " + m + r" \| 2 \|")


class PrecisionVerdict(unittest.TestCase):
    """report.precision_verdict: paired TOST at ±1 % on ln(ppl_bf16 / ppl_f32)."""

    def test_known_answers(self):
        from evals.phax_evals import report
        # Tight and near 0: mean 0.001, sd 0.001, n 3: 90 % t-interval 0.001 ± 2.92·0.000577 = [-0.0007, 0.0027].
        v, mu, ci90, ci95 = report.precision_verdict([0.0, 0.001, 0.002], 0.01)
        self.assertTrue(v.startswith("equivalent"), v)
        self.assertAlmostEqual(mu, math.expm1(0.001), places=12)
        self.assertAlmostEqual(ci90[1], math.expm1(0.001 + 2.919985580 * 0.001 / math.sqrt(3)), places=8)
        # Consistently 5 % worse: the 95 % interval excludes 0.
        v, *_ = report.precision_verdict([0.05, 0.049, 0.051], 0.01)
        self.assertTrue(v.startswith("differs"), v)
        # Noisy: neither.
        v, *_ = report.precision_verdict([0.03, -0.02, 0.01], 0.01)
        self.assertTrue(v.startswith("inconclusive"), v)
        # One pair: no interval.
        v, mu, ci90, ci95 = report.precision_verdict([0.002], 0.01)
        self.assertTrue(v.startswith("no verdict") and ci90 is None, v)
        # NaN is dropped, not counted as a pair.
        v, *_ = report.precision_verdict([0.0, float("nan")], 0.01)
        self.assertTrue(v.startswith("no verdict"), v)



# --- stats.py: the statistics behind the verdicts (known answers; run alone with
# python3 evals/test_evals.py build -k Stats) ---------------------------------------------------
from evals.phax_evals import stats  # noqa: E402

HAND_A, HAND_B = [1, 2, 3, 4], [3, 4, 5, 6, 7]
# Welch by hand: means 2.5 and 5, variances 5/3 and 5/2, so s_a²/n_a = 5/12, s_b²/n_b = 1/2,
# se² = 11/12, t = -2.5/√(11/12) = -2.6111648393, df = (11/12)² / ((5/12)²/3 + (1/2)²/4)
# = (121/144) / (52/432) = 363/52 = 6.9807692 (the pooled test would use 7);
# p = 2 P(T_{363/52} > 2.6111648) = 0.0349387824 (checked by Simpson integration of the t density
# on [0, t], 20000 intervals); t_{0.975, 363/52} = 2.3659454212, so the 95 % interval is
# -2.5 ± 2.3659454212·0.9574271078 = [-4.7652203, -0.2347797].


class StatsDistributions(unittest.TestCase):
    def test_t_quantiles_from_tables(self):
        for df, q in [(1, 12.706204736), (2, 4.302652730), (5, 2.570581836), (30, 2.042272456),
                      (1e12, 1.959963985), (math.inf, 1.959963985)]:
            self.assertAlmostEqual(stats.student_t_ppf(0.975, df), q, delta=1e-9, msg=df)
            self.assertAlmostEqual(stats.student_t_ppf(0.025, df), -q, delta=1e-9, msg=df)
        self.assertAlmostEqual(stats.student_t_ppf(0.995, 10), 3.169272673, delta=1e-9)
        # Very large df (the 1/df expansion's side of the switch at 1e6, and the fraction's):
        # t_p = z + (z³ + z)/(4 df) + O(df⁻²) (Cornish-Fisher), the df⁻² term < 3e-10 here.
        z = 1.959963984540054
        for df in (2e6, 3e5):
            self.assertAlmostEqual(stats.student_t_ppf(0.975, df), z + (z ** 3 + z) / (4 * df), delta=1e-9)
        self.assertEqual(stats.student_t_ppf(0.5, 3.3), 0.0)

    def test_t_cdf_closed_forms_and_fractional_df(self):
        for t in (-30.0, -2.0, -0.1, 0.0, 0.7, 5.0):
            self.assertAlmostEqual(stats.student_t_cdf(t, 1), 0.5 + math.atan(t) / math.pi, delta=1e-13)  # Cauchy
            self.assertAlmostEqual(stats.student_t_cdf(t, 2), 0.5 + t / (2 * math.sqrt(2 + t * t)), delta=1e-13)
        # Fractional df: Simpson integration of the density on [0, 2] (20000 intervals).
        self.assertAlmostEqual(stats.student_t_cdf(2.0, 2.5), 0.9213042521210172, delta=1e-12)
        for df in (0.7, 363 / 52, 150.5, 3e6):
            for p in (1e-6, 0.05, 0.6, 0.999):
                self.assertAlmostEqual(stats.student_t_cdf(stats.student_t_ppf(p, df), df), p, delta=1e-12)

    def test_normal(self):
        self.assertAlmostEqual(stats.normal_ppf(0.975), 1.959963984540054, delta=1e-12)
        self.assertAlmostEqual(stats.normal_ppf(1e-10), -6.361340902404056, delta=1e-9)
        self.assertAlmostEqual(stats.normal_cdf(-1.0), 0.15865525393145707, delta=1e-14)
        self.assertEqual(stats.normal_ppf(0.5), 0.0)


class StatsWelch(unittest.TestCase):
    def test_hand_example(self):
        w = stats.welch(HAND_A, HAND_B)
        self.assertEqual((w["n_a"], w["n_b"], w["mean_a"], w["mean_b"], w["diff"]), (4, 5, 2.5, 5.0, -2.5))
        self.assertAlmostEqual(w["se"], math.sqrt(11 / 12), delta=1e-12)
        self.assertAlmostEqual(w["t"], -2.6111648393, delta=1e-9)
        self.assertAlmostEqual(w["df"], 363 / 52, delta=1e-12)
        self.assertAlmostEqual(w["p"], 0.0349387824, delta=1e-10)
        self.assertAlmostEqual(w["ci"][0], -4.7652203, delta=1e-7)
        self.assertAlmostEqual(w["ci"][1], -0.2347797, delta=1e-7)
        self.assertIsNone(w["why"])
        # The order of the samples flips the sign, not p.
        w2 = stats.welch(HAND_B, HAND_A)
        self.assertAlmostEqual(w2["t"], 2.6111648393, delta=1e-9)
        self.assertAlmostEqual(w2["p"], w["p"], delta=1e-15)

    def test_one_sided(self):
        less = stats.welch(HAND_A, HAND_B, alternative="less")["p"]
        greater = stats.welch(HAND_A, HAND_B, alternative="greater")["p"]
        self.assertAlmostEqual(less, 0.0349387824 / 2, delta=1e-10)  # the measured direction: half
        self.assertAlmostEqual(greater, 1 - 0.0349387824 / 2, delta=1e-10)
        with self.assertRaises(ValueError):
            stats.welch(HAND_A, HAND_B, alternative="bigger")

    def test_degenerate_samples(self):
        for a, b in (([1.0], [2.0, 3.0]), ([1.0, 2.0], []), ([1.0, float("nan")], [2.0, 3.0]), ([2.0, 2.0], [5.0, 5.0, 5.0])):
            w = stats.welch(a, b)
            self.assertIsNone(w["p"], (a, b))
            self.assertIsNone(w["ci"], (a, b))
            self.assertIsInstance(w["why"], str)
        # No spread on one side only: df = n - 1 of the other side, t from its variance alone.
        w = stats.welch([2.0, 2.0], [4.0, 5.0, 6.0])
        self.assertAlmostEqual(w["df"], 2.0, delta=1e-12)
        self.assertAlmostEqual(w["t"], -3.0 / math.sqrt(1 / 3), delta=1e-12)
        # Equal n and variances: Welch's df is the pooled 2n - 2; a None seed is dropped.
        self.assertAlmostEqual(stats.welch([1, 2, 3, None], [4, 5, 6])["df"], 4.0, delta=1e-12)


class StatsBootstrap(unittest.TestCase):
    def test_deterministic_percentile_interval(self):
        r = stats.bootstrap_diff(HAND_A, HAND_B, reps=4000, seed=7)
        self.assertEqual(r["diff"], -2.5)
        self.assertEqual(r, stats.bootstrap_diff(HAND_A, HAND_B, reps=4000, seed=7))
        lo, hi = r["ci"]
        self.assertLess(lo, -2.5)
        self.assertLess(-2.5, hi)
        # The bootstrap has no t quantile: a little narrower than Welch's [-4.77, -0.23] here.
        self.assertTrue(-4.77 < lo < -3.5 and -1.5 < hi < -0.23, (lo, hi))
        # Resampled means stay within the data: mean a ∈ [1, 4], mean b ∈ [3, 7].
        self.assertTrue(-6 <= lo and hi <= 1)
        self.assertIsNone(stats.bootstrap_diff([1.0], HAND_B)["ci"])

    def test_symmetric_resampling(self):
        # b constant, a = 0..9: the resampled mean of a is symmetric about 4.5 with sd √(8.25/10)
        # = 0.908, so the 95 % interval is about 4.5 ± 1.96·0.908 = [2.72, 6.28].
        lo, hi = stats.bootstrap_diff(list(range(10)), [0.0, 0.0], reps=10000, seed=3)["ci"]
        self.assertAlmostEqual((lo + hi) / 2, 4.5, delta=0.05)
        self.assertAlmostEqual(hi - lo, 2 * 1.96 * math.sqrt(0.825), delta=0.15)

    def test_shift_without_spread_in_the_difference(self):
        # b constant: every resample's difference is mean(a*) - 5, so the interval is that of mean(a*).
        r = stats.bootstrap_diff([4.0, 6.0], [5.0, 5.0, 5.0], reps=1000, seed=1)
        self.assertEqual(r["ci"], (-1.0, 1.0))  # mean(a*) ∈ {4, 5, 6}; 4 and 6 each with p 1/4


class StatsHolm(unittest.TestCase):
    def test_step_down(self):
        # Sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → 0.06 (monotone).
        for got, want in zip(stats.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02]):
            self.assertAlmostEqual(got, want, delta=1e-15)

    def test_none_and_cap(self):
        self.assertEqual(stats.holm([None, 0.2, 0.01, None]), [None, 0.2, 0.02, None])  # m = 2
        self.assertEqual(stats.holm([0.6, 0.7]), [1.0, 1.0])
        self.assertEqual(stats.holm([]), [])
        got = stats.holm([0.4, 0.9, 0.02])  # 0.06, then 0.4·2 = 0.8, then 0.9
        for g, w in zip(got, [0.8, 0.9, 0.06]):
            self.assertAlmostEqual(g, w, delta=1e-15)


class StatsPower(unittest.TestCase):
    def test_no_effect_gives_alpha(self):
        for sa, sb, na, nb, alpha in ((1, 1, 2, 2, 0.05), (1, 3, 3, 5, 0.05), (0.2, 2, 20, 4, 0.01), (1, 1, 1000, 1000, 0.1)):
            self.assertAlmostEqual(stats.power_welch(0.0, sa, sb, na, nb, alpha), alpha, delta=1e-10)

    def test_known_t_test_power(self):
        # R: power.t.test(n = 20, delta = 1) → 0.8689528 (its upper tail only; the lower tail adds
        # Φ(-ncp - c) ≈ 2e-7 here). Equal n and sd: Welch's df = the pooled 38.
        self.assertAlmostEqual(stats.power_welch(1.0, 1, 1, 20, 20), 0.8689528, delta=1e-6)
        self.assertAlmostEqual(stats.power_welch(-1.0, 1, 1, 20, 20), stats.power_welch(1.0, 1, 1, 20, 20), delta=1e-15)
        self.assertAlmostEqual(stats.power_welch(1.0, 1, 1, 17, 17), 0.8070367, delta=1e-6)
        self.assertIsNone(stats.power_welch(1.0, 1, 1, 1, 5))
        self.assertIsNone(stats.power_welch(1.0, 0, 0, 3, 3))

    def test_large_df_is_the_z_test(self):
        se = math.sqrt(2 / 1000)
        z, ncp = stats.normal_ppf(0.975), 0.1 / se
        normal = stats.normal_cdf(ncp - z) + stats.normal_cdf(-ncp - z)  # 0.6088
        t = stats.power_welch(0.1, 1, 1, 1000, 1000)
        self.assertAlmostEqual(t, normal, delta=1e-3)
        self.assertLess(t, normal)  # t's heavier tails: a little less power

    def test_seeds_for_power(self):
        # Cohen (1988), Statistical Power Analysis, Table 2.4.1 (two-sided alpha 0.05, power 0.80):
        # d = 1.0 → 17 per group, d = 0.8 → 26, d = 0.5 → 64; R power.t.test(power = .8, delta = 1)
        # gives n = 16.71 → 17. The normal approximation 2 (z_.975 + z_.8)² / d² = 15.7 would say 16.
        self.assertEqual(stats.seeds_for_power(1.0, 1.0), 17)
        self.assertEqual(stats.seeds_for_power(2.0, 2.0), 17)  # only delta/sd counts
        self.assertEqual(stats.seeds_for_power(0.8, 1.0), 26)
        self.assertEqual(stats.seeds_for_power(0.5, 1.0), 64)
        self.assertIsNone(stats.seeds_for_power(0.5, 1.0, n_max=63))
        # R power.t.test(power = .90, delta = 1): n = 22.02 → 23.
        self.assertEqual(stats.seeds_for_power(1.0, 1.0, power=0.9), 23)
        self.assertIsNone(stats.seeds_for_power(0.0, 1.0))


class StatsVerdict(unittest.TestCase):
    LOW, HIGH = [10, 10.2, 9.8], [12, 12.1, 11.9]

    def test_words(self):
        self.assertEqual(stats.verdict(self.LOW, self.HIGH, "less", 0.5)["word"], "holds")
        self.assertEqual(stats.verdict(self.HIGH, self.LOW, "greater", 0.5)["word"], "holds")
        self.assertEqual(stats.verdict(self.LOW, self.HIGH, "greater", 0.5)["word"], "opposite measured")
        self.assertEqual(stats.verdict(self.LOW, self.HIGH, "greater", 0.5, far_from_paper=True)["word"],
                         "not reproduced at this scale")
        self.assertEqual(stats.verdict(self.LOW, self.HIGH, "less", 0.5, far_from_paper=True)["word"], "holds")
        v = stats.verdict([10, 12, 8], [10.5, 12.5, 8.5], "less", 0.5)  # within noise
        self.assertEqual(v["word"], "inconclusive")
        self.assertIn("p=", v["why"])
        with self.assertRaises(ValueError):
            stats.verdict(self.LOW, self.HIGH, "lower", 0.5)

    def test_adjusted_p_decides(self):
        v = stats.verdict(HAND_A, HAND_B, "less", 1.0)  # raw p 0.035
        self.assertEqual(v["word"], "holds")
        v = stats.verdict(HAND_A, HAND_B, "less", 1.0, p_adjusted=0.07)
        self.assertEqual(v["word"], "inconclusive")
        self.assertEqual((v["p"], v["p_adjusted"]), (0.07, 0.07))
        self.assertAlmostEqual(v["p_raw"], 0.0349387824, delta=1e-10)
        self.assertIn("(Holm 0.07)", v["text"])

    def test_one_seed_is_never_a_verdict(self):
        for a, b in (([1.0], [5.0, 6.0]), ([5.0, 6.0], [1.0]), ([2.0, 2.0], [9.0, 9.0])):
            v = stats.verdict(a, b, "greater", 1.0, p_adjusted=1e-6)
            self.assertEqual(v["word"], "inconclusive", (a, b))
            self.assertIsNone(v["p"])
            self.assertIsInstance(v["why"], str)
            self.assertEqual(stats.verdict(a, b, "greater", 1.0, far_from_paper=True)["word"],
                             "not reproduced at this scale")

    def test_power_fields_and_text(self):
        a, b = [-1.0, 0.0, 1.0], [2.0, 3.0, 4.0]  # sd 1 on both sides, n = 3/3
        v = stats.verdict(a, b, "less", 1.0)
        self.assertAlmostEqual(v["power"], stats.power_welch(1.0, 1, 1, 3, 3), delta=1e-12)
        self.assertLess(v["power"], 0.3)
        self.assertEqual(v["n_for_power"], 17)
        self.assertEqual((v["n_a"], v["n_b"], v["diff"]), (3, 3, -3.0))
        for part in ("diff -3", "95% CI", "p=", "n=3/3", "power 0.", "for 1", "17 seeds"):
            self.assertIn(part, v["text"])


# --- the claims' tests: Welch / binomial, Holm across the report, the words (report.judge) --------
def _t(a, b, direction="less", far=False, label="x", **kw):
    return dict(dict(label=label, a=a, b=b, direction=direction, min_effect=1.0, far_from_paper=far,
                     what="crafted"), **kw)


NULL = _t([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], label="null")  # p = 1


class ClaimWords(unittest.TestCase):
    LOW, HIGH = [10, 10.2, 9.8], [12, 12.1, 11.9]
    FAR = "not reproduced at this scale"

    def one(self, t):
        return report.judge([("c", [t])])["c"][0]

    def test_crafted_seeds(self):
        self.assertEqual(self.one(_t(self.LOW, self.HIGH, "less"))["word"], "holds")
        r = self.one(_t(self.LOW, self.HIGH, "greater"))  # the paper said a > b: measured a < b
        self.assertEqual((r["word"], r["base"]), ("opposite measured", "opposite measured"))
        self.assertEqual(self.one(_t([10, 12, 8], [10.5, 12.5, 8.5]))["word"], "inconclusive")
        r = self.one(_t(self.LOW, self.HIGH, "greater", far="tiny models"))
        self.assertEqual((r["word"], r["base"]), (self.FAR, "opposite measured"))
        self.assertEqual(report.claim_verdict([r]), self.FAR + " (opposite measured)")
        r = self.one(_t([10, 12, 8], [10.5, 12.5, 8.5], far=True))
        self.assertEqual((r["word"], r["base"]), (self.FAR, "inconclusive"))
        # Measured in the paper's direction beyond alpha: holds, however far from the paper.
        self.assertEqual(self.one(_t(self.LOW, self.HIGH, "less", far=True))["word"], "holds")
        with self.assertRaises(ValueError):
            self.one(_t(self.LOW, self.HIGH, "lower"))

    def test_holm_changes_the_verdict(self):
        # HAND_A vs HAND_B: raw two-sided p 0.0349 (StatsWelch): holds alone; with two more tests
        # of p 1 in the same report Holm makes it 3 × 0.0349 = 0.105: inconclusive.
        alone = self.one(_t(HAND_A, HAND_B))
        self.assertEqual(alone["word"], "holds")
        self.assertAlmostEqual(alone["p_holm"], 0.0349387824, delta=1e-9)
        res = report.judge([("c", [_t(HAND_A, HAND_B)]), ("d", [NULL, NULL])])
        r = res["c"][0]
        self.assertAlmostEqual(r["p"], 0.0349387824, delta=1e-9)
        self.assertAlmostEqual(r["p_holm"], 3 * 0.0349387824, delta=1e-9)
        self.assertEqual(r["m"], 3)
        self.assertEqual(r["word"], "inconclusive")
        # Across claims, through the summary's claims table: the same test under par_ser holds
        # alone and is inconclusive beside two null tests of other claims.
        row = lambda claims: [l for l in report.claims_tables(claims).splitlines()
                              if l.startswith("| " + report.PAPER["par_ser"])][0]
        self.assertIn("| holds |", row({"par_ser_tests": [_t(HAND_A, HAND_B)]}))
        self.assertIn("| inconclusive |", row({"par_ser_tests": [_t(HAND_A, HAND_B)], "no_attn_tests": [NULL],
                                               "sandwich_tests": [NULL]}))

    def test_one_seed_is_never_a_verdict(self):
        for far in (False, True):
            for a, b, d in (([200.0], [100.0, 100.1, 99.9], "less"), ([200.0, 201.0], [100.0], "less"),
                            ([1.0], [9.0], "greater")):
                r = self.one(_t(a, b, d, far=far))
                self.assertEqual(r["word"], "inconclusive (one seed)", (a, b, far))
                self.assertIsNone(r["p"])
        # Quick mode: one seed per model everywhere, far beyond noise: never "opposite".
        table = report.claims_tables({
            "pha_tr": [("c", [150.0], [100.0])], "par_ser": [("c", [150.0], [100.0])],
            "no_attn": {"pha": [100.0], "pha_noattn": [90.0], "pha_nogss": [120.0], "pha_noffn": [130.0]},
            "sandwich": [(4, [False], 3)],
            "recall": ({("needle", "short"): dict(beyond=[0.0], at_t=[0.2]),
                        ("needle", "long"): dict(beyond=[0.9], at_t=[1.0]),
                        ("needle", "stochastic"): dict(beyond=[0.0], at_t=[0.1])}, ["needle"])})
        claims = table.split("\n\n")[0]
        self.assertNotIn("opposite", claims)
        self.assertNotIn("does not hold", claims)
        self.assertNotIn("not reproduced", claims)
        self.assertEqual(claims.count("| inconclusive (one seed) |"), 6)  # all but iso ("not run")
        # A one-seed test stays out of Holm: the other keeps its raw p.
        res = report.judge([("c", [_t(HAND_A, HAND_B)]), ("d", [_t([1.0], [2.0, 3.0])])])
        self.assertEqual(res["c"][0]["m"], 1)
        self.assertEqual(res["c"][0]["word"], "holds")

    def test_non_inferiority_margin(self):
        tr = [100.0, 100.1, 99.9]
        tests = report.tests_pha_tr([("c", [102.0, 102.1, 101.9], tr)])  # +2 %: inside the 3 % margin
        self.assertEqual(tests[0]["b"], [103.0, 1.03 * 100.1, 1.03 * 99.9])
        self.assertEqual(tests[0]["alternative"], "one-sided")
        self.assertAlmostEqual(tests[0]["min_effect"], 3.0, delta=1e-12)  # PHA = transformer: 3 % from the margin
        self.assertIn("non-inferiority", tests[0]["what"])
        r = report.judge([("pha_tr", tests)])["pha_tr"][0]
        self.assertEqual(r["word"], "holds")
        self.assertAlmostEqual(r["p"], stats.welch([102.0, 102.1, 101.9], tests[0]["b"], alternative="less")["p"],
                               delta=1e-15)
        self.assertAlmostEqual(r["p"], stats.welch([102.0, 102.1, 101.9], tests[0]["b"])["p"] / 2, delta=1e-12)
        # +4 %: beyond the margin, measured so: the reverse one-sided test, corrected in its place.
        r = report.judge([("pha_tr", report.tests_pha_tr([("c", [104.0, 104.1, 103.9], tr)]))])["pha_tr"][0]
        self.assertEqual((r["word"], r["base"]), ("not reproduced at this scale", "opposite measured"))
        self.assertGreater(r["p"], 0.5)
        self.assertLess(r["p_holm_rev"], 0.05)
        # +2.9 % with wide seeds: inside the margin by the means, not shown: inconclusive.
        r = report.judge([("pha_tr", report.tests_pha_tr([("c", [103.9, 101.9, 102.9], [99.0, 101.0, 100.0])]))])
        self.assertEqual(r["pha_tr"][0]["base"], "inconclusive")
        # The stochastic window's perplexity: below 1.03 × the long window's, one-sided.
        t = report.tests_stoch(None, {"stochastic": [102.0, 102.1, 101.9], "long": tr})
        self.assertEqual((t[0]["b"], t[0]["direction"], t[0]["alternative"]),
                         ([103.0, 1.03 * 100.1, 1.03 * 99.9], "less", "one-sided"))
        self.assertEqual(report.judge([("s", t)])["s"][0]["word"], "holds")

    def test_claim_holds_only_when_every_test_holds(self):
        res = report.judge([("c", [_t(self.LOW, self.HIGH, label="one"),
                                   _t([10, 12, 8], [10.5, 12.5, 8.5], label="two")])])["c"]
        self.assertEqual(report.claim_verdict(res), "partly: one: holds; two: inconclusive")
        res = report.judge([("c", [_t(self.LOW, self.HIGH, label="one"), _t(self.LOW, self.HIGH, label="two")])])["c"]
        self.assertEqual(report.claim_verdict(res), "holds")
        self.assertEqual(report.claim_verdict([]), "not run")

    def test_sandwich_binomial(self):
        self.assertAlmostEqual(report.binom_tail(2, 3, 0.5), 0.5, delta=1e-15)
        self.assertAlmostEqual(report.binom_tail(0, 3, 0.5, upper=False), 0.125, delta=1e-15)
        p0 = report.sandwich_null_rate(4, 3)
        report._NULL_CACHE.clear()
        self.assertEqual(report.sandwich_null_rate(4, 3), p0)  # fixed seed: the same rate
        self.assertTrue(0.10 < p0 < 0.18, p0)  # 0.140 with seed 25
        # The null mixes are judged by sandwich_ok itself: a margin of 1 leaves no mix passing.
        margin = report.SANDWICH_MARGIN
        try:
            report.SANDWICH_MARGIN = 1.0
            self.assertEqual(report.sandwich_null_rate(4, 3, draws=500, seed=1), 0.0)
        finally:
            report.SANDWICH_MARGIN = margin
            report._NULL_CACHE.clear()
        t = report.tests_sandwich([(4, [True, True, True], 3)])
        r = report.judge([("sandwich", t)])["sandwich"][0]
        self.assertAlmostEqual(r["p"], p0 ** 3, delta=1e-15)
        self.assertEqual(r["word"], "holds")
        # Power: with p0 0.14 and 3 seeds only 3/3 is below 0.05, so at a true rate of 0.5 it is 1/8.
        self.assertAlmostEqual(r["power"], 0.125, delta=1e-12)
        r = report.judge([("sandwich", report.tests_sandwich([(4, [False] * 3, 3)]))])["sandwich"][0]
        self.assertEqual((r["word"], r["base"], r["p"]), ("not reproduced at this scale", "inconclusive", 1.0))
        r = report.judge([("sandwich", report.tests_sandwich([(4, [True], 3)]))])["sandwich"][0]
        self.assertEqual(r["word"], "inconclusive (one seed)")

    def test_scaling_slope_and_test(self):
        # An exact power law gives its exponent; the seeds' slopes are tested below 0.
        xs = [0.55e6, 1.18e6, 2.2e6]
        self.assertAlmostEqual(report.scaling_slope(xs, [300 * x ** -0.07 for x in xs]), -0.07, places=12)
        r = report.judge([("scaling", report.tests_scaling({"pha": [-0.10, -0.12, -0.09]}))])["scaling"][0]
        self.assertEqual(r["word"], "holds")
        r = report.judge([("scaling", report.tests_scaling({"pha": [0.01, -0.01, 0.002]}))])["scaling"][0]
        self.assertNotEqual(r["word"], "holds")
        self.assertEqual(report.tests_scaling({"pha": []}), [])

    def test_lr_sweep_extends_at_an_end(self):
        """The sweep tries the next factor of 2 while the best lies at an end of what was tried,
        stops inside, and counts a diverged run as infinitely bad."""
        from evals.phax_evals import experiments, runs as R
        curve = {1e-3: 90.0, 2e-3: 80.0, 4e-3: 70.0, 8e-3: 65.0, 1.6e-2: "nan", 3.2e-2: "nan"}
        tried = []

        class FakeRunner:
            runs = "runs"

            def train(self, stage, name, args, needs=()):
                lr = float(args[args.index("--lr") + 1])
                tried.append(lr)
                if curve[lr] == "nan":
                    raise R.JobError(f"{stage}: training {name} failed: step 9: loss is NaN; stopped")
                return str(lr)

        with tempfile.TemporaryDirectory() as t:
            st = dict(lr=2e-3, min_lr=2e-4, lr_seed=1, lr_grid=[1e-3, 2e-3, 4e-3], lr_extend=3, lm_steps=10,
                      warmup=1, eval_every=5, eval_tokens=64, T=8, B=2, vocab_max={})
            job = experiments.Job(FakeRunner(), st, t, None, {"c": "data/c"})
            job.run_summary = lambda d: dict(val_ppl=curve[float(d)], curve=[], tokens_per_s=1.0)
            job.lr_sweep("lr", "lm", "c", {"m": ("cfg.json", 100)})
            res = json.load(open(os.path.join(t, "lr", "results.json")))
        self.assertEqual(tried, [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2])  # 1.6e-2 diverged: 8e-3 is inside
        self.assertEqual(res["best"]["m"], 8e-3)
        self.assertFalse(res["models"]["m"]["at_edge"])
        self.assertTrue(res["models"]["m"]["points"][-1]["diverged"])

    def test_iso_directions_outside_holm(self):
        r3 = report.judge([("iso", report.tests_iso(((1.5, 0.8, 0.7), True)))])["iso"]
        self.assertEqual(len(r3), 3)
        self.assertEqual(report.claim_verdict(r3), "paper's direction, not tested")
        res = report.judge([("iso", report.tests_iso(((1.5, 0.8, None), True))), ("c", [_t(HAND_A, HAND_B)])])
        self.assertEqual([r["p"] for r in res["iso"]], [None, None])
        self.assertEqual(res["c"][0]["m"], 1)
        self.assertEqual(report.claim_verdict(res["iso"]), "paper's direction, not tested")
        res = report.judge([("iso", report.tests_iso(((0.9, 1.2, None), True)))])
        self.assertEqual(report.claim_verdict(res["iso"]),
                         "not reproduced at this scale (opposite direction, not tested)")
        row = report.test_row("iso", res["iso"][0])
        self.assertIn("not in Holm: one timing per model, no seeds", row[5])


class ClaimsContract(unittest.TestCase):
    """Another piece's tests (claims[KEY + "_tests"]) replace those built from recall/niah."""
    RECALL = ({("needle", "short"): dict(beyond=[0.5, 0.6, 0.55], at_t=[1.0, 0.9, 0.95]),
               ("needle", "long"): dict(beyond=[0.1, 0.12, 0.11], at_t=[1.0, 1.0, 0.98]),
               ("needle", "stochastic"): dict(beyond=[0.5, 0.52, 0.55], at_t=[1.0, 0.99, 1.0])}, ["needle"])

    def test_override(self):
        built = report.claim_tests({"recall": self.RECALL}, "short_extrap")
        self.assertEqual([t["label"] for t in built], ["needle: short vs long", "needle: short vs 2 × chance"])
        mine = [_t([0.9, 0.91, 0.92], [0.1, 0.11, 0.12], "greater", label="mqar: short vs long")]
        claims = {"recall": self.RECALL, "short_extrap_tests": mine, "stoch_both_tests": []}
        self.assertEqual(report.claim_tests(claims, "short_extrap"), mine)
        table = report.claims_tables(claims)
        self.assertIn("mqar: short vs long", table)
        self.assertNotIn("needle: short vs long", table)
        self.assertIn("| " + report.PAPER["stoch_both"] + " | not run |", table)
        # Each test's row: seeds per arm, p raw and after Holm, power and seeds for 80 %.
        row = [l for l in table.splitlines() if l.startswith("| short windows → recall | mqar")][0].split(" | ")
        self.assertEqual(row[2], "3/3")
        self.assertEqual(row[-1].rstrip(" |"), "holds")



class Provenance(unittest.TestCase):
    """evals/phax_evals/provenance.py: what a result was made with (commit, build, libraries,
    CPU, numerics environment, data checksums), never a path outside the repository; the
    check that keeps results of different commits or builds out of one claim."""

    @staticmethod
    def put(path, data):
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data) if isinstance(data, (str, bytes)) else json.dump(data, f)

    @staticmethod
    def outside_paths(obj, found, where=""):
        """Strings of obj that name a path outside the repository (absolute or ../)."""
        if isinstance(obj, dict):
            for k, v in obj.items():
                Provenance.outside_paths(k, found, where)
                Provenance.outside_paths(v, found, f"{where}.{k}")
        elif isinstance(obj, list):
            for v in obj:
                Provenance.outside_paths(v, found, where)
        elif isinstance(obj, str) and re.search(r"(^|[\s=:,;'\"(\[])(/|\.\./)", obj):
            found.append(f"{where}: {obj}")
        return found

    def test_no_path_outside_the_repository(self):
        from evals.phax_evals import provenance as P
        with tempfile.TemporaryDirectory(prefix="phax-prov-") as t:
            ptb = os.path.join(t, "ptb")
            os.makedirs(ptb)
            for fn in ("ptb.train.txt", "ptb.valid.txt"):
                self.put(os.path.join(ptb, fn), "a b c\n")
            # A build folder outside the repository, its compile line full of absolute paths.
            b = os.path.join(t, "build-x")
            os.makedirs(os.path.join(b, "meson-info"))
            self.put(os.path.join(b, "meson-info", "intro-buildoptions.json"),
                     [{"name": "buildtype", "value": "release"}, {"name": "b_sanitize", "value": "none"},
                      {"name": "prefix", "value": "/usr/local"}])
            self.put(os.path.join(b, "meson-info", "intro-targets.json"),
                     [{"name": "phax_cpu", "target_sources": [{"language": "c", "compiler": ["cc"], "parameters": [
                         "-I" + t, "-I/usr/include/x86_64-linux-gnu/openblas-openmp", "-O3", "-march=x86-64-v3",
                         "-ffp-contract=off", "-fprofile-use=" + t, "-DX=" + t]}]}])
            recs = {"current": P.current(BUILD), "outside build": P.current(b),
                    "corpora": P.corpora_record({"ptb": os.path.relpath(ptb), "wikitext-2": "data/wikitext-2"}),
                    "checksums": P.data_checksums([os.path.join(ptb, "ptb.train.txt"), "data/ptb/SHA256SUMS"], "ptb")}
            self.assertEqual(self.outside_paths(recs, []), [])
            text = json.dumps(recs)
            for root in (os.path.realpath("."), os.path.realpath(t), t):
                self.assertNotIn(root, text)
        cur = recs["current"]
        self.assertRegex(cur["commit"], r"^[0-9a-f]{40}$")
        self.assertIsInstance(cur["dirty"], bool)
        self.assertEqual(sorted(cur["env"]), sorted(P.NUMERIC_ENV))
        self.assertEqual(recs["outside build"]["build"]["dir"], P.OUTSIDE)
        self.assertEqual(recs["outside build"]["build"]["buildtype"], "release")
        self.assertEqual(recs["outside build"]["build"]["fast_c_args"], ["-O3", "-march=x86-64-v3", "-ffp-contract=off"])
        self.assertEqual(recs["corpora"]["ptb"]["folder"], P.OUTSIDE)  # by name and checksums only
        self.assertEqual(sorted(recs["corpora"]["ptb"]["files"]), ["ptb.train.txt", "ptb.valid.txt"])
        self.assertEqual(recs["corpora"]["wikitext-2"]["folder"], "data/wikitext-2")
        self.assertEqual(sorted(recs["checksums"]), ["data/ptb/SHA256SUMS", "ptb/ptb.train.txt"])
        if os.path.exists(os.path.join(BUILD, "phax")):
            self.assertIn("-march", " ".join(cur["build"]["fast_c_args"]))
            self.assertTrue(cur["build"]["buildtype"])

    def test_shipped_corpora_match_their_sha256sums(self):
        # The checksums recorded are those of the text phax reads (.xz decompressed): the
        # values of the folder's SHA256SUMS, so a plain copy elsewhere records the same.
        from evals.phax_evals import provenance as P
        for name in ("wikitext-2", "ptb"):
            with open(os.path.join("data", name, "SHA256SUMS")) as f:
                sums = {l.split()[1]: l.split()[0] for l in f if l.strip()}
            files = P.corpora_record({name: os.path.join("data", name)})[name]["files"]
            self.assertEqual({k[:-3] if k.endswith(".xz") else k: v for k, v in files.items()}, sums)

    def test_checksums_change_with_a_byte(self):
        import lzma
        from evals.phax_evals import provenance as P
        with tempfile.TemporaryDirectory() as t:
            plain, xz = os.path.join(t, "train.txt"), os.path.join(t, "valid.txt.xz")
            self.put(plain, b"the cat sat on the mat\n" * 100)
            with lzma.open(xz, "wb") as f:
                f.write(b"a dog ran in the park\n" * 100)
            a = P.data_checksums([plain, xz])
            self.assertEqual(a, P.data_checksums([plain, xz]))  # stable (and cached)
            st = os.stat(plain)
            with open(plain, "r+b") as f:  # one byte, same size
                f.seek(700)
                f.write(b"X")
            os.utime(plain, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # as a later write would
            b = P.data_checksums([plain, xz])
            self.assertNotEqual(a["external/train.txt"], b["external/train.txt"])
            self.assertEqual(a["external/valid.txt.xz"], b["external/valid.txt.xz"])
            with lzma.open(xz, "wb") as f:  # one byte of the text inside the .xz
                f.write(b"a dog ran in the park\n" * 99 + b"a dog ran in the parK\n")
            c = P.data_checksums([plain, xz])
            self.assertNotEqual(b["external/valid.txt.xz"], c["external/valid.txt.xz"])
            with open(xz, "rb") as f:
                data = bytearray(f.read())  # a damaged .xz still gets a checksum of its own
            data[len(data) // 2] ^= 0xFF
            self.put(xz, bytes(data))
            os.utime(xz, ns=(st.st_atime_ns, st.st_mtime_ns + 3 * 10**9))
            d = P.data_checksums([xz])["external/valid.txt.xz"]
            self.assertNotIn(d, (b["external/valid.txt.xz"], c["external/valid.txt.xz"]))

    def piece(self, name, commit="a" * 40, dirty=False, **build):
        b = dict(dir="build", buildtype="debugoptimized", optimization="2", b_sanitize="none", cuda="auto",
                 openblas_pthreads=False, fast_c_args=["-std=c11", "-O3", "-march=native"],
                 compiler="cc (Debian 12.2.0-14+deb12u1) 12.2.0")
        b.update(build)
        return dict(piece=name, commit=commit[:7], seconds=1,
                    provenance=dict(commit=commit, dirty=dirty, build=b, env={}, cpu={}, openblas=None))

    def test_check_mixed(self):
        from evals.phax_evals import provenance as P
        same = [self.piece("lm"), self.piece("ptb", dir="build-dev")]  # the folder's name is not the build
        self.assertIsNone(P.check_mixed(same))
        self.assertEqual(P.gate(same), (True, None))
        self.assertIsNone(P.check_mixed([self.piece("lm"), {"commit": "aaaaaaa", "seconds": 1}]))  # old piece.json
        m = P.check_mixed([self.piece("lm"), self.piece("ptb", commit="b" * 40), self.piece("iso")])
        self.assertIsNotNone(m)
        self.assertIn("mixed commits", m)
        self.assertIn("aaaaaaaaaaaa (lm, iso)", m)
        self.assertIn("bbbbbbbbbbbb (ptb)", m)
        self.assertNotIn("mixed builds", m)
        self.assertIn("mixed commits", P.check_mixed([self.piece("lm"), {"commit": "ccccccc", "seconds": 1}]))
        self.assertIn("mixed commits", P.check_mixed([self.piece("lm"), self.piece("ptb", dirty=True)]))
        self.assertIn("mixed commits", P.check_mixed([self.piece("lm"), self.piece("ptb", commit="a" * 7 + "b" * 33)]))
        # The CPU's level (-march), OpenBLAS's kernel and the thread counts change only the bits: they
        # do not block a verdict, the note names them (bits_differ); another flag still blocks.
        lm, v3 = self.piece("lm"), self.piece("ptb", fast_c_args=["-std=c11", "-O3", "-march=x86-64-v3"])
        self.assertIsNone(P.check_mixed({"lm": lm, "ptb": v3}))
        m = P.bits_differ({"lm": lm, "ptb": v3})
        self.assertIn("runs differ in bits-only settings: fast_c_args", m)
        self.assertIn("-march=x86-64-v3 (ptb)", m)
        self.assertEqual(len(m.splitlines()), 1)
        ok, note = P.gate({"lm": lm, "ptb": v3})
        self.assertTrue(ok)
        self.assertIn("-march=x86-64-v3 (ptb)", note)
        m = P.check_mixed({"lm": lm, "ptb": self.piece("ptb", fast_c_args=["-std=c11", "-O2", "-march=x86-64-v3"])})
        self.assertIn("mixed builds: fast_c_args -std=c11 -O3 (lm) vs -std=c11 -O2 (ptb)", m or "")
        self.assertIn("buildtype", P.check_mixed([self.piece("lm"), self.piece("x", buildtype="debug")]))
        # A piece whose reused runs were made by another build (run_builds, piece.json "runs").
        old_run = self.piece("x", fast_c_args=["-std=c11", "-O2", "-march=native"])["provenance"]
        new = self.piece("mqar_short", fast_c_args=["-std=c11", "-O3", "-march=x86-64-v4"])
        self.assertIsNone(P.check_mixed([new]))
        new["runs"] = P.run_builds([("r1", old_run), ("r2", new["provenance"]), ("r3", None)])
        self.assertEqual([rb["runs"] for rb in new["runs"]], [["r1"], ["r2"]])
        m = P.check_mixed([new])
        self.assertIn("mixed builds: fast_c_args", m or "")
        self.assertIn("mqar_short: r1", m)
        new["runs"] = P.run_builds([("r2", new["provenance"])])
        self.assertIsNone(P.check_mixed([new]))
        self.assertIsNone(P.bits_differ([new]))
        # A run of another level among a piece's runs: judged, and named.
        v3_run = self.piece("x", fast_c_args=["-std=c11", "-O3", "-march=x86-64-v3"], portable="x86-64-v3")["provenance"]
        v3_run["cpu"] = {"isa": "x86-64-v3"}
        new["runs"] = P.run_builds([("r2", new["provenance"]), ("r4", v3_run)])
        self.assertIsNone(P.check_mixed([new]))
        self.assertIn("mqar_short: r4", P.bits_differ([new]) or "")
        # What else changes only the bits: OpenBLAS's kernel, the thread count, the CPU's level.
        for k, a, b in (("openblas", {"core": "SkylakeX"}, {"core": "Haswell"}),
                        ("env", {"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "2"}),
                        ("cpu", {"isa": "x86-64-v4"}, {"isa": "x86-64-v3"})):
            pa, pb = self.piece("lm"), self.piece("ptb")
            pa["provenance"][k], pb["provenance"][k] = a, b
            self.assertIsNone(P.check_mixed([pa, pb]), k)
            self.assertIn("bits-only", P.bits_differ([pa, pb]) or "", k)
            pb["provenance"][k] = a
            self.assertIsNone(P.bits_differ([pa, pb]), k)
        mixed = [self.piece("lm"), self.piece("ptb", commit="b" * 40)]
        old = os.environ.pop("PHAX_EVAL_ALLOW_MIXED", None)
        try:
            ok, msg = P.gate(mixed)
            self.assertFalse(ok)
            self.assertTrue(msg.startswith("mixed commits: "), msg)
            os.environ["PHAX_EVAL_ALLOW_MIXED"] = "1"
            ok, msg = P.gate(mixed)
            self.assertTrue(ok)
            self.assertIn("PHAX_EVAL_ALLOW_MIXED=1", msg)
            self.assertIn("aaaaaaaaaaaa (lm)", msg)
            self.assertIn("bbbbbbbbbbbb (ptb)", msg)
        finally:
            os.environ.pop("PHAX_EVAL_ALLOW_MIXED", None)
            if old is not None:
                os.environ["PHAX_EVAL_ALLOW_MIXED"] = old

    def test_run_identity_and_data(self):
        # A finished run is reused whatever build folder made it and wherever its corpus lay
        # (both are provenance), refused when its settings or its data's checksums differ.
        from evals.phax_evals import provenance as P
        from evals.phax_evals.runs import JobError, Runner
        from evals.phax_evals import main as M
        with tempfile.TemporaryDirectory() as t:
            out = os.path.relpath(os.path.join(t, "out"))
            r = Runner("build", out, {"ptb": "data/ptb"})
            d = os.path.join(out, "runs", "x")
            os.makedirs(d)
            self.put(os.path.join(d, "DONE"), "")
            self.put(os.path.join(d, "cmd.txt"), f"build-dev/phax train --data ../shared/data/ptb --seq 8 --out {d}\n")
            self.assertEqual(r.train("t", "x", ["--data", "data/ptb", "--seq", "8"]), d)
            with self.assertRaises(JobError):
                r.train("t", "x", ["--data", "data/ptb", "--seq", "16"])
            rec = P.corpora_record({"ptb": "data/ptb"})
            self.put(os.path.join(d, "provenance.json"), dict(data=rec))
            self.assertEqual(r.train("t", "x", ["--data", "data/ptb", "--seq", "8"]), d)
            rec["ptb"]["files"]["ptb.train.txt.xz"] = "0" * 64
            self.put(os.path.join(d, "provenance.json"), dict(data=rec))
            with self.assertRaises(JobError):
                r.train("t", "x", ["--data", "data/ptb", "--seq", "8"])
            # A build folder outside the repository is recorded as "$BUILD_DIR".
            from evals.phax_evals import runs
            rb = Runner(os.path.join(t, "bx"), out)
            try:
                self.assertEqual(runs.quote_cmd([rb.phax, "train", "--seq", "8"]), '"$BUILD_DIR"/phax train --seq 8')
                self.assertEqual(runs.quote_cmd(["evals/x/phax", "a b"]), "evals/x/phax 'a b'")
            finally:
                runs.SHOWN.pop(rb.build_dir, None)
                runs.SHOWN.pop(r.build_dir, None)  # "build" when it is a link out of the repository
            # A corpus folder outside the repository reaches phax through a link in OUT.
            ext = os.path.join(t, "mine", "ptb")
            os.makedirs(ext)
            c = M.link_outside({"ptb": os.path.relpath(ext), "wikitext-2": "data/wikitext-2"}, out)
            self.assertEqual(c["wikitext-2"], "data/wikitext-2")
            self.assertEqual(c["ptb"], os.path.join(out, "data", "ptb"))
            self.assertEqual(os.path.realpath(c["ptb"]), os.path.realpath(ext))


# --- report_mqar.py: the mqar pieces' claims from crafted results ------------------------------
class MqarReport(unittest.TestCase):
    """The window claims use only far queries (beyond what the SWA stack reaches with the short
    window) and, beyond T, queries at least T back; they are judged only when the full-attention
    reference learned the task at T; non-inferiority puts the margin into b, one-sided."""
    T = 64

    def run_of(self, arm, seed, near, far_T, beyond):
        # Cells: at T a near bin (distance 2..3) and a far bin (16..31); at 2T one less than T
        # back and one beyond T.
        c = lambda L, lo, hi, acc: dict(length=L, bin_lo=lo, bin_hi=hi, queries=100, correct=round(100 * acc),
                                        accuracy=acc, mean_logp=-1.0, mean_distance=(lo + hi) / 2, floor=0.3)
        # A prompt of 2T also has queries less than T back: they are not "beyond T".
        return dict(arm=arm, seed=seed, lr=1e-3, window=4, floor=(1 / 4 + 1 / 3) / 2, cells=[c(self.T, 2, 4, near), c(self.T, 16, 32, far_T),
                                                                  c(2 * self.T, 16, 32, near),
                                                                  c(2 * self.T, 64, 128, beyond)], curve=[])

    def results(self, ref_acc):
        runs = []
        for s in (1, 2, 3):
            runs.append(self.run_of("full", s, ref_acc, ref_acc, ref_acc))
            runs.append(self.run_of("short", s, 0.9, 0.5 + 0.01 * s, 0.6 + 0.01 * s))
            runs.append(self.run_of("long", s, 0.9, 0.8 + 0.01 * s, 0.1 + 0.01 * s))
            runs.append(self.run_of("stochastic", s, 0.9, 0.75 + 0.01 * s, 0.58 + 0.01 * s))
        return dict(T=self.T, w_short=2, w_long=8, task=dict(pairs=4, queries=4, vary=1, eval_queries=2),
                    model=dict(d_model=32, n_layers=4), seeds=[1, 2, 3], samples=10, steps=6, lrs=[1e-3],
                    arms=["full", "short", "long", "stochastic"], sweep=[],
                    best=dict(full=1e-3, short=1e-3, long=1e-3, stochastic=1e-3), runs=runs)

    def claims_for(self, ref_acc, drop=()):
        """The claims of a crafted mqar_ref piece holding every arm (less the arms in drop)."""
        from evals.phax_evals import report_mqar
        res = self.results(ref_acc)
        res["runs"] = [r for r in res["runs"] if r["arm"] not in drop]
        claims = {}
        with tempfile.TemporaryDirectory() as t:
            os.makedirs(os.path.join(t, "mqar_ref"))
            with open(os.path.join(t, "mqar_ref", "results.json"), "w") as f:
                json.dump(res, f)
            P = report.Plots(t, "test", True)
            report_mqar.section(t, {}, P, claims)
        return claims

    def test_far_and_beyond_filters(self):
        c = self.claims_for(0.95)
        t = c["short_extrap_tests"][0]
        # Beyond T: only the 2T cell (the near and far-at-T cells are not beyond T).
        self.assertEqual([round(x, 2) for x in t["a"]], [0.61, 0.62, 0.63])
        self.assertEqual([round(x, 2) for x in t["b"]], [0.11, 0.12, 0.13])
        # At T, far: only the 16..31 bin (2 SWA layers x window 2 = 4 tokens reach; the near bin is out).
        at_T = c["stoch_both_tests"][1]
        self.assertEqual([round(x, 2) for x in at_T["a"]], [0.76, 0.77, 0.78])
        self.assertEqual([round(x, 2) for x in at_T["b"]], [round(0.8 + 0.01 * s - 0.10, 2) for s in (1, 2, 3)])
        self.assertEqual(at_T["alternative"], "one-sided")
        beyond = c["stoch_both_tests"][0]
        self.assertEqual([round(x, 2) for x in beyond["b"]], [0.51, 0.52, 0.53])  # short − 0.10
        self.assertNotIn("mqar_note", c)

    def test_not_learned_gives_no_tests(self):
        c = self.claims_for(0.5)
        self.assertNotIn("short_extrap_tests", c)
        self.assertNotIn("stoch_both_tests", c)
        self.assertIn("not learned", c["mqar_note"])
        # The claims table then falls back to the recall piece's tests and says why beside them.
        table = report.claims_tables(c)
        self.assertIn("MQAR at the paper's window ratios: task not learned", table)

    def test_an_arm_not_run_gives_no_tests(self):
        # long has not run: no "inconclusive (one seed)" from an empty arm; the note says which.
        c = self.claims_for(0.95, drop=("long",))
        self.assertNotIn("short_extrap_tests", c)
        self.assertIn("long", c["mqar_note"])

    def test_short_is_tested_against_its_floor(self):
        t = self.claims_for(0.95)["short_extrap_tests"]
        self.assertEqual(len(t), 2)
        self.assertEqual([round(x, 2) for x in t[1]["b"]], [0.3, 0.3, 0.3])  # the floor of its queries

    def test_verdicts_from_the_tests(self):
        c = self.claims_for(0.95)
        table = report.claims_tables(c)
        row = [l for l in table.splitlines() if l.startswith("| short SWA windows")][0]
        self.assertIn("holds", row)  # short 0.62 vs long 0.12 over 3 seeds, sd 0.01: p << 0.05 after Holm


class ClaimGate(unittest.TestCase):
    """A claim whose pieces ran at different commits gets no verdict, unless
    PHAX_EVAL_ALLOW_MIXED=1, and then the table names the commits."""

    def test_mixed_commits(self):
        with tempfile.TemporaryDirectory() as t:
            for piece, commit in (("lm", "aaaaaaa"), ("ptb", "bbbbbbb"), ("recall", "aaaaaaa")):
                os.makedirs(os.path.join(t, piece))
                with open(os.path.join(t, piece, "piece.json"), "w") as f:
                    json.dump(dict(commit=commit, seconds=1, finished="x", load_start=[], load_end=[]), f)
            claims = {"pha_tr": [("wikitext-2", [80.0, 80.5, 79.5], [99.0, 98.0, 100.0])]}
            os.environ.pop("PHAX_EVAL_ALLOW_MIXED", None)
            table = report.claims_tables(claims, gates=report.claim_gates(t, claims))
            row = [l for l in table.splitlines() if l.startswith("| PHA reaches")][0]
            self.assertIn("no verdict", row)
            self.assertIn("aaaaaaa (lm)", row)
            self.assertIn("bbbbbbb (ptb)", row)
            # Its tests are not judged: none in the tests table, none in Holm's count.
            self.assertNotIn("| PHA ≈ transformer |", table)
            self.assertNotIn("The tests behind the verdicts", table)  # the only tests were blocked
            self.assertNotIn("- PHA ≈ transformer:", table)
            os.environ["PHAX_EVAL_ALLOW_MIXED"] = "1"
            try:
                table = report.claims_tables(claims, gates=report.claim_gates(t, claims))
            finally:
                os.environ.pop("PHAX_EVAL_ALLOW_MIXED", None)
            row = [l for l in table.splitlines() if l.startswith("| PHA reaches")][0]
            self.assertNotIn("no verdict", row)
            self.assertIn("allowed by PHAX_EVAL_ALLOW_MIXED=1", row)
            # One piece alone (recall) is never mixed.
            row = [l for l in table.splitlines() if l.startswith("| short SWA")][0]
            self.assertNotIn("mixed", row)


if __name__ == "__main__":
    unittest.main(verbosity=2)
