# Copyright: gb10.serving maintainers
# Apache-2.0
"""The parsers of what the node prints (_lockstep/parse.py), on real-shaped dpkg output."""

from __future__ import annotations

from _lockstep_fixtures import fixture, packages

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import parse_dpkg_query, parse_lib_modules


def test_lockstep_parse_dpkg_query_reads_hold_state_and_config_files():
    parsed = packages("dpkg_covered_6.17.0-1014.txt")
    image = parsed["linux-image-6.17.0-1014-nvidia"]
    assert image["version"] == "6.17.0-1014.14"
    assert image["held"] and image["on_disk"]
    removed = parsed["linux-modules-nvidia-580-open-6.11.0-1016-nvidia"]
    assert not removed["on_disk"]
    assert removed["state"] == "config-files"
    forgotten = parsed["nvidia-driver-570-server"]
    assert forgotten["version"] == "" and not forgotten["on_disk"]
    assert not parsed["linux-image-6.11.0-1016-nvidia"]["held"]


def test_lockstep_parse_dpkg_query_drops_architecture_qualifier():
    parsed = parse_dpkg_query("libc6:arm64 2.39-0ubuntu8.4 install ok installed\n")
    assert "libc6" in parsed


def test_lockstep_parse_lib_modules():
    assert parse_lib_modules(fixture("ls_lib_modules.txt") + "README\n") == [
        "6.11.0-1016-nvidia",
        "6.17.0-1014-nvidia",
        "6.17.0-1018-nvidia",
    ]
