"""What each mode trains and measures. quick: a smoke run that still teaches
something (~15-20 min on 2 cores); full: the reproduction at this machine's scale
(<= 10 h on 2 cores, in pieces of well under two hours: --only); tiny: seconds
(PHAX_EVAL_TINY=1, the job's own smoke test)."""

# Models of the PHA study (WikiText-2 word level, vocabulary capped, docs/train.md).
LM_BASE = dict(d_model=128, n_layers=4, n_heads=4, n_kv_heads=2)

# PHA ablations: what each switches off, and the width that restores the parameter
# count (non-embedding, within 3 % of PHA's).
ABLATIONS = {
    "pha_noattn": (dict(use_attn=False), "ffn_hidden"),
    "pha_nogss": (dict(use_gss=False), "ffn_hidden"),
    "pha_noffn": (dict(use_ffn=False), "gss_expand"),
    "pha_frozenmix": (dict(freeze_mix=True), None),
    # Why does removing the FFN help? The same removal with nothing given back (fewer
    # parameters): if it still helps, the gain is the FFN's absence, not the wider GSS.
    "pha_noffn_bare": (dict(use_ffn=False), "unmatched"),
}
# Arms that explain another arm rather than test a claim run fewer seeds.
ABL_FEW_SEEDS = {"pha_noffn_bare": 3}

# Scaling (issue 28): PHA, transformer and serial at three widths about x2 apart in
# non-embedding parameters (the middle one is the lm piece's d 128), each family matched to
# PHA's count at its width; steps scaled with PHA's count so tokens per parameter stay those
# of the lm runs (1,000 steps x 2,048 tokens at ~1.18 M). One piece per outer size.
SCALE_DIMS = {"scaling_s": 88, "scaling_l": 176}

# SWAX window regimes (both window studies): family and config keys.
REGIMES = {
    "short": ("swax", dict(p_short=1.0, anneal=0.0)),
    "long": ("swax", dict(p_short=0.0)),
    "stochastic": ("swax", dict()),  # p_short 0.5, annealed to w_long over the last 10 %
    "swa_only": ("swa", dict(p_short=0.0)),
    "mlstm_only": ("mlstm", dict()),
}

# The generality study (issue 31): the recall piece's window regimes (short, long, stochastic) on
# the same task, sizes, seeds and verdict rules, with another layer in place of SWAX's mLSTM.
# Backbone (what alternates with SWA) -> family; the mLSTM row is the recall piece's own.
GEN_BACKBONES = {"full attention": "swa_full", "Gated DeltaNet": "swax_gdn"}
GEN_REGIMES = ("short", "long", "stochastic")
# Lengths (multiples of T) the backbones are read at: the recall piece's up to 16x. Full attention's
# prompts cost O(L^2): on 2 shared cores phax recall took 402 s for the 500 prompts of 4096 tokens
# and would take ~25 min for those of 8192 (each of 12 evaluations); the claims compare regimes
# within a backbone, so its "beyond T" is read over 2x..16x T (the mLSTM row's over 2x..64x).
GEN_LENGTHS = [1, 2, 4, 8, 16]

# The synthetic recall task (docs/recall.md): vocabulary 64, d 64, 4 blocks
# (mLSTM, SWA, mLSTM, SWA), T 128, windows 16 / 128, batch 32, lr 3e-3.
RECALL_MODEL = dict(d_model=64, n_layers=4, n_heads=4, n_kv_heads=2, w_short=16, w_long=128)
RECALL_T = 128
RECALL_B = 32
RECALL_LR = 3e-3

