#!/usr/bin/env python3
"""Tallies of phax check's no-false-FAIL sweeps from their --verbose logs (docs/oracle.md, "The
no-false-FAIL sweep"), also of a sweep stopped early or run in pieces:

  scripts/sweep_tally.py ops LOG        per stream of tests/test_check.c's sweeps: correct PASS/FAIL
                                       (worst ratio), bugs FAIL/PASS (weakest ratio), hidden
  scripts/sweep_tally.py model LOG...   tests/test_check_model.c's summary lines of several pieces
                                       (e.g. the halves of PHAX_CHECK_FIRST) as docs/oracle.md's table
"""
import collections
import re
import sys

DRAW = re.compile(r"^(\w+)\b(.*?) seed (\d+):")  # "mlstm chunkwise carried bf16 seed 2038106277: ..."
VERDICT = re.compile(r"^\s+verdict (correct|bug) (PASS|FAIL)\S* ratio (\S+)")


def ops(path):
    st, cur = collections.OrderedDict(), None
    for line in open(path, errors="replace"):
        m = DRAW.match(line)
        if m:
            cur = (m.group(1) + m.group(2)).strip()
            st.setdefault(cur, dict(cp=0, cf=0, worst=0.0, bf=0, bp=0, weak=float("inf"), hid=0))
            seed = m.group(3)
            continue
        if cur is None:
            continue
        s = st[cur]
        m = VERDICT.match(line)
        if m:
            r, correct, passed = float(m.group(3)), m.group(1) == "correct", m.group(2) == "PASS"
            if correct and passed:
                s["cp"] += 1
                s["worst"] = max(s["worst"], r)
            elif correct:
                s["cf"] += 1
                print("correct FAIL:", cur, "seed", seed, "ratio", r)
            elif not passed:
                s["bf"] += 1
                s["weak"] = min(s["weak"], r)
            else:
                s["bp"] += 1
                print("bug PASS:", cur, "seed", seed, "ratio", r)
        elif "hidden by this draw" in line:
            s["hid"] += 1
    total = collections.Counter()
    for k, s in st.items():
        print(f"{k:40s} correct {s['cp']:4d} PASS {s['cf']:3d} FAIL (worst {s['worst']:.3g})  "
              f"bug {s['bf']:4d} FAIL (weakest {s['weak']:.3g}) {s['bp']} PASS {s['hid']} hidden")
        total.update({x: s[x] for x in ("cp", "cf", "bf", "bp", "hid")})
    print("total", dict(total))


COLUMNS = ["fast f32", "fast tf32", "fast bf16", "bf16 weights bf16", "cpu_bf16 bf16", "bug f32"]
OK_LINE = re.compile(r"^sweep model (.+?)\s+(\d+) PASS \(worst ratio (\S+), (\S+) of the bound\)\s+(\d+) FAIL")
BUG_LINE = re.compile(r"^sweep model (.+? bug f32)\s+(\d+) FAIL \(weakest ratio (\S+)\)\s+(\d+) PASS\s+(\d+) hidden")


def model(paths):
    rows = collections.OrderedDict()  # "pha no_attn fast f32" -> the pieces' counts combined
    for path in paths:
        for line in open(path, errors="replace"):
            m = BUG_LINE.match(line)
            if m:
                r = rows.setdefault(m.group(1), dict(bug=True, f=0, weak=float("inf"), p=0, hid=0))
                r["f"] += int(m.group(2))
                r["weak"] = min(r["weak"], float(m.group(3)))
                r["p"] += int(m.group(4))
                r["hid"] += int(m.group(5))
                continue
            m = OK_LINE.match(line)
            if m:
                r = rows.setdefault(m.group(1), dict(bug=False, p=0, f=0, worst=0.0, use=0.0))
                r["p"] += int(m.group(2))
                r["f"] += int(m.group(5))
                if int(m.group(2)):  # "nan" where a piece judged none
                    r["worst"] = max(r["worst"], float(m.group(3)))
                    r["use"] = max(r["use"], float(m.group(4)))
    families = collections.OrderedDict()
    for k, r in rows.items():
        for c in COLUMNS:
            if k.endswith(" " + c):
                families.setdefault(k[: -len(c) - 1], {})[c] = r
    total = collections.Counter()
    for fam, cs in families.items():
        cells = []
        for c in COLUMNS:
            r = cs.get(c)
            if not r or (not r["bug"] and r["p"] + r["f"] == 0):
                cells.append("—")  # not judged (the cpu_bf16 tier without AVX-512)
            elif r["bug"]:
                cells.append(f"{r['f']} FAIL (weakest {r['weak']:.3g}), {r['hid']} hidden"
                             + (f", {r['p']} PASS" if r["p"] else ""))
                total.update(bugfail=r["f"], bugpass=r["p"], hidden=r["hid"])
            else:
                cells.append(f"{r['p']} of {r['p'] + r['f']} ({r['worst']:.3g}; {r['use']:.2f} of the bound)")
                total.update({"pass": r["p"], "fail": r["f"]})
        print(f"| {fam} | " + " | ".join(cells) + " |")
    print("total", dict(total))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("ops", "model"):
        sys.exit("usage: sweep_tally.py ops LOG | model LOG...")
    if sys.argv[1] == "ops":
        ops(sys.argv[2])
    else:
        model(sys.argv[2:])
