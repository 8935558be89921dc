"""The extension module exports no C++ runtime of its own (issue 18).

On 2026-12-02 a compiler that linked part of libstdc++ statically into _core made the module
export that code; torch loads the system libstdc++ first, the two interposed, and the first
ostream use crashed the process. python/CMakeLists.txt keeps such archives' symbols local; this
test holds the built module to it: every strong symbol it exports is TilePilot's own (tp::) or
Python's entry point. Weak symbols (template instances in TilePilot's code) may be shared.
"""
import shutil
import subprocess

import pytest

from tilepilot import _core


def exported_strong_symbols(path: str) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.fail("nm (binutils) is needed to read the module's dynamic symbols; install binutils")
    out = subprocess.run([nm, "-D", "--defined-only", "-C", path], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and parts[1] in ("T", "D", "B", "R"):  # strong text, data, bss, rodata
            names.append(parts[2])
    return names


def test_the_module_exports_only_tilepilot_and_its_entry_point():
    names = exported_strong_symbols(_core.__file__)
    assert "PyInit__core" in names, "the module's entry point is missing: wrong file?"
    foreign = [n for n in names if not (n.startswith("tp::") or n == "PyInit__core")]
    assert not foreign, (f"{_core.__file__} exports {len(foreign)} symbols that are not "
                         f"TilePilot's, e.g. {foreign[:5]}; a static C++ runtime or library was "
                         "linked in without --exclude-libs (python/CMakeLists.txt)")