# Multi-query associative recall at the SWAX paper's window ratios (issue 25; docs/recall.md):
# the paper trains at 16k with windows 128 and 2048 (T/128 and T/8); here T 1024 with windows 8
# and 128. Training rows: 8 pairs open each row, 4 queries of distinct pairs follow (every one
# scored; asking all 8 let the full-attention reference settle on answering by elimination:
# training loss ln(8!)/8 = 1.33 for 1,400 steps), a curriculum of 1..8 pairs (at most half of
# them asked) and of the queries' span per row; evaluation prompts: 8 pairs, 4 queries
# (elimination floor 0.16). The mLSTM layers get one head (q/k of d/2 = 32 per
# head), an input-gate bias of 0, a forget-gate init of 0.99 and the SWA layer first in each pair
# (mixer_order swa_first: a previous-token head in block 0 gives the mLSTM of block 1 its keys):
# with the xLSTM-7B defaults (-10, 0.95, mLSTM first) a d-64 model stayed on the ln 16 plateau
# for 800 steps at T 1024 (probes of 2026-12-06, evals/README.md); every arm and seed uses the
# same config but for the family and the windows.
MQAR_T = 1024
MQAR_B = 16
MQAR_MODEL = dict(d_model=64, n_layers=4, n_heads=4, n_kv_heads=2, mlstm_heads=1, igate_bias_init=0.0,
                  fgate_init=0.99, mixer_order="swa_first", w_short=MQAR_T // 128, w_long=MQAR_T // 8)
MQAR_TASK = dict(pairs=8, queries=4, vary=1, eval_queries=4)
# Arms: the full-attention reference (the SWA family with a window of T: full causal attention at
# T; evaluated with --window 0, full attention at every length) and the window regimes.
# (experiments.mqar_arm sets the short regime's w_long to its w_short: it trains at w_short only,
# and its validation while training, at w_long, then reads it at the window it learned with.)
MQAR_ARMS = dict(full=("swa", dict(w_short=MQAR_T, w_long=MQAR_T, p_short=0.0)), **REGIMES)
# The pieces, one arm each (each under about an hour alone on 2 cores, the reference's about two:
# its attention is full at T): per arm a learning-rate sweep on seed 1, then the other seeds at
# the best rate. The window sweep's fixed windows ("w<W>") take the short regime's rate (the
# same family with one fixed window), so those pieces need mqar_short.
# The reference (full attention at T, ~2x a SWAX run's time) is split in two: its sweep with
# seed 1 (mqar_ref), then seeds 2 and 3 at the rate it chose (mqar_ref2).
MQAR_PIECES = {"mqar_ref": ["full"], "mqar_ref2": ["full"], "mqar_short": ["short"], "mqar_long": ["long"], "mqar_stoch": ["stochastic"],
               "mqar_swa": ["swa_only"], "mqar_mlstm": ["mlstm_only"],
               "mqar_w%d" % (MQAR_T // 32): ["w%d" % (MQAR_T // 32)], "mqar_w%d" % (MQAR_T // 2): ["w%d" % (MQAR_T // 2)]}


def mode_settings(mode, tiny=False):
    s = dict(
        mode=mode,
        lm_base=dict(LM_BASE), recall_model=dict(RECALL_MODEL), tiny=tiny,
        corpora=["wikitext-2"],
        vocab_max={"wikitext-2": 8192, "ptb": 0},
        T=256, B=8, lr=2e-3, min_lr=2e-4,
        lm_models=["pha", "transformer", "serial"],
        lm_seeds=[1],
        lm_steps=500, warmup=30, eval_every=50, eval_tokens=8192, test_max=16384,
        ablation=False, abl_seeds=[1], abl_steps=200,
        iso_dims=[], iso_seeds=[1], iso_T=[2048], iso=False, iso_reps=1,
        sandwich_depths=[4], sandwich_seeds=[1],
        recall_tasks={"needle": dict(pairs=1, queries=1, steps=800)},
        recall_models=["short", "long", "stochastic"],
        recall_seeds=[1],
        recall_lengths=[1, 2, 4, 8, 16],
        recall_depths=[0, 0.25, 0.5, 0.75, 1],
        recall_samples=100,
        niah=False, niah_models=[], niah_seeds=[1], niah_steps=400, niah_frac=0.25,
        niah_lengths=[1, 2, 4, 8, 16], niah_variants="single", niah_haystacks="noise",
        niah_depths=5, niah_samples=4,
        eff_families=["transformer", "pha", "serial", "swax", "swa", "mlstm"],
        eff_T=[512, 2048], eff_contexts=[512, 2048],
        eff_steps=3,
        mqar=False, mqar_T=MQAR_T, mqar_B=MQAR_B, mqar_model=dict(MQAR_MODEL), mqar_task=dict(MQAR_TASK),
        mqar_pieces={k: list(v) for k, v in MQAR_PIECES.items()}, mqar_steps=2000, mqar_lrs=[1e-3, 3e-3, 1e-2],
        mqar_seeds=[1, 2, 3], mqar_lengths=[1, 2, 8, 32], mqar_full_lengths=[1, 2], mqar_samples=100,
        scale_dims=dict(SCALE_DIMS), scale_seeds=[1], sandwich_deep_steps=500,
        lr_sweep=False, lr_seed=1, lr_grid=[1e-3, 2e-3, 4e-3], lr_extend=3, scaling=False,
        precision=False, prec_models=["pha", "transformer", "swax"], prec_seeds=[1], prec_margin=0.01,
        generality=False, gen_backbones=dict(GEN_BACKBONES), gen_lengths=list(GEN_LENGTHS),
    )
    if mode == "full":
        s.update(
            corpora=["wikitext-2", "ptb"],
            lm_seeds=[1, 2, 3], precision=True, lr_sweep=True, prec_seeds=[1, 2, 3],
            lm_steps=1000, warmup=50, eval_every=100, eval_tokens=32768, test_max=0,
            # 8 seeds per arm: 80 % power for a 3 % difference at the spread of the first two
            # (sd up to 2.3 ppl at ~85; evals/README.md).
            ablation=True, abl_seeds=[1, 2, 3, 4, 5, 6, 7, 8], abl_steps=1000,
            # d 256 and 320 added so that PHA's perplexity can lie between two trained sizes.
            iso=True, iso_dims=[96, 160, 192, 256, 320], iso_seeds=[1, 2, 3], iso_T=[2048, 8192, 16384], iso_reps=5,
            # 4 blocks: the lm runs; 8 and 12 (piece sandwich12) trained 3x longer.
            sandwich_depths=[4, 8, 12], sandwich_seeds=[1, 2, 3], sandwich_deep_steps=3000,
            scaling=True, scale_seeds=[1, 2, 3],
            recall_tasks={"needle": dict(pairs=1, queries=1, steps=800),
                          "bind": dict(pairs=4, queries=4, steps=3000)},
            recall_models=list(REGIMES),
            recall_seeds=[1, 2, 3],
            recall_lengths=[1, 2, 4, 8, 16, 32, 64],
            niah=True, niah_models=list(REGIMES), niah_seeds=[1, 2, 3], niah_steps=1000,
            niah_variants="single,multikey", niah_haystacks="noise,text",
            niah_depths=5, niah_samples=10,
            eff_T=[512, 1024, 2048, 4096, 8192, 16384],
            eff_contexts=[512, 1024, 2048, 4096, 8192, 16384],
            eff_steps=5,
            mqar=True, generality=True,
        )
    if tiny:
        s.update(
            lm_base=dict(d_model=32, n_layers=2, n_heads=2, n_kv_heads=1),
            recall_model=dict(RECALL_MODEL, d_model=32, n_layers=2),
            iso_dims=[48] if s["iso"] else [],
            sandwich_depths=[2, 3, 12] if mode == "full" else [2],
            scale_dims=dict(scaling_s=24, scaling_l=44), sandwich_deep_steps=8,
            lm_steps=6, warmup=2, eval_every=3, eval_tokens=512, test_max=1024, abl_steps=6,
            recall_tasks={k: dict(v, steps=6) for k, v in s["recall_tasks"].items()},
            recall_lengths=[1, 2], recall_depths=[0, 1], recall_samples=4,
            niah_steps=6, niah_lengths=[1, 2], niah_depths=2, niah_samples=1,
            iso_T=[256], iso_reps=2, eff_T=[128, 256], eff_contexts=[128, 256], eff_steps=1,
            mqar_T=64, mqar_B=4, mqar_model=dict(MQAR_MODEL, d_model=32, n_layers=2, w_short=2, w_long=8),
            mqar_task=dict(pairs=4, queries=4, vary=1, eval_queries=2), mqar_steps=6, mqar_lrs=[1e-3, 3e-3],
            mqar_seeds=[1, 2], mqar_lengths=[1, 2], mqar_full_lengths=[1], mqar_samples=4,
            mqar_pieces=dict(MQAR_PIECES, mqar_w32=["w4"], mqar_w512=["w16"]),  # T 64: windows 4 and 16
            gen_lengths=[1, 2],
            precision=True, prec_seeds=[1, 2],  # two: the paired CI is computed
        )
    return s
