"""One-line checks for a test suite (pytest, unittest or plain asserts):

    from phax.testing import assert_matches_oracle
    def test_my_attention():
        inputs = dict(q=q, k=k, v=v, window=64, **{"grad.y": gy})   # what phax.oracle takes
        outputs = {"y": y, "grad.q": dq, "grad.k": dk, "grad.v": dv}  # your kernel's, by phax's names
        assert_matches_oracle("attention", inputs, outputs, precision="f32")

It runs `phax check` in process (phax.check) and raises AssertionError with phax's per-tensor
table (relative error, the same-precision baseline's, their ratio, the bound) when a tensor is
outside the bound; a missing, extra or misshapen output raises phax.Error, as the command's
MISMATCH. Conventions (window, RoPE, score scale, mLSTM form): docs/conventions.md.
"""
from . import check

__all__ = ["assert_matches_oracle"]


def assert_matches_oracle(op, inputs, outputs, precision="f32", *, max_memory=None):
    """Pass silently, or raise AssertionError("phax check OP: FAIL ...\\n<table>"). Returns the
    phax.Report of a PASS (its rows hold every ratio)."""
    rep = check(op, inputs, outputs, precision, max_memory=max_memory)
    if rep.verdict != "PASS":
        raise AssertionError(f"phax check {op} at {precision}: {rep.verdict}\n{rep}")
    return rep
