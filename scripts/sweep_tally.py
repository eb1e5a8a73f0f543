#!/usr/bin/env python3
"""Tallies of phax check's no-false-FAIL sweeps from their --verbose logs (docs/oracle.md, "The no-false-FAIL
sweep"), also of a sweep stopped early or run in pieces:
  scripts/sweep_tally.py ops LOG        per stream of tests/test_check.c's sweeps: correct PASS/FAIL (worst
                                       ratio), bugs FAIL/PASS (weakest ratio), hidden
  scripts/sweep_tally.py model LOG...   tests/test_check_model.c's summary lines of several pieces (e.g. the
                                       halves of PHAX_CHECK_FIRST) combined into docs/oracle.md's table"""
import collections
import re
import sys



def ops(path):
    st = collections.OrderedDict()
    cur = None
    for line in open(path, errors="replace"):
        m = re.match(r"^(mlstm|gdn|attention|small|ssm|dss|sweep)\b(.*?) seed (\d+):", line)
        if m:
            cur = (m.group(1) + m.group(2)).strip()
            st.setdefault(cur, dict(cp=0, cf=0, worst=0.0, bf=0, bp=0, weak=float("inf"), hid=0, seeds=[]))
            st[cur]["seeds"].append(m.group(3))
            continue
        if cur is None:
            continue
        s = st[cur]
        m = re.match(r"^\s+verdict (correct|bug) (PASS|FAIL)\S* ratio (\S+)", line)
        if m:
            r = float(m.group(3))
            if m.group(1) == "correct":
                if m.group(2) == "PASS":
                    s["cp"] += 1; s["worst"] = max(s["worst"], r)
                else:
                    s["cf"] += 1; print("correct FAIL:", cur, s["seeds"][-1], r)
            else:
                if m.group(2) == "FAIL":
                    s["bf"] += 1; s["weak"] = min(s["weak"], r)
                else:
                    s["bp"] += 1; print("bug PASS:", cur, s["seeds"][-1], r)
        elif "hidden by this draw" in line:
            s["hid"] += 1
    tot = collections.Counter()
    for k, s in st.items():
        print(f"{k:40s} correct {s['cp']:4d} PASS {s['cf']:3d} FAIL (worst {s['worst']:.3g})  bug {s['bf']:4d} FAIL (weakest {s['weak']:.3g}) {s['bp']} PASS {s['hid']} hidden")
        for x in ("cp", "cf", "bf", "bp", "hid"):
            tot[x] += s[x]
    print("total", dict(tot))



def model(paths):
    rows = collections.OrderedDict()
    pat_ok = re.compile(r"^sweep model (.+?)\s+(\d+) PASS \(worst ratio (\S+), (\S+) of the bound\)\s+(\d+) FAIL")
    pat_bug = re.compile(r"^sweep model (.+?)\s+(\d+) FAIL \(weakest ratio (\S+)\)\s+(\d+) PASS\s+(\d+) hidden")
    for f in paths:
        for line in open(f):
            m = pat_bug.match(line)
            if m and m.group(1).endswith("bug f32"):
                k = m.group(1); r = rows.setdefault(k, dict(kind="bug", f=0, w=float("inf"), p=0, h=0))
                r["f"] += int(m.group(2)); r["w"] = min(r["w"], float(m.group(3))); r["p"] += int(m.group(4)); r["h"] += int(m.group(5))
                continue
            m = pat_ok.match(line)
            if m:
                k = m.group(1); r = rows.setdefault(k, dict(kind="ok", p=0, worst=0.0, use=0.0, f=0))
                r["p"] += int(m.group(2)); r["f"] += int(m.group(5))
                try:
                    r["worst"] = max(r["worst"], float(m.group(3))); r["use"] = max(r["use"], float(m.group(4)))
                except ValueError:
                    pass
    fams = collections.OrderedDict()
    cols = ["fast f32", "fast tf32", "fast bf16", "bf16 weights bf16", "bug f32"]
    for k, r in rows.items():
        for c in cols:
            if k.endswith(" " + c):
                fams.setdefault(k[: -len(c) - 1], {})[c] = r
    tot = collections.Counter()
    for fam, cs in fams.items():
        cells = []
        for c in cols:
            r = cs.get(c)
            if not r:
                cells.append("—"); continue
            if r["kind"] == "ok":
                n = r["p"] + r["f"]
                cells.append(f"{r['p']} of {n} ({r['worst']:.3g}; {r['use']:.2f} of the bound)")
                tot["pass"] += r["p"]; tot["fail"] += r["f"]
            else:
                cells.append(f"{r['f']} FAIL (weakest {r['w']:.3g}), {r['h']} hidden" + (f", {r['p']} PASS" if r['p'] else ""))
                tot["bugfail"] += r["f"]; tot["bugpass"] += r["p"]; tot["hidden"] += r["h"]
        print(f"| {fam} | " + " | ".join(cells) + " |")
    print(dict(tot))



if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("ops", "model"):
        sys.exit("usage: sweep_tally.py ops LOG | model LOG...")
    ops(sys.argv[2]) if sys.argv[1] == "ops" else model(sys.argv[2:])
