#!/usr/bin/env python3
"""Generates device/arch/sm90/wgmma_ops.cuh: wgmma.mma_async m64nNk16 wrappers, f32 accumulators.

One wrapper per (N, A/B type, operand source):
  SS: wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T d, a-desc, b-desc, scale-d, imm-scale-a,
      imm-scale-b, imm-trans-a, imm-trans-b;
  RS: wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T d, {a0..a3}, b-desc, scale-d, imm-scale-a,
      imm-scale-b, imm-trans-b;
(PTX ISA 9.7.15.5.2 "wgmma.mma_async"), plus the dispatchers tp::warpgroup::mma_async_ss/_rs.

Usage: scripts/gen_wgmma.py            rewrite the header
       scripts/gen_wgmma.py --check    exit 1 if the committed header is out of date
"""
import pathlib
import sys

N_VALUES = list(range(16, 257, 16))  # every multiple of 16 up to 256
TYPES = [("bf16", "bf16"), ("half", "f16")]  # (C++ type in namespace tp, PTX type)
OUT = pathlib.Path(__file__).resolve().parent.parent / "device/arch/sm90/wgmma_ops.cuh"


def reg_list(first, count, per_line=8):
    """'{%first, ..., %(first+count-1)}' split over lines of at most per_line operands."""
    regs = [f"%{first + i}" for i in range(count)]
    lines = [", ".join(regs[i:i + per_line]) for i in range(0, count, per_line)]
    return lines


def asm_string_lines(mnemonic, acc_lines, rest):
    out = ['"{\\n"', '".reg .pred p;\\n"']
    out.append(f'"setp.ne.b32 p, %{rest["scale_d"]}, 0;\\n"')
    out.append(f'"{mnemonic}\\n"')
    for i, line in enumerate(acc_lines):
        opening = "{" if i == 0 else ""
        closing = "}," if i == len(acc_lines) - 1 else ","
        out.append(f'"  {opening}{line}{closing}\\n"')
    out.append(f'"  {rest["operands"]};\\n"')
    out.append('"}\\n"')
    return out


def acc_constraints(count, per_line=6):
    items = [f'"+f"(d[{i}])' for i in range(count)]
    return [", ".join(items[i:i + per_line]) for i in range(0, count, per_line)]


def gen_one(n, cty, pty, rs):
    nacc = n // 2
    name = f"wgmma_m64n{n}k16_f32_{pty}_{'rs' if rs else 'ss'}"
    mnemonic = f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{pty}.{pty}"
    acc = reg_list(0, nacc)
    if rs:
        a0 = nacc
        b, sd, sa, sb, tb = nacc + 4, nacc + 5, nacc + 6, nacc + 7, nacc + 8
        operands = f"{{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{b}, p, %{sa}, %{sb}, %{tb}"
        tparams = "int TransB, int ScaleA, int ScaleB"
        args = f"float (&d)[{nacc}], const uint32_t (&a)[4], uint64_t b_desc, int scale_d"
        inputs = ('"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), '
                  '"n"(ScaleA), "n"(ScaleB), "n"(TransB)')
        doc = (f"/// {mnemonic} d, {{a0..a3}}, b-desc, p(scale_d != 0), ScaleA, ScaleB, TransB:\n"
               f"/// D (64x{n} f32, d[{nacc}]) = ScaleA*A (64x16, registers) * ScaleB*B (16x{n}, smem)"
               " + (scale_d ? D : 0).")
    else:
        a, b, sd, sa, sb, ta, tb = nacc, nacc + 1, nacc + 2, nacc + 3, nacc + 4, nacc + 5, nacc + 6
        operands = f"%{a}, %{b}, p, %{sa}, %{sb}, %{ta}, %{tb}"
        tparams = "int TransA, int TransB, int ScaleA, int ScaleB"
        args = f"float (&d)[{nacc}], uint64_t a_desc, uint64_t b_desc, int scale_d"
        inputs = ('"l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(ScaleA), "n"(ScaleB), "n"(TransA), '
                  '"n"(TransB)')
        doc = (f"/// {mnemonic} d, a-desc, b-desc, p(scale_d != 0), ScaleA, ScaleB, TransA, TransB:\n"
               f"/// D (64x{n} f32, d[{nacc}]) = ScaleA*A (64x16, smem) * ScaleB*B (16x{n}, smem)"
               " + (scale_d ? D : 0).")
    lines = [doc, f"template <{tparams}>", f"TP_DEVICE void {name}({args}) {{", "  asm volatile("]
    lines += ["      " + s for s in asm_string_lines(mnemonic, acc, {"scale_d": sd,
                                                                     "operands": operands})]
    cons = acc_constraints(nacc)
    lines.append("      : " + cons[0] + ("," if len(cons) > 1 else ""))
    for i, c in enumerate(cons[1:]):
        lines.append("        " + c + ("," if i < len(cons) - 2 else ""))
    lines.append("      : " + inputs + ");")
    lines.append("}")
    return "\n".join(lines)


