# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The verdict: are the running kernel and the one the next boot takes covered by ``nvidia.ko`` (seed 004)?"""

from __future__ import annotations

from .debversion import compare_versions, release_sort
from .kernels import (
    image_target_release,
    installed_kernels,
    modules_target_release,
    next_boot_kernel,
    nvidia_module_paths,
)
from .naming import image_metapackage_name, modules_metapackage_name, modules_package_name, split_release

VERDICT_COVERED = "covered"

VERDICT_PENDING_REBOOT = "pending-reboot"

VERDICT_EXPOSED = "exposed"


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
