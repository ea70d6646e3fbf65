"""The CPUs that the project's 2-core machines (developers' and CI's) have come with, as the flag sets
of ``/proc/cpuinfo`` under KVM, so that every ``auto`` choice can be tested as if on each of them.

Zen 4 is the line read off one of these machines; Zen 3 is that line without the AVX-512 family
(and GFNI), as on the Zen 3 machines; Zen 5 (family 26, read off a guest on 2026-11-26) is Zen 4's
line with AVX-VNNI and AVX-512 VP2INTERSECT (its hypervisor hid RDSEED); Sapphire Rapids is an Intel guest's line with AVX-512 BF16,
AVX-512 FP16, AVX-VNNI and AMX; "Intel without AMX" is the line read off an Intel Xeon guest
(family 6 model 207, Emerald Rapids) whose hypervisor hides AMX: AVX-512 BF16 and FP16, no AMX.
Each profile says what a machine of its kind computes natively, and whether bfloat16 is faster
there than float32 (measured with ``yolo3 benchmark training``: Zen 4 1.76x, Zen 5 1.53x, the Intel
guest without AMX 0.61x).
"""
from __future__ import annotations

from typing import Dict, FrozenSet, NamedTuple

_COMMON = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
    "ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid "
    "tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt "
    "tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch fsgsbase "
    "tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt "
    "xsavec xgetbv1 xsaves arat umip vaes vpclmulqdq rdpid fsrm"
)
_AMD = "mmxext fxsr_opt extd_apicid cmp_legacy cr8_legacy sse4a misalignsse osvw topoext vmmcall " \
       "clzero xsaveerptr"
_AVX512_ZEN4 = ("avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi "
                "avx512_vbmi2 gfni avx512_vnni avx512_bitalg avx512_vpopcntdq")
_ZEN5_EXTRA = "avx_vnni avx512_vp2intersect"
_INTEL_NO_AMX = (_AVX512_ZEN4 + " avx512_fp16 avx_vnni serialize tsxldtrk movdiri movdir64b "
                 "cldemote arch_capabilities cpuid_fault hle rtm ss")
_SAPPHIRE_RAPIDS = (_AVX512_ZEN4 + " avx512_fp16 avx_vnni amx_bf16 amx_tile amx_int8 serialize "
                    "tsxldtrk movdiri movdir64b waitpkg cldemote arch_capabilities")
AMD, INTEL = "AuthenticAMD", "GenuineIntel"


class CpuProfile(NamedTuple):
    name: str
    vendor: str  # vendor_id of /proc/cpuinfo
    flags: FrozenSet[str]
    native_bfloat16: bool  # AVX-512 BF16 or AMX: oneDNN multiplies bfloat16 natively
    amx: bool
    fast_bfloat16: bool  # bfloat16 convolutions faster than float32 ones: what auto picks


PROFILES: Dict[str, CpuProfile] = {
    "zen3": CpuProfile("AMD EPYC Zen 3 (AVX2 only)", AMD, frozenset(f"{_COMMON} {_AMD}".split()),
                       native_bfloat16=False, amx=False, fast_bfloat16=False),
    "zen4": CpuProfile("AMD EPYC Zen 4 (AVX-512 BF16, no AMX)", AMD,
                       frozenset(f"{_COMMON} {_AMD} {_AVX512_ZEN4}".split()),
                       native_bfloat16=True, amx=False, fast_bfloat16=True),
    "zen5": CpuProfile("AMD EPYC Zen 5 (AVX-512 BF16, AVX-VNNI, no AMX)", AMD,
                       frozenset(f"{_COMMON} {_AMD} {_AVX512_ZEN4} {_ZEN5_EXTRA}".split())
                       - {"rdseed"},
                       native_bfloat16=True, amx=False, fast_bfloat16=True),
    "intel_no_amx": CpuProfile("Intel Xeon Emerald Rapids guest (AVX-512 BF16, AMX hidden)", INTEL,
                               frozenset(f"{_COMMON} {_INTEL_NO_AMX}".split()),
                               native_bfloat16=True, amx=False, fast_bfloat16=False),
    "sapphire_rapids": CpuProfile("Intel Xeon Sapphire Rapids (AVX-512 BF16, AMX)", INTEL,
                                  frozenset(f"{_COMMON} {_SAPPHIRE_RAPIDS}".split()),
                                  native_bfloat16=True, amx=True, fast_bfloat16=True),
}
