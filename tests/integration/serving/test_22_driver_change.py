# Copyright: gb10.serving maintainers
# Apache-2.0
"""The driver path of playbooks/rolling_upgrade.yml on the simulation (issue 19 item 8).

The fake NVIDIA repository (sim/fake_nvidia_packages) publishes two complete sets side by side: A (kernel
6.17.0-1014, driver 580.142, the inventory's pins) and C (kernel 6.17.0-1015, driver 580.150, whose driver depends on
nvidia-dkms-580-open as Ubuntu's does). The sim's restart command records the kernel the next boot takes, where the
inventory's nvidia_lockstep_running_kernel reads it, so a node "boots into" its target kernel.

First a rolling upgrade of both nodes to set C under load (pin, install, hold, pre-reboot gate, restart, kernel
covered after it, on each node, no failed request), then back to set A. Then set C plus a package whose postinst fails
(gb10-sim-postinst-fails): spark-1 fails in its install step, its old pins and holds are put back, it stays drained
and is not restarted, spark-2 is untouched; then spark-1 is recovered. Each test leaves the site on set A, serving.
"""

from __future__ import annotations

from test_20_rolling_upgrade import output, steady_load

PLAYBOOK = "playbooks/rolling_upgrade.yml"
NODES = ("spark-1", "spark-2")
PREFERENCES = "/etc/apt/preferences.d/gb10-nvidia-lockstep.pref"
BOOTED = "/var/lib/gb10-sim/booted-kernel"
SET_A = {"release": "6.17.0-1014-nvidia", "driver": "580.142-0ubuntu0.24.04.1"}
SET_C = {
    "nvidia_lockstep_kernel_abi": "6.17.0-1015",
    "nvidia_lockstep_kernel_version": "6.17.0-1015.15",
    "nvidia_lockstep_modules_version": "6.17.0-1015.15+1",
    "nvidia_lockstep_driver_version": "580.150-0ubuntu0.24.04.1",
}
RELEASE_C = "6.17.0-1015-nvidia"
# Going back, set C's kernel goes first: the next boot takes the highest installed kernel, so the pre-reboot gate
# refuses a set whose kernel is older than one still installed. Its metapackages go with it: they are held and
# depend on it, and apt refuses to break them (checked with apt-get -s on the fake repository); the upgrade back
# installs them again at set A's versions. The same list the role's failure message gives.
ONLY_C = [
    f"linux-image-{RELEASE_C}",
    f"linux-modules-{RELEASE_C}",
    f"linux-headers-{RELEASE_C}",
    "linux-nvidia-6.17-headers-6.17.0-1015",
    f"linux-modules-nvidia-580-open-{RELEASE_C}",
    "linux-nvidia-hwe-24.04",
    "linux-image-nvidia-hwe-24.04",
    "linux-headers-nvidia-hwe-24.04",
    "linux-modules-nvidia-580-open-nvidia-hwe-24.04",
]
# The steps of the driver path, in order, as the run's task names.
STEPS = (
    "Pin every package of the set to its exact version and let every node take every phased update at once",
    "Install exactly the pinned kernel, modules and driver versions",
    "Hold every package of the set",
    "Refuse to reboot into a kernel without nvidia.ko",
    "Restart the node with the site's command",
    "Check that the running and next-boot kernels have nvidia.ko",
)


def node_state(sim, node):
    """What the node's dpkg, apt preferences and simulated boot say."""
    return {
        "driver": sim.exec(node, "dpkg-query", "-W", "-f", "${Version}", "nvidia-driver-580-open").stdout.strip(),
        "dkms": sim.exec(node, "dpkg-query", "-W", "-f", "${Version}", "nvidia-dkms-580-open").stdout.strip(),
        "held": set(sim.exec(node, "apt-mark", "showhold").stdout.split()),
        "pins": sim.exec(node, "cat", PREFERENCES, check=False).stdout,
        "booted": sim.exec(node, "cat", BOOTED, check=False).stdout.strip() or SET_A["release"],
        "ko": sim.exec(node, "sh", "-c", "ls /lib/modules/*/kernel/nvidia-580-open/nvidia.ko").stdout.split(),
    }


