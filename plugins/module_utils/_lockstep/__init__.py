# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Kernel / NVIDIA kernel-module lockstep: is the kernel that runs, and the one the next boot takes, covered?

DGX OS on GB10 has no DKMS. ``nvidia.ko`` comes only from prebuilt packages named
``linux-modules-nvidia-<branch>-<variant>-<kernel release>`` (for example
``linux-modules-nvidia-580-open-6.17.0-1014-nvidia``), pulled in by a metapackage
``linux-modules-nvidia-<branch>-<variant>-<meta flavour>`` (``...-580-open-nvidia-hwe-24.04``). The kernel
(``linux-image-<release>`` behind ``linux-image-<meta flavour>``) and the modules are separate source packages on
independent phased-update schedules, so a node can hold a kernel without its modules.

Seed 004: a check that compared the two metapackages to each other said "OK" throughout an outage, because a
pinpoint ``linux-image-<release>`` had been installed ahead of both and booted. Everything here therefore
compares *kernels* (the running one, the one the next boot takes, the one the modules metapackage targets) against
what is really on disk under ``/lib/modules/<release>``.

Pure functions over plain data (no Ansible import), one concern a file; callers import the file they need:

- ``debversion.py``: Debian version ordering (dpkg --compare-versions without forking dpkg);
- ``naming.py``: the kernel release and the package names (Ubuntu's naming conventions);
- ``parse.py``: parsers for what the node prints (dpkg-query, ``ls /lib/modules``, a ``Depends`` field);
- ``kernels.py``: the kernels installed, the one the next boot takes, the ones the metapackages target, ``nvidia.ko``;
- ``verdict.py``: covered, pending reboot or exposed (``lockstep_verdict``);
- ``apt.py``: what a failed or simulated apt-get printed;
- ``holds.py``: which names of a package set dpkg must mark ``hold`` or ``install``.

``plugins/modules/lockstep_state.py`` gathers the inputs; ``plugins/modules/package_holds.py`` and
``plugins/filter/nvidia_lockstep.py`` are the other Ansible faces.
"""
