"""check, ops, env and the dispatcher's decisions, without a GPU."""
import pytest
import tilepilot

CHECK_KEYS = {"op", "shape", "dtype", "backend", "config", "max_abs_err", "rel_l2_err", "atol",
              "rtol", "passed"}


def test_ops_lists_both_operators():
    ops = {o["name"]: o for o in tilepilot.ops()}
    assert {"gemm", "attention"} <= set(ops)
    assert {"M", "N", "K"} <= set(ops["gemm"]["shape_keys"])
    assert "bm" in ops["attention"]["config_space"]


def test_env_has_versions():
    e = tilepilot.env()
    assert e["tilepilot"] == tilepilot.__version__
    for key in ("compiler", "nvrtc", "driver", "gpus", "python", "numpy", "torch"):
        assert key in e


@pytest.mark.parametrize("op,shape,dtype", [
    ("gemm", {"M": 77, "N": 45, "K": 133}, "bf16"),
    ("gemm", "M=17,N=9,K=5,layout=tn", "f32"),
    ("attention", {"B": 2, "H": 4, "Hkv": 2, "S": 13, "Skv": 20, "D": 64, "causal": True}, "f16"),
])
def test_check_returns_the_cli_contract(op, shape, dtype):
    r = tilepilot.check(op, shape, dtype=dtype, seed=3)
    assert CHECK_KEYS <= set(r)
    assert r["op"] == op and r["backend"] == "cpu" and r["dtype"] == dtype
    assert r["passed"], r


def test_check_can_fail_with_a_tight_tolerance():
    r = tilepilot.check("gemm", "M=16,N=16,K=64", dtype="bf16", atol=0, rtol=0)
    assert not r["passed"] and "first_bad" in r


def test_decide_without_release_falls_back():
    d = tilepilot.decide("gemm", "M=64,N=64,K=64", "bf16", device=False)
    assert d == {"pinned": False, "reason": "no_release", "why": d["why"], "config": {}}
    assert d["why"]


def test_configure_with_missing_release_is_release_invalid(tmp_path):
    tilepilot.configure(releases=[str(tmp_path / "nowhere")])
    try:
        d = tilepilot.decide("gemm", "M=64,N=64,K=64", "bf16", device=False)
        assert not d["pinned"] and d["reason"] in ("release_invalid", "no_release")
    finally:
        tilepilot.configure(releases=[])
    assert tilepilot.counters("gemm")["pinned"] == 0
