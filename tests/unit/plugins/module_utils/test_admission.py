# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 2: an engine start admitted by what the node has available (MemAvailable), not what is free.

On unified memory vLLM's share is no hard cap while it profiles (vllm-project/vllm#46307, #49760); the page cache
and other tenants decide whether a load fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _admission as admission

# /proc/meminfo of this 24 GiB machine as a sim node reads it (kernel 6.18), 2026-12-05.
MEMINFO = Path(__file__).resolve().parents[2] / "fixtures" / "admission" / "proc_meminfo_kernel6.18_24GiB_host.txt"
# A GB10's plan table: 0.5 x 121.69 GiB, other work 6 GiB, margin 5 GiB (the sim's spark-1 shape).
TABLE = {"budget_gib": 60.84, "other_work_reserve_gib": 6, "margin_gib": 5.0}
TOP = [{"pid": 812, "name": "dockerd", "rss_mib": 96.0}, {"pid": 4100, "name": "python3", "rss_mib": 20480.0}]


def test_meminfo_reads_the_kernels_figures():
    figures = admission.meminfo(MEMINFO.read_text())
    assert round(figures["MemTotal"]) == 24105  # 24683792 kB
    assert figures["MemAvailable"] > figures["MemFree"]


def test_pitfall_memory_admitted_by_free_not_available_page_cache_counts():
    """MemFree alone would refuse: the page cache the kernel can drop is available (MemAvailable counts it)."""
    figures = {"MemTotal": 124608.0, "MemFree": 40000.0, "MemAvailable": 90000.0, "Cached": 50000.0}
    found = admission.verdict("spark-1", figures, TABLE, 8192, TOP)
    assert found["admitted"], found["message"]
    assert found["need_mib"] == pytest.approx((60.84 + 8 + 6 + 5) * 1024, abs=0.1)
    assert "MemAvailable 87.89 GiB (measured; MemFree 39.06 GiB, page cache 48.83 GiB)" in found["message"]


def test_pitfall_memory_admitted_by_free_not_available_refused_with_numbers_and_holders():
    figures = {"MemTotal": 124608.0, "MemFree": 60000.0, "MemAvailable": 70000.0, "Cached": 9000.0}
    found = admission.verdict("spark-1", figures, TABLE, 8192, admission.top_consumers(TOP))
    assert not found["admitted"]
    message = found["message"]
    assert message.startswith("spark-1: engine start refused, 11.48 GiB short: MemAvailable 68.36 GiB")
    assert (
        "need 79.84 GiB = vLLM budget 60.84 GiB + /dev/shm 8.00 GiB + other work 6.00 GiB + margin 5.00 GiB" in message
    )
    # the largest holder first
    assert "What holds the memory now: python3 (pid 4100) 20.00 GiB, dockerd (pid 812) 0.09 GiB" in message
    assert "serving_drop_caches: true" in message and "vllm-project/vllm#46307, #49760" in message


def test_pitfall_memory_admitted_by_free_not_available_shm_counts():
    """The engine's /dev/shm is carved from the same memory: without it this start fits, with it it does not."""
    figures = {"MemAvailable": (60.84 + 6 + 5 + 4) * 1024}
    assert admission.verdict("spark-1", figures, TABLE, 0, [])["admitted"]
    assert not admission.verdict("spark-1", figures, TABLE, admission.parse_size_mib("8g"), [])["admitted"]


def test_pitfall_memory_admitted_by_free_not_available_stated_source_is_said():
    found = admission.verdict("spark-1", {"MemAvailable": 1.0e6}, TABLE, 0, [], "stated in the inventory")
    assert "(stated in the inventory;" in found["message"]


def test_no_memavailable_is_refused():
    found = admission.verdict("spark-1", {"MemFree": 1000.0}, TABLE, 0, [])
    assert not found["admitted"] and "no MemAvailable" in found["message"]


@pytest.mark.parametrize(
    ("size", "mib"), [("8g", 8192.0), ("512m", 512.0), ("1024k", 1.0), ("0", 0.0), ("1048576", 1.0), ("8G", 8192.0)]
)
def test_parse_size_mib(size, mib):
    assert admission.parse_size_mib(size) == mib


def test_parse_size_mib_refuses_words():
    with pytest.raises(ValueError, match="not a size"):
        admission.parse_size_mib("lots")


def test_pitfall_memory_admitted_by_free_not_available_the_plans_need_and_shm():
    """The plan's table states the /dev/shm (shm_gib, from memory.shm_size) and the need (start_need_gib): the
    admission takes both from it and derives neither again; a shm_mib given beside it is not counted twice."""
    table = dict(TABLE, shm_gib=1.0, start_need_gib=72.84)
    found = admission.verdict("spark-1", {"MemAvailable": 72.0 * 1024}, table, 8192, [])
    assert not found["admitted"] and found["need_mib"] == pytest.approx(72.84 * 1024, abs=0.1)
    assert found["parts"]["shm_mib"] == 1024.0 and "/dev/shm 1.00 GiB" in found["message"]
    assert admission.verdict("spark-1", {"MemAvailable": 73.0 * 1024}, table, 8192, [])["admitted"]


def test_pitfall_memory_admitted_by_free_not_available_judged_says_a_stated_figure_and_the_measured_one():
    """Where the inventory states the machine's MemAvailable (a container standing for a GB10 sees the host's), the
    stated figure is judged and the measured one said beside it; the engine's start and the watchdog's restart both
    read the node through this one function."""
    text = MEMINFO.read_text()
    figures, measured, source = admission.judged(text)
    assert source == "measured" and figures["MemAvailable"] == measured == admission.meminfo(text)["MemAvailable"]
    figures, measured, source = admission.judged(text, "121900")
    assert figures["MemAvailable"] == 121900.0 and measured == admission.meminfo(text)["MemAvailable"]
    assert source == f"stated in the inventory, measured {measured / 1024:.2f} GiB"
    assert admission.judged("MemTotal: 1024 kB\n", 2048)[1:] == (None, "stated in the inventory, measured ? GiB")
    assert admission.judged(text, "")[2] == "measured"


def test_read_processes_takes_the_resident_ones_by_name(tmp_path):
    for pid, comm, status in (
        ("4100", "python3\n", "Name:\tpython3\nVmRSS:\t41943040 kB\n"),
        ("2", "kthreadd\n", "Name:\tkthreadd\n"),  # a kernel thread: no VmRSS
        ("self", "x\n", "VmRSS:\t1 kB\n"),  # not a pid
    ):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(comm)
        (tmp_path / pid / "status").write_text(status)
    (tmp_path / "77").mkdir()  # gone between the listing and the read
    assert admission.read_processes(tmp_path) == [{"pid": 4100, "name": "python3", "rss_mib": 40960.0}]
    # this machine's own /proc: this test's process is among them
    assert any(p["rss_mib"] > 0 for p in admission.read_processes())
