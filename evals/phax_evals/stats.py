"""Statistics for the verdicts, standard library only (the evals run with bare python3).

  * Student t and normal distributions (cdf, ppf) for real df > 0: the t cdf through the
    regularized incomplete beta function (above df 1e6 its expansion in 1/df), the quantiles
    by bisection; ~1e-12 absolute (quantiles within 1e-10 of the tables).
  * welch(a, b): Welch's unequal-variance t test with its confidence interval.
  * bootstrap_diff(a, b): percentile bootstrap interval of the difference of means.
  * holm(pvals): Holm-Bonferroni adjusted p-values.
  * power_welch, seeds_for_power: the power of the two-sided Welch test (noncentral t, by
    numerical integration) and the seeds per arm that reach a wanted power.
  * verdict(a, b, ...): holds / opposite measured / inconclusive / not reproduced at this
    scale, with the interval, p, power and a one-line text.

Samples are lists of numbers; None and non-finite entries (a diverged seed) are dropped,
as report.mean_sd does.
"""
import math
import random
import statistics

_EPS = 1e-15
_TINY = 1e-300


# --- distributions ------------------------------------------------------------------------------
def _betacf(a, b, x):
    """The continued fraction of I_x(a, b) (Numerical Recipes 6.4), by the modified Lentz method:
    I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * 1/(1+ d1/(1+ d2/(1+ ...))) with
    d_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)),  d_{2m} = m (b-m) x / ((a+2m-1)(a+2m))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    f = d
    for m in range(1, 10000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            f *= c * d
        if abs(c * d - 1.0) < _EPS:
            return f
    raise ArithmeticError(f"incomplete beta: no convergence (a={a}, b={b}, x={x})")


def _lgamma_ratio(a, b):
    """ln Γ(a+b) - ln Γ(a) without the cancellation of two huge lgammas (a > 100: Stirling,
    ln Γ(x) = (x-½) ln x - x + ½ ln 2π + 1/(12x) - 1/(360x³) + 1/(1260x⁵) - ...)."""
    if a < 100.0:
        return math.lgamma(a + b) - math.lgamma(a)
    s = lambda x: 1.0 / (12.0 * x) - 1.0 / (360.0 * x ** 3) + 1.0 / (1260.0 * x ** 5)
    return (a - 0.5) * math.log1p(b / a) - b + b * math.log(a + b) + s(a + b) - s(a)


def betainc(a, b, x, y=None):
    """The regularized incomplete beta I_x(a, b), y = 1 - x (pass it when 1 - x would cancel);
    I_x(a, b) = x^a y^b / (a B(a, b)) · cf(a, b, x), converging fast for x < (a+1)/(a+b+2),
    otherwise I_x(a, b) = 1 - I_y(b, a)."""
    y = 1.0 - x if y is None else y
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    lx = math.log(x) if x < 0.5 else math.log1p(-y)
    ly = math.log(y) if y < 0.5 else math.log1p(-x)
    lfront = (_lgamma_ratio(max(a, b), min(a, b)) - math.lgamma(min(a, b))) + a * lx + b * ly
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lfront) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lfront) * _betacf(b, a, y) / b


def normal_cdf(x):
    """Φ(x) = erfc(-x/√2)/2."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def student_t_cdf(t, df):
    """P(T ≤ t) for Student's t with df > 0 (real): the tail P(T > |t|) = I_x(df/2, 1/2)/2 with
    x = df/(df + t²); df = inf gives the normal."""
    if math.isinf(df):
        return normal_cdf(t)
    if df <= 0:
        raise ValueError("df must be > 0")
    if df > 1e6 and abs(t) < 10.0:
        # There the fraction loses digits (x ≈ 1); F = Φ(t) - φ(t) (t³ + t)/(4 df) + O(df⁻²).
        return normal_cdf(t) - math.exp(-t * t / 2.0) / math.sqrt(2.0 * math.pi) * (t ** 3 + t) / (4.0 * df)
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))
    return tail if t < 0 else 1.0 - tail


