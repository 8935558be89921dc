"""The example plug-in (examples/plugin, `softcap`) from Python: built here against the
repository's public headers, loaded with tilepilot.load_plugin, run on the CPU interpreter and
through its torch op, which passes torch.library.opcheck. Broken plug-ins get a ValueError."""
from __future__ import annotations

import math
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import tilepilot

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def softcap_so(tmp_path_factory) -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    assert cxx, "a C++ compiler is needed to build the example plug-in"
    out = tmp_path_factory.mktemp("plugin") / "libtilepilot_softcap.so"
    subprocess.run([cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
                    f"-I{ROOT / 'include'}", f'-DTILEPILOT_VERSION="{tilepilot.__version__}"',
                    str(ROOT / "examples/plugin/SoftcapOp.cpp"), "-o", str(out)], check=True)
    return str(out)


def test_load_plugin_registers_its_operator_once(softcap_so):
    assert tilepilot.load_plugin(softcap_so) == ["softcap"]
    assert tilepilot.load_plugin(softcap_so) == ["softcap"]  # a second load is a no-op
    names = [o["name"] for o in tilepilot.ops()]
    assert names.count("softcap") == 1 and "gemm" in names
    entry = next(o for o in tilepilot.ops() if o["name"] == "softcap")
    assert entry["origin"].endswith("libtilepilot_softcap.so")


def test_check_runs_the_plugin_on_the_interpreter(softcap_so):
    tilepilot.load_plugin(softcap_so)
    r = tilepilot.check("softcap", "T=7,V=1000", dtype="bf16")
    assert r["passed"], r
    r = tilepilot.check("softcap", "T=3,V=33,cap=5", dtype="f32")
    assert r["passed"], r


def test_broken_plugins_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        tilepilot.load_plugin(tmp_path / "missing.so")
    not_so = tmp_path / "plain.so"
    not_so.write_text("not a shared library")
    with pytest.raises(ValueError, match="does not load"):
        tilepilot.load_plugin(not_so)


try:
    import torch
except ImportError:  # CI installs torch and sets TILEPILOT_REQUIRE_TORCH: there this fails
    torch = None
needs_torch = pytest.mark.skipif(torch is None and not os.environ.get("TILEPILOT_REQUIRE_TORCH"),
                                 reason="torch is not installed")


@needs_torch
def test_torch_op_matches_the_formula_and_passes_opcheck(softcap_so):
    tilepilot.load_plugin(softcap_so)
    x = (torch.rand(5, 77) * 200 - 100).to(torch.bfloat16)
    (y,) = torch.ops.tilepilot.softcap([x], "cap=30")
    want = 30 * torch.tanh(x.float() / 30)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    assert torch.allclose(y.float(), want, atol=2e-2, rtol=2e-2)
    torch.library.opcheck(torch.ops.tilepilot.softcap.default, ([x], "cap=30"),
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))


@needs_torch
def test_torch_op_traces_under_torch_compile(softcap_so):
    tilepilot.load_plugin(softcap_so)

    def f(x):
        return torch.ops.tilepilot.softcap([x * 2], "")[0] + 1

    x = torch.rand(3, 40, dtype=torch.float32)
    got = torch.compile(f, backend="eager", fullgraph=True)(x)
    want = 30 * torch.tanh(x * 2 / 30) + 1
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    assert not math.isnan(float(got.sum()))
