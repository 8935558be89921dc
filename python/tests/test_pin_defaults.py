"""tilepilot.pin_defaults: problems pinned to the operator's default config without a release
folder (an in-memory release in the package's dispatcher), checked through decide() on the CPU
interpreter identity (device=False), so no GPU is needed."""
import pytest
import tilepilot

GEMM = ["M=64,N=64,K=64", {"M": 128, "N": 96, "K": 64, "layout": "nt"}]
ATTN = {"B": 1, "H": 4, "Hkv": 2, "S": 128, "Skv": 128, "D": 64, "causal": True}


@pytest.fixture(autouse=True)
def fresh_dispatcher():
    tilepilot.configure(releases=[])  # no releases, no pins
    yield
    tilepilot.configure(releases=[])


def test_gemm_pins_make_decide_report_the_kernel():
    before = [tilepilot.decide("gemm", s, "bf16", device=False) for s in GEMM]
    assert [d["pinned"] for d in before] == [False, False]
    assert {d["reason"] for d in before} == {"no_release"}

    r = tilepilot.pin_defaults("gemm", GEMM, "bf16", device=False)
    assert r["op"] == "gemm" and r["source"] == "defaults" and r["replaced"] == ""
    assert (r["device"], r["arch"], r["dtype"]) == ("CPU interpreter", "cpu", "bf16")
    assert [p["shape"] for p in r["pins"]] == ["K=64,M=64,N=64,layout=nn",
                                               "K=64,M=128,N=96,layout=nt"]

    for s, pin in zip(GEMM, r["pins"]):
        d = tilepilot.decide("gemm", s, "bf16", device=False)
        assert d["pinned"], d
        assert d["config"] == pin["config"] and d["config"]  # the operator's default config
    # Only the pinned problems: another shape, layout or dtype still falls back, and saying why.
    assert tilepilot.decide("gemm", "M=64,N=64,K=128", "bf16", False)["reason"] == \
        "shape_outside_matrix"
    assert tilepilot.decide("gemm", "M=64,N=64,K=64,layout=tn", "bf16", False)["reason"] == \
        "shape_outside_matrix"
    assert tilepilot.decide("gemm", "M=64,N=64,K=64", "f16", False)["reason"] == \
        "dtype_outside_matrix"
    # Attention has no release of its own.
    assert tilepilot.decide("attention", ATTN, "bf16", False)["reason"] == "no_release"


def test_attention_pins_and_configure_drops_them():
    assert not tilepilot.decide("attention", ATTN, "bf16", device=False)["pinned"]
    r = tilepilot.pin_defaults("attention", [ATTN, ATTN], dtype="bfloat16", device=False)
    assert len(r["pins"]) == 1  # one pin per problem
    d = tilepilot.decide("attention", ATTN, "bf16", device=False)
    assert d["pinned"] and d["config"] == r["pins"][0]["config"]
    assert not tilepilot.decide("attention", dict(ATTN, causal=False), "bf16", False)["pinned"]
    tilepilot.configure(releases=[])
    assert tilepilot.decide("attention", ATTN, "bf16", device=False)["reason"] == "no_release"


def test_pins_replace_the_operators_release(tmp_path):
    tilepilot.configure(releases=[str(tmp_path / "nowhere")])
    r = tilepilot.pin_defaults("gemm", "M=64,N=64,K=64", device=False)  # one shape, not a list
    assert r["replaced"]  # said which release the pins replaced
    assert tilepilot.decide("gemm", "M=64,N=64,K=64", "bf16", device=False)["pinned"]
    # Pinning again replaces the first pins.
    tilepilot.pin_defaults("gemm", ["M=32,N=32,K=32"], device=False)
    assert not tilepilot.decide("gemm", "M=64,N=64,K=64", "bf16", device=False)["pinned"]
    assert tilepilot.decide("gemm", "M=32,N=32,K=32", "bf16", device=False)["pinned"]


@pytest.mark.parametrize("op,shapes,kw,match", [
    ("conv", ["M=64,N=64,K=64"], {}, r"unknown operator 'conv'; known operators: .*gemm"),
    ("gemm", ["M=64,N=64"], {}, r"gemm shape 0 \('M=64,N=64'\).*K"),
    ("gemm", ["M=64,N=64,K=64", "M=64,N=x,K=64"], {}, r"gemm shape 1 \('K=64,M=64,N=x'\).*N"),
    ("gemm", ["M=64,N=64,K=64,Q=3"], {}, r"shape 0 .*Q"),
    ("gemm", ["M64"], {}, r"gemm shape 0 \('M64'\).*key=value"),
    ("gemm", [42], {}, r"gemm shape 0 \(42\).*dict"),
    ("attention", [dict(ATTN, D=72)], {}, r"attention shape 0 .*D=72 is not supported"),
    ("attention", [dict(ATTN, Hkv=3)], {}, r"Hkv=3 does not divide H=4"),
    ("attention", [ATTN], {"dtype": "f32"}, r"attention: dtype f32 is not supported"),
    ("gemm", ["M=64,N=64,K=64"], {"dtype": "f64"}, r"dtype 'f64'"),
    ("gemm", [], {}, r"no gemm shapes given"),
])
def test_pin_defaults_errors(op, shapes, kw, match):
    with pytest.raises(ValueError, match=match):
        tilepilot.pin_defaults(op, shapes, device=False, **kw)
    # A failed call pins nothing.
    assert tilepilot.decide("gemm", "M=64,N=64,K=64", "bf16", device=False)["reason"] == \
        "no_release"


def test_device_pins_without_a_gpu_say_so():
    ok, _ = tilepilot._core.cuda_status()
    if ok:
        pytest.skip("a GPU is present; device=True pins are exercised by test_gpu.py")
    with pytest.raises(ValueError, match=r"device=True.*no.*device=False"):
        tilepilot.pin_defaults("gemm", ["M=64,N=64,K=64"])
