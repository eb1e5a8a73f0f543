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


if __name__ == "__main__":
    unittest.main(verbosity=2)