def guard(n):
    """The wrappers of one N are compiled where the includer asks for that N (generated kernels
    define TP_WGMMA_N_LIST and TP_WGMMA_N_<N> for the Ns they use: parsing every wrapper cost
    about 10 ms of CPU in each kernel's NVRTC compile), or for every N where it names none."""
    return f"!defined(TP_WGMMA_N_LIST) || defined(TP_WGMMA_N_{n})"


def gen_dispatch(rs):
    if rs:
        head = ("/// wgmma m64nNk16, A from registers (4 x bf16x2/half2x, layout: wgmma_layout.cuh),\n"
                "/// B from a shared-memory descriptor. scale_d == 0 overwrites D instead of adding.\n"
                "template <typename T, int N, int TransB = 0, int ScaleA = 1, int ScaleB = 1>\n"
                "TP_DEVICE void mma_async_rs(float (&d)[N / 2], const uint32_t (&a)[4], "
                "uint64_t b_desc,\n                             int scale_d = 1) {")
        call_args = "(d, a, b_desc, scale_d)"
        targs = "TransB, ScaleA, ScaleB"
        suffix = "rs"
    else:
        head = ("/// wgmma m64nNk16, A and B from shared-memory descriptors (smem_desc.cuh).\n"
                "/// scale_d == 0 overwrites D instead of adding.\n"
                "template <typename T, int N, int TransA = 0, int TransB = 0, int ScaleA = 1, "
                "int ScaleB = 1>\n"
                "TP_DEVICE void mma_async_ss(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, "
                "int scale_d = 1) {")
        call_args = "(d, a_desc, b_desc, scale_d)"
        targs = "TransA, TransB, ScaleA, ScaleB"
        suffix = "ss"
    lines = [head,
             "  static_assert(is_same<T, bf16>::value || is_same<T, half>::value,",
             '                "wgmma wrappers exist for bf16 and half inputs");',
             "  static_assert(ScaleA == 1 || ScaleA == -1, \"imm-scale-a is 1 or -1\");",
             "  static_assert(ScaleB == 1 || ScaleB == -1, \"imm-scale-b is 1 or -1\");"]
    lines.append("  if constexpr (false) {")
    for n in N_VALUES:
        lines.append(f"#if {guard(n)}")
        lines.append(f"  }} else if constexpr (N == {n}) {{")
        lines.append("    if constexpr (is_same<T, bf16>::value)")
        lines.append(f"      detail::wgmma_m64n{n}k16_f32_bf16_{suffix}<{targs}>{call_args};")
        lines.append("    else")
        lines.append(f"      detail::wgmma_m64n{n}k16_f32_f16_{suffix}<{targs}>{call_args};")
        lines.append("#endif")
    lines.append("  } else {")
    lines.append('    static_assert(N < 0, "no wgmma wrapper for this N: N is a multiple of 16 up '
                 'to 256, and a file that defines TP_WGMMA_N_LIST defines TP_WGMMA_N_<N> for each '
                 'N it uses");')
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def generate():
    parts = [
        "// generated by scripts/gen_wgmma.py, do not edit.",
        "// clang-format off",
        "//",
        "// wgmma.mma_async m64nNk16 wrappers with f32 accumulators: one per N in",
        f"// {{{', '.join(str(n) for n in N_VALUES)}}}, per A/B type (bf16, f16) and per operand source",
        "// (SS: A and B from shared-memory descriptors; RS: A from registers), and the dispatchers",
        "// tp::warpgroup::mma_async_ss / mma_async_rs. scale-d is a predicate built from the scale_d",
        "// register; imm-scale-a/b (1 or -1) and imm-trans-a/b (0 or 1, 1 = MN-major operand in shared",
        "// memory) are immediates from template parameters.",
        "// All 128 threads of the warpgroup must call together; see wgmma.cuh for fencing rules.",
        "// An includer that defines TP_WGMMA_N_LIST gets only the Ns it defines as TP_WGMMA_N_<N>.",
        "#pragma once",
        "",
        '#include "defs.cuh"',
        '#include "types.cuh"',
        "",
        "#if TP_CUDA",
        "namespace tp::warpgroup::detail {",
        "",
    ]
    for n in N_VALUES:
        parts.append(f"#if {guard(n)}")
        for cty, pty in TYPES:
            for rs in (False, True):
                parts.append(gen_one(n, cty, pty, rs))
                parts.append("")
        parts.append("#endif")
        parts.append("")
    parts.append("} // namespace tp::warpgroup::detail")
    parts.append("")
    parts.append("namespace tp::warpgroup {")
    parts.append("")
    parts.append(gen_dispatch(False))
    parts.append("")
    parts.append(gen_dispatch(True))
    parts.append("")
    parts.append("} // namespace tp::warpgroup")
    parts.append("#endif")
    parts.append("// clang-format on")
    return "\n".join(parts) + "\n"


def main():
    text = generate()
    if "--check" in sys.argv[1:]:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run scripts/gen_wgmma.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