def step_order(runner, host):
    """The index of the last successful event of each step on ``host``, in STEPS order (a missing step is absent).

    The last: the role's own verify also runs before the gate (pending reboot); the one that counts follows the
    restart."""
    seen = {}
    for index, event in enumerate(runner.events):
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("host") == host and data.get("task") in STEPS:
            seen[data["task"]] = index
    return {step: seen[step] for step in STEPS if step in seen}


def back_to_set_a(sim, nodes):
    """Remove set C's kernel (and any half-installed test package) on ``nodes``, then roll the site back to set A."""
    for node in nodes:
        sim.exec(node, "apt-get", "purge", "-y", "--allow-change-held-packages", "gb10-sim-postinst-fails", *ONLY_C)
        # What the failed install left unpacked and unconfigured (nothing after a clean run).
        sim.exec(node, "dpkg", "--configure", "-a")
    sim.playbook(PLAYBOOK)
    sim.wait_all_ready()
    for node in NODES:
        state = node_state(sim, node)
        assert (state["driver"], state["booted"]) == (SET_A["driver"], SET_A["release"]), (node, state)


def test_driver_change_rolling_upgrade_boots_each_node_into_the_target_kernel(served_sim):
    sim = served_sim
    try:
        with steady_load(sim, "driver and kernel set 1014/580.142 -> 1015/580.150"):
            runner = sim.playbook(PLAYBOOK, extravars=SET_C)
        text = output(runner)
        for node in NODES:
            order = step_order(runner, node)
            assert list(order) == list(STEPS), f"{node}: steps {list(order)}"
            assert sorted(order.values()) == list(order.values()), f"{node}: steps out of order {order}"
            state = node_state(sim, node)
            assert state["booted"] == RELEASE_C, (node, state)
            assert state["driver"] == state["dkms"] == SET_C["nvidia_lockstep_driver_version"], (node, state)
            assert f"/lib/modules/{RELEASE_C}/kernel/nvidia-580-open/nvidia.ko" in state["ko"], (node, state)
            assert {f"linux-modules-nvidia-580-open-{RELEASE_C}", "nvidia-dkms-580-open"} <= state["held"], state
            assert f"Pin: version {SET_C['nvidia_lockstep_driver_version']}" in state["pins"], state["pins"]
            assert f"{node} upgraded and ready" in text, f"no figures for {node}"
        assert sim.all_ready()
    finally:
        back_to_set_a(sim, NODES)


def test_failure_between_install_and_hold_keeps_the_old_set_held_and_the_node_drained(served_sim):
    sim = served_sim
    before = {node: node_state(sim, node) for node in NODES}
    failing = {**SET_C, "nvidia_lockstep_extra_packages": {"gb10-sim-postinst-fails": "1.0"}}
    try:
        with steady_load(sim, "driver set whose install fails on spark-1"):
            runner = sim.playbook(PLAYBOOK, extravars=failing, check=False)
            states = sim.backend_states()
        text = output(runner)
        assert runner.rc != 0, "the install with a failing postinst went through"
        assert "nvidia_lockstep on spark-1" in text and "Install exactly the pinned kernel" in text, text[-3000:]
        assert "gb10-sim-postinst-fails" in text, text[-3000:]
        assert "run the same command again" in text and "was not restarted" in text, text[-3000:]
        assert "spark-1 stays DRAINED" in text and "resume with the same command" in text, text[-3000:]
        first = node_state(sim, "spark-1")
        # The old pins and the old holds are back, the node kept its kernel and was not restarted.
        assert first["pins"] == before["spark-1"]["pins"], first["pins"]
        assert first["held"] == before["spark-1"]["held"], first["held"] ^ before["spark-1"]["held"]
        assert first["booted"] == SET_A["release"], first
        assert "Hold every package of the set" not in step_order(runner, "spark-1")
        assert states["spark-1"][1] != 0, f"spark-1 is not drained: {states}"
        assert states["spark-2"] == (2, 0), f"spark-2 does not serve: {states}"
        assert node_state(sim, "spark-2") == before["spark-2"], "spark-2 was touched after spark-1 failed"
    finally:
        back_to_set_a(sim, ["spark-1"])
