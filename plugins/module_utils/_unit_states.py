# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The node's systemd units read once a run (gb10.serving.unit_states): what each role's "enable and start" would
change nothing of.

A converge with nothing to change ran one ``ansible.builtin.systemd_service`` module run a role to enable and start a
unit that already was (earlyoom, the fabric firewall, HAProxy, keepalived, the exporter, Prometheus: about 0.6 s
each on the simulation, docs/converge-cost.md). Two systemctl calls list every unit's state and every unit file's
state; a role skips its start where the unit is active and enabled. Pure functions over systemctl's own output, so
they are tested on real outputs without systemd.
"""

from __future__ import annotations

# systemctl list-units --all --plain --no-legend --no-pager --full: UNIT LOAD ACTIVE SUB DESCRIPTION...
LIST_UNITS = ("list-units", "--all", "--plain", "--no-legend", "--no-pager", "--full")
# systemctl list-unit-files --no-legend --no-pager --full: UNIT-FILE STATE [VENDOR-PRESET] (systemd 245 and later)
LIST_UNIT_FILES = ("list-unit-files", "--no-legend", "--no-pager", "--full")
# systemctl show of the units whose current run is asked for: Id=... InvocationID=... blocks, a blank line between
SHOW_INVOCATIONS = ("show", "--no-pager", "--property=Id,InvocationID", "--")


def parse_units(text):
    """{unit: {load, active, sub}} from ``systemctl list-units`` (LIST_UNITS); a line that is no unit's is skipped."""
    units = {}
    for line in text.splitlines():
        fields = line.split(None, 4)
        if len(fields) >= 4 and "." in fields[0]:
            units[fields[0]] = {"load": fields[1], "active": fields[2], "sub": fields[3]}
    return units


def parse_unit_files(text):
    """{unit file: state} from ``systemctl list-unit-files`` (LIST_UNIT_FILES)."""
    files = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and "." in fields[0]:
            files[fields[0]] = fields[1]
    return files


def parse_invocations(text):
    """{unit: its current run's InvocationID (empty when it has none: never started, or stopped)} from
    ``systemctl show`` (SHOW_INVOCATIONS)."""
    found, unit = {}, None
    for line in text.splitlines():
        key, _sep, value = line.partition("=")
        if key == "Id":
            unit = value
            found[unit] = ""
        elif key == "InvocationID" and unit is not None:
            found[unit] = value
    return found


def unit_states(units, files, invocations=None):
    """Every unit either lists: {unit: {load, active, sub, file_state}}; a unit systemd has not loaded is
    ``inactive``/``dead`` with its file's state, one with no file ``file_state`` empty. A unit of ``invocations``
    ({unit: InvocationID}) also has ``invocation``, and is listed even where neither list names it."""
    invocations = invocations or {}
    states = {}
    for name in sorted(set(units) | set(files) | set(invocations)):
        unit = units.get(name, {"load": "", "active": "inactive", "sub": "dead"})
        states[name] = dict(unit, file_state=files.get(name, ""))
        if name in invocations:
            states[name]["invocation"] = invocations[name]
    return states


def up(states):
    """The units an enable-and-start would change nothing of: active, their file enabled, sorted."""
    return sorted(name for name, s in states.items() if s["active"] == "active" and s["file_state"] == "enabled")
