"""The machine's free memory and a child's peak (yolo3.core.memory): MemAvailable, a container's
limit where it is less, and the units of ru_maxrss per platform."""
from __future__ import annotations

from yolo3.core.memory import available_memory, gigabytes, peak_resident, proc_field_bytes

MEMINFO = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"


def _cgroup(folder, limit: str, current: int):
    folder.mkdir()
    (folder / "memory.max").write_text(limit + "\n")
    (folder / "memory.current").write_text(f"{current}\n")
    return str(folder)


def test_available_memory_is_memavailable_without_a_container_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    assert available_memory(str(meminfo), str(tmp_path / "none")) == 20_000_000 * 1024
    assert available_memory(str(meminfo), _cgroup(tmp_path / "cg", "max", 5)) == 20_000_000 * 1024


def test_a_container_limit_below_the_machine_is_what_is_available(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    cgroup = _cgroup(tmp_path / "cg", str(8 * 10**9), 3 * 10**9)
    assert available_memory(str(meminfo), cgroup) == 5 * 10**9
    full = _cgroup(tmp_path / "full", str(10**9), 2 * 10**9)  # past its limit: nothing left
    assert available_memory(str(meminfo), full) == 0


def test_unknown_where_neither_file_is_there_or_readable(tmp_path):
    assert available_memory(str(tmp_path / "no-meminfo"), str(tmp_path / "no-cgroup")) is None
    garbled = tmp_path / "meminfo"
    garbled.write_text("MemAvailable: lots\n")
    assert available_memory(str(garbled), str(tmp_path / "no-cgroup")) is None


def test_a_processes_peak_is_its_high_water_mark(tmp_path):
    import os
    import subprocess
    import sys
    held = bytearray(os.urandom(1) * 50_000_000)  # touched: resident in this process
    assert peak_resident(os.getpid()) >= 80_000_000  # the bytes and the interpreter
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; b = bytearray(30_000_000);"
                              " print('ready', flush=True); time.sleep(5)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        peak = peak_resident(child.pid)
        assert 30_000_000 <= peak < 75_000_000  # its own, not this process's pages at the fork
    finally:
        child.kill()
        child.wait()
    assert peak_resident(child.pid) is None  # gone
    fake = tmp_path / "123"
    fake.mkdir()
    (fake / "status").write_text("Name:\tx\nVmPeak:\t 900 kB\nVmHWM:\t    2500 kB\n")
    assert peak_resident(123, str(tmp_path)) == 2_560_000
    assert peak_resident(124, str(tmp_path)) is None


def test_the_gigabytes_shown():
    assert gigabytes(2_449_000_000) == "2.4 GB" and gigabytes(21.7e9) == "21.7 GB"


def test_a_proc_fields_kilobytes_read_as_bytes(tmp_path):
    rollup = tmp_path / "smaps_rollup"
    rollup.write_text("00400000-7ffd [rollup]\nRss:      2048 kB\nPss:      1500 kB\n")
    assert proc_field_bytes(str(rollup), "Pss") == 1_536_000
    assert proc_field_bytes(str(rollup), "Rss") == 2_097_152
    assert proc_field_bytes(str(rollup), "Pss_Anon") is None  # a key is matched whole
    assert proc_field_bytes(str(tmp_path / "missing"), "Pss") is None
