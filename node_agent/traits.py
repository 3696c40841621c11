"""CPU traits of the root provider, from /proc/cpuinfo flags.

The trait names are os-traits' ``HW_CPU_X86_*`` (and ``HW_CPU_AARCH64_*``),
the ones nova's libvirt driver reports, so a flavor's
``trait:HW_CPU_X86_AVX2=required`` means the same here. The kernel spells
some features differently from libvirt and os-traits (``pni`` is SSE3,
``pclmulqdq`` is CLMUL, ``sse4_1`` is SSE4.1): the table below goes from
the kernel's spelling. ``HW_CPU_HYPERTHREADING`` is set when a core runs
more than one thread.

The agent owns exactly these traits (``MANAGED``): it adds the ones the CPU
has and removes the others, and leaves every other trait of the provider
alone (an operator's, the power controller's profile trait), as nova's
update_provider_tree does.
"""

import os_traits

# kernel flag -> os-traits name.
X86_FLAGS = {
    "3dnow": "HW_CPU_X86_3DNOW",
    "abm": "HW_CPU_X86_ABM",
    "aes": "HW_CPU_X86_AESNI",
    "amx_bf16": "HW_CPU_X86_AMXBF16",
    "amx_int8": "HW_CPU_X86_AMXINT8",
    "amx_tile": "HW_CPU_X86_AMXTILE",
    "avx": "HW_CPU_X86_AVX",
    "avx2": "HW_CPU_X86_AVX2",
    "avx512bw": "HW_CPU_X86_AVX512BW",
    "avx512cd": "HW_CPU_X86_AVX512CD",
    "avx512dq": "HW_CPU_X86_AVX512DQ",
    "avx512er": "HW_CPU_X86_AVX512ER",
    "avx512f": "HW_CPU_X86_AVX512F",
    "avx512ifma": "HW_CPU_X86_AVX512IFMA",
    "avx512pf": "HW_CPU_X86_AVX512PF",
    "avx512vbmi": "HW_CPU_X86_AVX512VBMI",
    "avx512vl": "HW_CPU_X86_AVX512VL",
    "avx512_bitalg": "HW_CPU_X86_AVX512BITALG",
    "avx512_vbmi2": "HW_CPU_X86_AVX512VBMI2",
    "avx512_vnni": "HW_CPU_X86_AVX512VNNI",
    "avx512_vpopcntdq": "HW_CPU_X86_AVX512VPOPCNTDQ",
    "bmi1": "HW_CPU_X86_BMI",
    "bmi2": "HW_CPU_X86_BMI2",
    "f16c": "HW_CPU_X86_F16C",
    "fma": "HW_CPU_X86_FMA3",
    "fma4": "HW_CPU_X86_FMA4",
    "mmx": "HW_CPU_X86_MMX",
    "mpx": "HW_CPU_X86_MPX",
    "pclmulqdq": "HW_CPU_X86_CLMUL",
    "pdpe1gb": "HW_CPU_X86_PDPE1GB",
    "pni": "HW_CPU_X86_SSE3",
    "rtm": "HW_CPU_X86_TSX",
    "sgx": "HW_CPU_X86_SGX",
    "sha_ni": "HW_CPU_X86_SHA",
    "sse": "HW_CPU_X86_SSE",
    "sse2": "HW_CPU_X86_SSE2",
    "sse4_1": "HW_CPU_X86_SSE41",
    "sse4_2": "HW_CPU_X86_SSE42",
    "sse4a": "HW_CPU_X86_SSE4A",
    "ssse3": "HW_CPU_X86_SSSE3",
    "stibp": "HW_CPU_X86_STIBP",
    "svm": "HW_CPU_X86_SVM",
    "tbm": "HW_CPU_X86_TBM",
    "vmx": "HW_CPU_X86_VMX",
    "xop": "HW_CPU_X86_XOP",
}

# The 512-bit forms of these exist only with AVX-512 (os-traits names them
# AVX512*); without avx512f the flag means the 128/256-bit form, no trait.
X86_AVX512_ONLY = {
    "gfni": "HW_CPU_X86_AVX512GFNI",
    "vaes": "HW_CPU_X86_AVX512VAES",
    "vpclmulqdq": "HW_CPU_X86_AVX512VPCLMULQDQ",
}

HYPERTHREADING = "HW_CPU_HYPERTHREADING"
_AARCH64_PREFIX = "HW_CPU_AARCH64_"
_AARCH64 = frozenset(os_traits.get_traits(_AARCH64_PREFIX))

MANAGED = frozenset(X86_FLAGS.values()) | frozenset(X86_AVX512_ONLY.values()) | _AARCH64
MANAGED |= {HYPERTHREADING}


def cpu_traits(cpu):
    """The sorted os-traits names of a ``discovery.Cpu``."""
    flags = cpu.flags
    out = set()
    if cpu.arch == "x86":
        out |= {X86_FLAGS[f] for f in flags if f in X86_FLAGS}
        if "avx512f" in flags:
            out |= {X86_AVX512_ONLY[f] for f in flags if f in X86_AVX512_ONLY}
    elif cpu.arch == "aarch64":
        # aarch64's Features line uses the os-traits spelling, lower case.
        out |= {_AARCH64_PREFIX + f.upper() for f in flags} & _AARCH64
    if cpu.threads > cpu.cores:
        out.add(HYPERTHREADING)
    return sorted(out)
