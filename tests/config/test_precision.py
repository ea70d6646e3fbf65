"""yolo3.config.precision as a module: reading the CPU flags, and the native-bfloat16 rule on flag
sets. The ``auto`` choices under each CPU the project's machines come with are in
test_auto_choices.py."""
from __future__ import annotations

import io

import pytest

from yolo3.config import precision as precision_module
from yolo3.core.errors import ArgumentError

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16
bugs\t\t: sysret_ss_attrs
processor\t: 1
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16
"""


def _fake_cpuinfo(text):
    def fake_open(path, *args, **kwargs):
        assert path == "/proc/cpuinfo"
        if text is None:
            raise FileNotFoundError(path)
        return io.StringIO(text)
    return fake_open


def test_flags_are_read_from_the_first_flags_line(monkeypatch):
    monkeypatch.setattr(precision_module, "open", _fake_cpuinfo(CPUINFO), raising=False)
    assert precision_module.cpu_flags() == {"fpu", "sse2", "avx2", "avx512f", "avx512_bf16"}
    assert precision_module.cpu_vendor() == "AuthenticAMD"
    assert precision_module.has_fast_bfloat16()


def test_the_same_flags_on_an_intel_cpu_are_not_fast(monkeypatch):
    """AVX-512 BF16 without AMX on Intel: native, but float32 is faster (float32 is chosen)."""
    text = CPUINFO.replace("AuthenticAMD", "GenuineIntel")
    monkeypatch.setattr(precision_module, "open", _fake_cpuinfo(text), raising=False)
    assert precision_module.cpu_vendor() == "GenuineIntel"
    assert precision_module.bfloat16_support() == "avx512_bf16"
    assert not precision_module.has_fast_bfloat16()
    monkeypatch.setattr(precision_module, "_backend_sees_a_gpu", lambda: False)
    assert precision_module.resolve_training_precision("auto") == "float32"
    assert precision_module.resolve_precision("auto") == "float32"


@pytest.mark.parametrize("text", [None, "processor\t: 0\nmodel name\t: Apple M2\n"],
                         ids=["no cpuinfo (macOS)", "no flags line"])
def test_no_flags_means_no_native_bfloat16(monkeypatch, text):
    monkeypatch.setattr(precision_module, "open", _fake_cpuinfo(text), raising=False)
    assert precision_module.cpu_flags() == set() and precision_module.cpu_vendor() == ""
    assert not precision_module.has_fast_bfloat16()
    monkeypatch.setattr(precision_module, "_backend_sees_a_gpu", lambda: False)
    assert precision_module.resolve_precision("auto") == "float32"
    assert precision_module.resolve_training_precision("auto") == "float32"


@pytest.mark.parametrize("vendor, flags, fast", [
    ("AuthenticAMD", {"avx2", "avx512f"}, False),  # AVX-512 without BF16 (Zen 3 has none at all)
    ("GenuineIntel", {"avx2", "avx512f"}, False),  # Skylake-X
    ("GenuineIntel", {"avx2", "amx_bf16"}, True),  # AMX alone
    ("AuthenticAMD", {"avx512_bf16"}, True),  # Zen 4
    ("GenuineIntel", {"avx512_bf16"}, False),  # Cooper Lake, or AMX hidden by a hypervisor
    ("GenuineIntel", {"avx512_bf16", "amx_bf16"}, True),  # Sapphire Rapids
    ("AuthenticAMD", {"avx_vnni", "avx512_vnni"}, False),  # integer dot products, not bfloat16
])
def test_fast_bfloat16_needs_amx_or_amds_avx512_bf16(monkeypatch, vendor, flags, fast):
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: set(flags))
    monkeypatch.setattr(precision_module, "cpu_vendor", lambda: vendor)
    assert precision_module.has_fast_bfloat16() is fast


def test_the_two_precision_lists_are_refused_across():
    """Inference takes bfloat16 (the whole network), training the Keras mixed policies."""
    assert precision_module.PRECISIONS == ("auto", "float32", "bfloat16")
    with pytest.raises(ArgumentError, match=r"precision must be one of \('auto', 'float32', "
                       r"'bfloat16'\), got 'mixed_bfloat16'"):
        precision_module.resolve_precision("mixed_bfloat16", gpu=False)
    with pytest.raises(ArgumentError, match="got 'bfloat16'"):
        precision_module.resolve_training_precision("bfloat16", gpu=False)


def test_cpuinfo_fields_are_read_by_name(monkeypatch):
    """One reader for /proc/cpuinfo: the first line of each field (the benchmarks' CPU model
    too)."""
    from yolo3.benchmarks.machine import cpu_model
    text = "processor\t: 0\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n" + CPUINFO
    monkeypatch.setattr(precision_module, "open", _fake_cpuinfo(text), raising=False)
    assert precision_module.cpuinfo_field("model name") == "AMD EPYC 9R14 96-Core Processor"
    assert precision_module.cpuinfo_field("bugs") == "sysret_ss_attrs"
    assert precision_module.cpuinfo_field("microcode") == ""
    assert cpu_model() == "AMD EPYC 9R14 96-Core Processor"
