"""Filters of the context ladder: the recall prompt and one node's observations from its registered facts."""

from ansible_collections.gb10.serving.plugins.filter.ladder import FilterModule

F = FilterModule().filters()
MEMINFO = "MemTotal:       127605760 kB\nMemAvailable:    4000000 kB\n"


def test_recall_prompt_filter_holds_the_needle():
    text = F["recall_prompt"](4096, "7291-4096", 1024)
    assert "The secret code is 7291-4096." in text
    assert 3000 < len(text.split()) < 4096


def test_ladder_observations_from_registered_facts():
    hv = {
        "__context_ladder_mem": [MEMINFO, MEMINFO.replace("4000000", "8000000")],
        "__context_ladder_earlyoom": {"stdout_lines": ["a"]},
        "__context_ladder_kernel": {"stdout_lines": []},
        "__context_ladder_rtts": ["0.1", 0.2],
        "__context_ladder_baseline": "0.05",
    }
    assert F["ladder_observations"](hv) == {
        "mem_available_mib": [3906, 7812],
        "earlyoom_lines": ["a"],
        "kernel_lines": [],
        "ssh_rtt_s": [0.1, 0.2],
        "ssh_baseline_s": 0.05,
    }


def test_unreachable_node_has_no_samples():
    obs = F["ladder_observations"]({"__context_ladder_earlyoom": {"unreachable": True}})
    assert obs["mem_available_mib"] == [] and obs["ssh_baseline_s"] is None