def _lower_quantile(cdf, p):
    """The x < 0 with cdf(x) = p, for p ≤ 1/2 and a cdf symmetric about 0: bracket, then
    bisect to the last representable digit (the left tail is computed without cancellation)."""
    if p == 0.5:
        return 0.0
    lo = -1.0
    while cdf(lo) > p:
        lo *= 2.0
        if lo < -1e300:
            return -math.inf
    hi = lo / 2.0 if lo < -1.0 else 0.0
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if cdf(mid) > p:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def _ppf(cdf, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError("p must be in [0, 1]")
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    return _lower_quantile(cdf, p) if p <= 0.5 else -_lower_quantile(cdf, 1.0 - p)


def normal_ppf(p):
    """Φ⁻¹(p), by bisection on normal_cdf."""
    return _ppf(normal_cdf, p)


def student_t_ppf(p, df):
    """The t with P(T ≤ t) = p for Student's t with df > 0 (real), by bisection on student_t_cdf."""
    if math.isinf(df):
        return normal_ppf(p)
    return _ppf(lambda t: student_t_cdf(t, df), p)


# --- tests and intervals ------------------------------------------------------------------------
def _clean(xs):
    return [float(x) for x in xs if x is not None and math.isfinite(x)]


def welch(a, b, alpha=0.05, alternative="two-sided"):
    """Welch's t test of mean(a) - mean(b):
        se = √(s_a²/n_a + s_b²/n_b),  t = (mean_a - mean_b)/se,
        df = se⁴ / ((s_a²/n_a)²/(n_a-1) + (s_b²/n_b)²/(n_b-1))   (Welch-Satterthwaite),
        p = 2 P(T_df > |t|) ('two-sided'), P(T_df > t) ('greater': H1 mean_a > mean_b),
            P(T_df < t) ('less'),
        ci = diff ± t_{1-alpha/2, df} se (two-sided at 1 - alpha, whatever the alternative).
    Fewer than 2 values on a side, or no spread on either side, leave p, ci (and what cannot be
    computed) None with the reason in 'why'."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative: {alternative!r}")
    a, b = _clean(a), _clean(b)
    na, nb = len(a), len(b)
    r = dict(mean_a=statistics.fmean(a) if a else None, mean_b=statistics.fmean(b) if b else None,
             diff=None, se=None, df=None, t=None, p=None, ci=None, n_a=na, n_b=nb,
             alternative=alternative, why=None)
    if a and b:
        r["diff"] = r["mean_a"] - r["mean_b"]
    if na < 2 or nb < 2:
        r["why"] = f"needs at least 2 values on each side (n={na}/{nb})"
        return r
    va, vb = statistics.variance(a) / na, statistics.variance(b) / nb
    r["se"] = math.sqrt(va + vb)
    if va + vb == 0.0:
        r["why"] = "no spread on either side"
        return r
    r["df"] = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    r["t"] = r["diff"] / r["se"]
    if alternative == "two-sided":
        r["p"] = min(1.0, 2.0 * student_t_cdf(-abs(r["t"]), r["df"]))
    elif alternative == "greater":
        r["p"] = student_t_cdf(-r["t"], r["df"])
    else:
        r["p"] = student_t_cdf(r["t"], r["df"])
    h = student_t_ppf(1.0 - alpha / 2.0, r["df"]) * r["se"]
    r["ci"] = (r["diff"] - h, r["diff"] + h)
    return r


def bootstrap_diff(a, b, reps=10000, seed=0, alpha=0.05):
    """Percentile bootstrap of mean(a) - mean(b): each side resampled with replacement on its own
    (random.Random(seed), so the same seed gives the same interval), the interval the alpha/2 and
    1 - alpha/2 order statistics of the reps differences. Needs 2 values on each side."""
    a, b = _clean(a), _clean(b)
    r = dict(diff=statistics.fmean(a) - statistics.fmean(b) if a and b else None, ci=None,
             reps=reps, seed=seed, why=None)
    if len(a) < 2 or len(b) < 2:
        r["why"] = f"needs at least 2 values on each side (n={len(a)}/{len(b)})"
        return r
    rng = random.Random(seed)
    ds = sorted(statistics.fmean(rng.choices(a, k=len(a))) - statistics.fmean(rng.choices(b, k=len(b)))
                for _ in range(reps))
    lo = ds[max(0, math.floor(alpha / 2 * reps))]
    hi = ds[min(reps - 1, math.ceil((1 - alpha / 2) * reps) - 1)]
    r["ci"] = (lo, hi)
    return r


def holm(pvals):
    """Holm-Bonferroni step-down: with the m p-values (None excluded) sorted p_(1) ≤ ... ≤ p_(m),
    adj_(k) = min(1, max_{j ≤ k} (m - j + 1) p_(j)), returned in the input order (None kept)."""
    idx = sorted((i for i, p in enumerate(pvals) if p is not None), key=lambda i: pvals[i])
    m, out, run = len(idx), list(pvals), 0.0
    for k, i in enumerate(idx):
        run = max(run, min(1.0, (m - k) * pvals[i]))
        out[i] = run
    return out


# --- power --------------------------------------------------------------------------------------
def power_welch(delta, sd_a, sd_b, n_a, n_b, alpha=0.05):
    """Power of the two-sided Welch test at level alpha when the true difference is delta:
        se = √(sd_a²/n_a + sd_b²/n_b), ncp = delta/se, df Welch-Satterthwaite (from sd_a, sd_b),
        c = t_{1-alpha/2, df},
        power = P(|T'| > c), T' = (Z + ncp)/S noncentral t, S = √(χ²_df/df), Z ~ N(0, 1), i.e.
        power = E_S[Φ(ncp - c S) + Φ(-ncp - c S)],
    the expectation over S integrated numerically (trapezoid in y = ln S, where the density
    ∝ exp(df (y - e^{2y}/2)) is smooth; the grid spans the region within e^-50 of the mode and the
    weights are normalized on it). Exact noncentral t, not the shifted-central-t approximation.
    None when the power is undefined (n < 2 on a side, zero se)."""
    if n_a < 2 or n_b < 2:
        return None
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    if va + vb == 0.0:
        return None
    df = (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))
    ncp, c = delta / math.sqrt(va + vb), student_t_ppf(1.0 - alpha / 2.0, df)
    logw = lambda y: df * (y - (math.exp(2.0 * y) - 1.0) / 2.0)  # log density of y, 0 at the mode y = 0

    def edge(step):  # walk out from the mode until the density is below e^-50 of its peak
        y = step
        while logw(y) > -50.0:
            y *= 2.0
        return y

    lo, hi = edge(-1.0 / math.sqrt(df)), edge(1.0 / math.sqrt(df))
    n = 1000
    h = (hi - lo) / n
    num = den = 0.0
    for i in range(n + 1):
        y = lo + i * h
        w = math.exp(logw(y)) * (0.5 if i in (0, n) else 1.0)
        s = math.exp(y)
        num += w * (normal_cdf(ncp - c * s) + normal_cdf(-ncp - c * s))
        den += w
    return num / den


def seeds_for_power(delta, sd, alpha=0.05, power=0.8, n_max=64):
    """The smallest n per arm (equal n, equal sd) whose two-sided Welch test reaches the power
    for a true difference delta; None when n_max seeds do not (or the power is undefined)."""
    for n in range(2, n_max + 1):
        pw = power_welch(delta, sd, sd, n, n, alpha)
        if pw is None:
            return None
        if pw >= power:
            return n
    return None


# --- the verdict --------------------------------------------------------------------------------
WORDS = ("holds", "opposite measured", "inconclusive", "not reproduced at this scale")


def verdict(a, b, direction, min_effect, alpha=0.05, p_adjusted=None, far_from_paper=False):
    """The verdict on the paper's claim mean(a) > mean(b) (direction 'greater') or
    mean(a) < mean(b) ('less'), from the two-sided Welch test (p = p_adjusted when given,
    e.g. the Holm value across the claims):
      * "holds": p < alpha and the measured difference in the paper's direction;
      * "opposite measured": p < alpha and the difference the other way;
      * "inconclusive" otherwise, always with fewer than 2 seeds on a side (whatever p_adjusted);
      * "not reproduced at this scale" in place of any word but "holds" when far_from_paper.
    Also: power, the power at alpha (unadjusted) to detect min_effect with the measured sds and
    n; n_for_power, the seeds per arm for 80 % power at the mean of the two variances."""
    if direction not in ("greater", "less"):
        raise ValueError(f"direction: {direction!r}")
    w = welch(a, b, alpha)
    p = None if w["p"] is None else (w["p"] if p_adjusted is None else p_adjusted)
    why = w["why"]
    if p is not None and p < alpha and w["diff"] != 0:
        word = "holds" if (w["diff"] > 0) == (direction == "greater") else "opposite measured"
    else:
        word = "inconclusive"
        why = why or f"p={p:.2g} not below {alpha:g}"
    if far_from_paper and word != "holds":
        word = "not reproduced at this scale"
    sa = statistics.stdev(_clean(a)) if w["n_a"] > 1 else None
    sb = statistics.stdev(_clean(b)) if w["n_b"] > 1 else None
    pw = nfp = None
    if sa is not None and sb is not None:
        pw = power_welch(min_effect, sa, sb, w["n_a"], w["n_b"], alpha)
        nfp = seeds_for_power(min_effect, math.sqrt((sa ** 2 + sb ** 2) / 2.0), alpha)
    r = dict(word=word, why=why, p=p, p_raw=w["p"], p_adjusted=p_adjusted, diff=w["diff"],
             ci=w["ci"], se=w["se"], df=w["df"], t=w["t"], mean_a=w["mean_a"], mean_b=w["mean_b"],
             sd_a=sa, sd_b=sb, n_a=w["n_a"], n_b=w["n_b"], min_effect=min_effect, power=pw,
             n_for_power=nfp, direction=direction, alpha=alpha)
    r["text"] = _text(r)
    return r


def _text(r):
    """One line, e.g. "diff +0.12 [95% CI +0.05, +0.19], p=0.004 (Holm 0.012), n=3/3,
    power 0.83 for 0.10, 80 % power needs 4 seeds per arm"."""
    if r["diff"] is None:
        return f"no data (n={r['n_a']}/{r['n_b']})"
    s = f"diff {r['diff']:+.3g}"
    if r["ci"] is not None:
        s += f" [{100 * (1 - r['alpha']):g}% CI {r['ci'][0]:+.3g}, {r['ci'][1]:+.3g}]"
    s += f", p={r['p_raw']:.2g}" if r["p_raw"] is not None else f" ({r['why']})"
    if r["p_raw"] is not None and r["p_adjusted"] is not None:
        s += f" (Holm {r['p_adjusted']:.2g})"
    s += f", n={r['n_a']}/{r['n_b']}"
    if r["power"] is not None:
        s += f", power {r['power']:.2f} for {r['min_effect']:g}"
        s += (f", 80 % power needs {r['n_for_power']} seeds per arm" if r["n_for_power"]
              else ", 80 % power needs more than 64 seeds per arm")
    return s
