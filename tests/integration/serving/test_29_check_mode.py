# Copyright: gb10.serving maintainers
# Apache-2.0
"""Check mode that tells the truth (issue 37, item 3): `site.yml --check --diff` on the served site.

Here, after the rolling upgrades (test_20, test_22), the drains and the watchdog's restart (test_25, test_27), the
site is converged, and one unit file is edited by hand on one node. One check run must then end rc=0 and report
exactly that file (its diff shown, and nothing else in it: its rendering is the file as it was before the edit) and
the restart of what it drives, nothing on the other node, and change nothing (the file still drifted afterwards). So
the converged site reports no drift of its own (an upgrade that leaves its own units, as the rolling upgrade once
wrote its request timeout into the watchdog units, shows here as a second file or a second difference). The file is
put back byte for byte and proven so. One check run (~80-100 s on 2 cores: two cost make test a minute and a half
more for the same claims); nothing is restarted.
"""

from __future__ import annotations

import hashlib

NODES = ("spark-1", "spark-2")
DRIFTED = "spark-2"
HAND_EDIT = "# edited by hand on the node (test_29_check_mode): check mode must show this line\n"


def changed_per_host(runner):
    """{host: changed count} of the PLAY RECAP (ansible-runner's stats), every node of the play named."""
    changed = (runner.stats or {}).get("changed", {})
    return {node: changed.get(node, 0) for node in NODES}


def changed_results(runner):
    """(host, task, item label, diff headers) of every result that reported a change, loop items one by one."""
    found = []
    for event in runner.events:
        if event.get("event") not in ("runner_on_ok", "runner_item_on_ok"):
            continue
        data = event["event_data"]
        res = data.get("res", {})
        if not res.get("changed") or (event["event"] == "runner_on_ok" and res.get("results")):
            continue  # a loop's summary: its items are counted one by one
        diffs = res.get("diff") or []
        diffs = diffs if isinstance(diffs, list) else [diffs]
        # A template's before_header is the file on the node (its after_header the template on the controller).
        headers = [d.get("before_header") or "" for d in diffs if isinstance(d, dict) and d.get("before_header")]
        label = res.get("_ansible_item_label", res.get("item", ""))
        found.append((data.get("host"), data.get("task"), str(label), headers, diffs))
    return found


def shown(found):
    return "\n".join(f"  {host} | {task} [{label}] {headers}" for host, task, label, headers, _diffs in found)


def check_run(sim):
    runner = sim.playbook("site.yml", cmdline="--check --diff")
    return runner, changed_per_host(runner), changed_results(runner)


def sha256_on(sim, node, path):
    return hashlib.sha256(sim.exec(node, "cat", path).stdout.encode()).hexdigest()


def test_check_mode_on_the_converged_site_reports_exactly_a_hand_edited_unit_and_changes_nothing(served_sim):
    sim = served_sim
    # The watchdog of the topology the site serves (its timer enabled): a topology switch (test_90, which runs
    # before) leaves the retired topology's units on disk, disabled, and site.yml does not manage those.
    timers = sim.exec(
        DRIFTED, "systemctl", "list-unit-files", "--state=enabled", "--no-legend", "gb10-watchdog-*.timer"
    ).stdout.split()
    units = [f"/etc/systemd/system/{name.removesuffix('.timer')}.service" for name in timers if name.endswith(".timer")]
    assert units, f"{DRIFTED} has no enabled watchdog: the test proves nothing"
    unit = sorted(units)[0]
    original = sim.exec(DRIFTED, "cat", unit).stdout
    original_sha = hashlib.sha256(original.encode()).hexdigest()
    try:
        sim.exec(DRIFTED, "sh", "-c", f"cat >> {unit}", input=HAND_EDIT)
        drifted_sha = sha256_on(sim, DRIFTED, unit)
        assert drifted_sha != original_sha

        runner, changed, found = check_run(sim)
        print(f"\nsite.yml --check --diff with {unit} edited on {DRIFTED}: rc={runner.rc}, changed per node {changed}")
        print(shown(found))
        assert runner.rc == 0
        others = [item for item in found if item[0] != DRIFTED]
        assert not others, f"check mode reports changes on nodes nobody touched:\n{shown(others)}"
        # The file's write, with its diff (the hand-edited line taken out), is the only file reported ...
        writes = [item for item in found if item[3]]
        assert [headers for _h, _t, _l, headers, _d in writes] == [[unit]], shown(found)
        before = "".join(str(d.get("before", "")) for d in writes[0][4])
        after = "".join(str(d.get("after", "")) for d in writes[0][4])
        assert HAND_EDIT.strip() in before and HAND_EDIT.strip() not in after, writes[0][4]
        # ... and the hand edit is its only difference: what site.yml renders is the file as it was converged.
        assert after.rstrip("\n") == original.rstrip("\n"), f"{unit} on {DRIFTED} drifted before the edit:\n{after}"
        # ... beside the restart of the watchdog timers that this unit's change notifies (what a real run would do).
        rest = [task for _h, task, _l, headers, _d in found if not headers]
        assert all("watchdog" in task.lower() for task in rest), shown(found)
        # The recap counts a task once, however many of its loop items changed.
        assert changed[DRIFTED] == len({task for _h, task, _l, _hd, _d in found}), (changed, shown(found))
        # Check mode changed nothing: the edit is still on the node.
        assert sha256_on(sim, DRIFTED, unit) == drifted_sha, f"check mode rewrote {unit} on {DRIFTED}"
    finally:
        sim.exec(DRIFTED, "sh", "-c", f"cat > {unit}", input=original)
        sim.exec(DRIFTED, "systemctl", "daemon-reload")
    assert sha256_on(sim, DRIFTED, unit) == original_sha, f"{unit} on {DRIFTED} was not put back"
    sim.wait_all_ready()
