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

Pure functions over plain data (no Ansible import); ``plugins/modules/lockstep_state.py`` gathers the inputs.
"""

from __future__ import annotations

import functools
import posixpath
import re

VERDICT_COVERED = "covered"
VERDICT_PENDING_REBOOT = "pending-reboot"
VERDICT_EXPOSED = "exposed"

# dpkg "Status" states whose files are on disk (a kernel in one of them is bootable, a module loadable).
_ON_DISK_STATES = frozenset({"installed", "triggers-pending", "triggers-awaited"})
# A kernel release: <upstream>-<abi number>-<flavour>, e.g. 6.17.0-1014-nvidia or 6.17.0-1014-nvidia-64k.
_RELEASE_RE = re.compile(r"^(?P<abi>[0-9]+\.[0-9]+\.[0-9]+-[0-9]+)-(?P<flavour>[a-z0-9][a-z0-9.+-]*)$")
_IMAGE_RE = re.compile(r"^linux-image-(?:unsigned-)?(?P<release>[0-9][^\s]*)$")
_NVIDIA_KO_RE = re.compile(r"^nvidia\.ko(?:\.(?:zst|xz|gz|bz2|lz4))?$")
_DEP_RE = re.compile(
    r"^\s*(?P<name>[a-z0-9][a-z0-9+.-]*)(?::[a-z0-9-]+)?\s*(?:\((?P<op><<|<=|=|>=|>>)\s*(?P<ver>[^)\s]+)\s*\))?"
)


# --------------------------------------------------------------------------------------------------------------
# Debian version ordering (deb-version(7)); dpkg --compare-versions without forking dpkg.
# --------------------------------------------------------------------------------------------------------------
def _char_order(char):
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_fragment(left, right):
    """Compare one upstream or revision part the way dpkg does (alternating non-digit and digit runs)."""
    i = j = 0
    while i < len(left) or j < len(right):
        first_diff = 0
        while (i < len(left) and not left[i].isdigit()) or (j < len(right) and not right[j].isdigit()):
            lc = _char_order(left[i]) if i < len(left) and not left[i].isdigit() else 0
            rc = _char_order(right[j]) if j < len(right) and not right[j].isdigit() else 0
            if lc != rc:
                return -1 if lc < rc else 1
            i += 1
            j += 1
        while i < len(left) and left[i] == "0":
            i += 1
        while j < len(right) and right[j] == "0":
            j += 1
        while i < len(left) and left[i].isdigit() and j < len(right) and right[j].isdigit():
            if not first_diff:
                first_diff = ord(left[i]) - ord(right[j])
            i += 1
            j += 1
        if i < len(left) and left[i].isdigit():
            return 1
        if j < len(right) and right[j].isdigit():
            return -1
        if first_diff:
            return -1 if first_diff < 0 else 1
    return 0


def _split_version(version):
    version = version.strip()
    epoch = 0
    if ":" in version:
        head, version = version.split(":", 1)
        epoch = int(head) if head.isdigit() else 0
    if "-" in version:
        upstream, revision = version.rsplit("-", 1)
    else:
        upstream, revision = version, ""
    return epoch, upstream, revision


def compare_versions(left, right):
    """-1, 0 or 1 as Debian version ``left`` sorts before, equal to, or after ``right``."""
    l_epoch, l_up, l_rev = _split_version(left)
    r_epoch, r_up, r_rev = _split_version(right)
    if l_epoch != r_epoch:
        return -1 if l_epoch < r_epoch else 1
    return _compare_fragment(l_up, r_up) or _compare_fragment(l_rev, r_rev)


_version_key = functools.cmp_to_key(compare_versions)


# --------------------------------------------------------------------------------------------------------------
# Parsers for what the node prints.
# --------------------------------------------------------------------------------------------------------------
# The dpkg-query -W format parse_dpkg_query reads.
DPKG_QUERY_FORMAT = "${Package} ${Version} ${Status}\n"


def parse_dpkg_query(text):
    """Parse ``dpkg-query -W -f='${Package} ${Version} ${Status}\\n'`` output.

    Returns ``{name: {"name", "version", "want", "error", "state", "on_disk", "held"}}``. Architecture
    qualifiers (``pkg:arm64``) are dropped. Lines of packages known to dpkg but without a version (``not-installed``)
    are kept with ``on_disk`` false so callers can tell "absent" from "unknown".
    """
    packages = {}
    for raw in text.splitlines():
        fields = raw.split()
        if len(fields) == 4:
            # ${Version} is empty for a package dpkg only remembers (e.g. "unknown ok not-installed").
            name, want, error, state = fields
            version = ""
        elif len(fields) == 5:
            name, version, want, error, state = fields
        else:
            continue
        name = name.split(":", 1)[0]
        packages[name] = {
            "name": name,
            "version": version,
            "want": want,
            "error": error,
            "state": state,
            "on_disk": state in _ON_DISK_STATES,
            "held": want == "hold",
        }
    return packages


def parse_lib_modules(text):
    """Kernel releases from ``ls /lib/modules`` (one per line or whitespace separated), sorted, unique."""
    return sorted({entry.strip().rstrip("/") for entry in text.split() if _RELEASE_RE.match(entry.strip().rstrip("/"))})


def parse_depends(text):
    """Parse a Debian ``Depends`` field into ``[{"name", "op", "version"}]`` (alternatives flattened in order)."""
    result = []
    for clause in text.split(","):
        for alternative in clause.split("|"):
            match = _DEP_RE.match(alternative)
            if match:
                result.append({"name": match.group("name"), "op": match.group("op"), "version": match.group("ver")})
    return result


# --------------------------------------------------------------------------------------------------------------
# Naming (Ubuntu's linux-restricted-modules-nvidia and linux-meta-nvidia conventions).
# --------------------------------------------------------------------------------------------------------------
def split_release(release):
    """``6.17.0-1014-nvidia`` -> ``("6.17.0-1014", "nvidia")``; ``(None, None)`` when it is not a release."""
    match = _RELEASE_RE.match(release or "")
    if not match:
        return None, None
    return match.group("abi"), match.group("flavour")


def modules_package_name(branch, variant, release):
    """The ABI-specific modules package, e.g. ``linux-modules-nvidia-580-open-6.17.0-1014-nvidia``."""
    infix = "-" + variant if variant else ""
    return f"linux-modules-nvidia-{branch}{infix}-{release}"


def modules_metapackage_name(branch, variant, meta_flavour):
    """The modules metapackage, e.g. ``linux-modules-nvidia-580-open-nvidia-hwe-24.04``."""
    infix = "-" + variant if variant else ""
    return f"linux-modules-nvidia-{branch}{infix}-{meta_flavour}"


def image_metapackage_name(meta_flavour):
    """The kernel image metapackage, e.g. ``linux-image-nvidia-hwe-24.04``."""
    return f"linux-image-{meta_flavour}"


def modules_target_release(depends, branch, variant):
    """The kernel release a modules metapackage targets, read from its ``Depends`` (text or parsed list)."""
    if isinstance(depends, str):
        depends = parse_depends(depends)
    prefix = modules_package_name(branch, variant, "")
    for dep in depends:
        release = dep["name"][len(prefix) :] if dep["name"].startswith(prefix) else ""
        if split_release(release)[0]:
            return release
    return None


def image_target_release(depends):
    """The kernel release a ``linux-image-<meta flavour>`` metapackage targets, read from its ``Depends``."""
    if isinstance(depends, str):
        depends = parse_depends(depends)
    for dep in depends:
        match = _IMAGE_RE.match(dep["name"])
        if match and split_release(match.group("release"))[0]:
            return match.group("release")
    return None


# --------------------------------------------------------------------------------------------------------------
# Kernels on the node.
# --------------------------------------------------------------------------------------------------------------
def installed_kernels(packages):
    """``{release: package version}`` for every ``linux-image-<release>`` whose files are on disk."""
    kernels = {}
    for name, record in packages.items():
        match = _IMAGE_RE.match(name)
        if not match or not record.get("on_disk"):
            continue
        release = match.group("release")
        if not split_release(release)[0]:
            continue
        version = record.get("version", "")
        if release not in kernels or compare_versions(version, kernels[release]) > 0:
            kernels[release] = version
    return kernels


def next_boot_kernel(kernels):
    """The release the next boot takes: the highest installed kernel (DGX Spark boots the highest).

    Ordered by the image package's Debian version, ties (two flavours of one ABI) broken by the release string in
    Debian version ordering. ``None`` when no kernel image is installed.
    """
    if not kernels:
        return None
    return max(kernels, key=lambda release: (_version_key(kernels[release]), _version_key(release)))


def nvidia_module_paths(relative_paths):
    """The ``nvidia.ko*`` files among paths relative to ``/lib/modules/<release>``.

    Accepted where Ubuntu's prebuilt packages (``kernel/nvidia-<branch>[-open]/``) and DKMS (``updates/dkms/``)
    put them, plus ``updates/`` and ``extra/``; any compression suffix kmod understands.
    """
    found = []
    for path in relative_paths:
        path = path.lstrip("/")
        directory, base = posixpath.split(path)
        if not _NVIDIA_KO_RE.match(base):
            continue
        parts = directory.split("/") if directory else []
        if not parts:
            continue
        if parts[0] in ("updates", "extra") or (
            parts[0] == "kernel" and len(parts) > 1 and parts[1].startswith("nvidia")
        ):
            found.append(path)
    return sorted(found)


def release_sort(releases):
    """Releases in Debian version order."""
    return sorted(releases, key=_version_key)


# --------------------------------------------------------------------------------------------------------------
# The verdict.
# --------------------------------------------------------------------------------------------------------------
def lockstep_verdict(
    running,
    packages,
    module_files,
    modules_meta_depends=None,
    image_meta_depends=None,
    branch="580",
    variant="open",
    meta_flavour="nvidia-hwe-24.04",
    node="this node",
):
    """Decide whether the running kernel and the next-boot kernel have ``nvidia.ko``.

    ``running``: the running kernel release (``uname -r`` on the node; in a container that is the *host's* kernel,
    so callers override it). ``packages``: :func:`parse_dpkg_query` output. ``module_files``:
    ``{release: [paths relative to /lib/modules/<release>]}`` for every directory under ``/lib/modules``.
    ``modules_meta_depends`` / ``image_meta_depends``: the metapackages' ``Depends`` text (``None`` when not
    installed).

    Direction-aware: a next-boot kernel that is covered but differs from the running one is ``pending-reboot`` (a
    warning, the fix is the reboot), whatever the running kernel's own state on disk; a next-boot kernel without
    ``nvidia.ko`` is ``exposed`` (a failure naming the package to install), and so is a running kernel without it
    when the next boot would take the same kernel again.
    """
    kernels = installed_kernels(packages)
    covered = {release: nvidia_module_paths(files) for release, files in module_files.items()}
    covered = {release: paths for release, paths in covered.items() if paths}
    next_boot = next_boot_kernel(kernels) or running
    modules_target = modules_target_release(modules_meta_depends or "", branch, variant)
    image_target = image_target_release(image_meta_depends or "")
    modules_meta = modules_metapackage_name(branch, variant, meta_flavour)
    image_meta = image_metapackage_name(meta_flavour)
    running_covered = running in covered
    next_covered = next_boot in covered
    warnings = []

    if modules_target and image_target and modules_target != image_target:
        warnings.append(
            f"on {node}: {image_meta} targets kernel {image_target} but {modules_meta} targets {modules_target}: "
            "the two metapackages are out of step "
            "(a phased update moved one without the other); keep both held at one ABI"
        )
    for label, release in (("running", running), ("next-boot", next_boot)):
        if not modules_target or not release or release == modules_target:
            continue
        if label == "next-boot" and release == running:
            continue
        direction = "ahead of" if compare_versions(release, modules_target) > 0 else "behind"
        # A running kernel behind the target is the ordinary "upgraded, not rebooted" case: no warning of its own.
        if direction == "ahead of" or label == "next-boot":
            warnings.append(
                f"on {node}: the {label} kernel {release} is {direction} the kernel {modules_target} that "
                f"{modules_meta} targets (seed 004: a pinpoint "
                "kernel ahead of the metapackages looks healthy to a metapackage-only check)"
            )

    missing_package = None
    if not next_covered:
        verdict = VERDICT_EXPOSED
        missing_package = modules_package_name(branch, variant, next_boot)
        where = "the running kernel and the next boot take" if next_boot == running else "the next boot takes"
        message = (
            "EXPOSED on {node}: {where} kernel {nb}, and /lib/modules/{nb} holds no nvidia.ko, so the GPU "
            "driver will not load (nvidia-container-cli: 'nvml error: driver not loaded'). Running {run}; {mod} "
            "targets {mt}. Fix: install {pkg} (same version as the other {branch}-{variant} modules), or remove "
            "linux-image-{nb} so the next boot takes a covered kernel ({cov}); do not reboot before that."
        ).format(
            node=node,
            where=where,
            nb=next_boot,
            run=running,
            mod=modules_meta,
            mt=modules_target or "nothing (not installed)",
            pkg=missing_package,
            branch=branch,
            variant=variant,
            cov=", ".join(release_sort(covered)) or "none",
        )
    elif next_boot != running:
        verdict = VERDICT_PENDING_REBOOT
        detail = (
            ""
            if running_covered
            else f" The running kernel's own /lib/modules/{running} holds no nvidia.ko (removed, or never there)."
        )
        message = (
            "PENDING REBOOT on {node}: running kernel {run}, the next boot takes {nb}, which has nvidia.ko "
            "({paths}). Upgraded but not yet rebooted: reboot the node (drained) to finish.{detail}"
        ).format(node=node, run=running, nb=next_boot, paths=", ".join(covered[next_boot]), detail=detail)
    else:
        verdict = VERDICT_COVERED
        paths = ", ".join(covered[running])
        message = (
            f"COVERED on {node}: kernel {running} runs, the next boot takes it again, and it has nvidia.ko ({paths})."
        )

    return {
        "verdict": verdict,
        "ok": verdict != VERDICT_EXPOSED,
        "message": message,
        "warnings": warnings,
        "running_kernel": running,
        "running_abi": split_release(running)[0],
        "running_covered": running_covered,
        "next_boot_kernel": next_boot,
        "next_boot_covered": next_covered,
        "modules_meta_target": modules_target,
        "image_meta_target": image_target,
        "installed_kernels": release_sort(kernels),
        "covered_kernels": release_sort(covered),
        "nvidia_modules": {release: covered[release] for release in release_sort(covered)},
        "missing_package": missing_package,
    }


# apt-get prints dpkg's own failure (a maintainer script, a dependency problem) on its stdout, after the whole
# transcript of what it fetched and unpacked; its stderr holds only "E: Sub-process /usr/bin/dpkg returned an error
# code (1)", plus a "W:" line per package when two sources carry one version with other hashes.
_DPKG_FAILURE = re.compile(r"^(dpkg: (error|dependency problems)|Errors were encountered while processing:)")
_APT_NOISE = re.compile(r"^(W: |debconf: )")


def apt_failure_text(stdout, stderr, msg="", limit=800):
    """The part of a failed apt-get an operator needs: dpkg's errors from the first on, then apt's own E: lines.

    Without a dpkg error (apt refused before dpkg ran) it is apt's stderr without its warnings, else ``msg``. The
    last ``limit`` characters: the cause is at the end.
    """
    out = (stdout or "").splitlines()
    first = next((i for i, line in enumerate(out) if _DPKG_FAILURE.match(line)), len(out))
    errors = [line for line in (stderr or "").splitlines() if line.strip() and not _APT_NOISE.match(line)]
    text = "\n".join(out[first:] + errors).strip() or (msg or "").strip()
    return text[-limit:]


# apt-get --simulate's transcript: "Inst name [installed] (target release [arch])", "Remv name [installed]".
_SIMULATED = re.compile(
    r"^(?P<action>Inst|Remv) (?P<package>\S+)(?: \[(?P<installed>[^\]]+)\])?(?: \((?P<target>\S+))?"
)


def simulated_moves(stdout):
    """What ``apt-get install --simulate`` of the set would do: one {package, action, installed, target} per
    ``Inst``/``Remv`` line (``installed`` None for a new package, ``target`` None for a removal); [] when the set is
    in place.

    apt-get honours a name=version given on its command line over every pin, as the install (run after the role
    wrote the target's pins) does. The apt module's check mode adds its own 1001 pin for the version instead, which
    ties with the 1001 pin of the set installed now: going back to an older set it answers "no available
    installation candidate" for a version the repository publishes.
    """
    moves = []
    for line in (stdout or "").splitlines():
        match = _SIMULATED.match(line)
        if match:
            moves.append(
                {
                    "package": match["package"],
                    "action": "remove" if match["action"] == "Remv" else "install",
                    "installed": match["installed"],
                    "target": match["target"],
                }
            )
    return moves


def hold_changes(packages, names, held=True):
    """Which of ``names`` dpkg must mark ``hold`` (``held``) or ``install`` (not ``held``): (unknown, changes).

    ``packages`` is :func:`parse_dpkg_query` output for ``names``. ``unknown`` lists the names dpkg has no record of
    or that are not on disk (``dpkg --set-selections`` only warns about, and skips, a name it does not know, which
    would leave that package unheld without an error). ``changes`` is ``[(name, before, after)]`` in ``names`` order,
    each name once, with ``before``/``after`` the selections ``hold`` or ``install``.
    """
    want = "hold" if held else "install"
    unknown, changes, seen = [], [], set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        package = packages.get(name)
        if not package or not package["on_disk"]:
            unknown.append(name)
            continue
        before = "hold" if package["held"] else "install"
        if before != want:
            changes.append((name, before, want))
    return unknown, changes
