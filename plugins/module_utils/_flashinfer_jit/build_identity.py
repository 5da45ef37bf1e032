# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The build's own identity (issue 17): flashinfer 0.6.18 always runs ninja before loading a JIT module, and ninja
rebuilds every unit whose command changed. So the cache is "present" for a serving process only when the
build.ninja that process writes (generate_ninja_build_for_op of its own environment: CC, CXX, CUDA_HOME,
FLASHINFER_* variables, the arch list, include paths, the cache's container path) is the prebuild's, byte for byte;
and a module prebuilt in the image only when the serving process loads the same one (issue 38 item 4)."""

from __future__ import annotations


def _aot_key(artifacts):
    return sorted((item.get("provider"), item.get("path"), item.get("sha256")) for item in artifacts or [])


NINJA_DIFF_LINES = 40


def sha256_text(text):
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def ninja_log_entries(text):
    """ninja's .ninja_log (v5/v6): one (start_ms, end_ms, output) per unit ninja ran, in the order it ran them."""
    entries = []
    for line in (text or "").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 4 or not fields[0].isdigit() or not fields[1].isdigit():
            continue
        entries.append((int(fields[0]), int(fields[1]), fields[3]))
    return entries


def ninja_log_summary(text):
    """What the stamp keeps of .ninja_log: its line count and sha256, and the slowest unit (the stall yardstick)."""
    entries = ninja_log_entries(text)
    worst = max(entries, key=lambda e: e[1] - e[0], default=None)
    return {
        "ninja_log_lines": len((text or "").splitlines()),
        "ninja_log_sha256": sha256_text(text or ""),
        "worst_unit_seconds": round((worst[1] - worst[0]) / 1000.0, 1) if worst else 0.0,
        "worst_unit": worst[2].rsplit("/", 1)[-1] if worst else "",
        "steps": len(entries),
    }


def ninja_diff(prebuilt_text, serving_text, limit=NINJA_DIFF_LINES):
    """A unified diff (no context) of the prebuild's build.ninja against the serving process's, trimmed to limit."""
    import difflib

    lines = list(
        difflib.unified_diff(
            (prebuilt_text or "").splitlines(),
            (serving_text or "").splitlines(),
            "build.ninja (prebuild)",
            "build.ninja (serving unit)",
            n=0,
            lineterm="",
        )
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more diff lines"]
    return lines


def ninja_identity(node, stamp_data, prebuilt_text, serving_text, serving_aot=None):
    """Is the serving unit's build.ninja the prebuild's? Returns {same, diff, message}.

    stamp_data: the prebuild stamp (its ninja_sha256 is what was built); prebuilt_text: the build.ninja on the node's
    cache (None when missing); serving_text: what generate_ninja_build_for_op gives in the serving unit's environment;
    serving_aot: the prebuilt modules the serving process would load without a build (the entry point's ``aot``).
    flashinfer loads a prebuilt module before it runs ninja (0.7 JitSpecNvcc.try_load), so the prebuilt modules are
    compared first: the stamp's (none for a module the prebuild built) must be the serving process's.
    """
    stamp_data = stamp_data or {}
    stamped_aot, serving_aot = _aot_key(stamp_data.get("aot")), _aot_key(serving_aot)
    if stamped_aot != serving_aot:
        return {"same": False, "diff": [], "message": _aot_message(node, stamp_data, stamped_aot, serving_aot)}
    if stamped_aot:
        paths = ", ".join(path for _provider, path, _sha in stamped_aot)
        return {"same": True, "diff": [], "message": f"{node}: the serving unit loads the prebuilt {paths}"}
    wanted = stamp_data.get("ninja_sha256")
    got = sha256_text(serving_text or "")
    if wanted and got == wanted:
        return {"same": True, "diff": [], "message": f"{node}: the serving unit writes the prebuild's build.ninja"}
    if not wanted:
        why = "the prebuild stamp records no build.ninja sha256 (a stamp from before issue 17)"
    else:
        why = f"sha256 {got[:12]} differs from the prebuild's {wanted[:12]}"
    diff = ninja_diff(prebuilt_text, serving_text) if prebuilt_text is not None else []
    body = [line for line in diff if not line.startswith(("+++", "---", "@@"))]
    changed = max(sum(line[:1] == "-" for line in body), sum(line[:1] == "+" for line in body))
    return {
        "same": False,
        "diff": diff,
        "message": (
            f"{node}: the serving unit would rebuild {stamp_data.get('module', 'the module')} at its first MoE"
            f" forward, beside the weights (seed 004, the CUTLASS saga): the build.ninja its environment writes"
            f" differs from the prebuild's ({why}; {changed} line(s) differ). Every variable that reaches"
            " build.ninja (CC, CXX, CUDA_HOME, FLASHINFER_*, the arch list, the cache's container path) must be"
            " the same for the prebuild and the serving unit: set it in the plan's env of the node (the profile's"
            " env, which both get), not in flashinfer_jit_env or serving_secrets alone. No serving unit was started."
        ),
    }


def _aot_message(node, stamp_data, stamped, serving):
    module = stamp_data.get("module", "the module")
    if not serving:
        what = (
            f"the prebuild found {module} prebuilt in the image ({', '.join(p for _v, p, _s in stamped)}) but the"
            " serving unit's environment does not reach it, so the serving call would build it beside the weights"
            " (seed 004, the CUTLASS saga)"
        )
    elif not stamped:
        what = (
            f"the serving unit would load a prebuilt {module} ({', '.join(p for _v, p, _s in serving)}) that the"
            " prebuild's environment did not see: the module the prebuild built and checked is not the one served"
        )
    else:
        what = f"the serving unit would load other prebuilt modules ({serving}) than the prebuild stamped ({stamped})"
    return (
        f"{node}: {what}. The prebuild and the serving unit must see the same FlashInfer JIT-cache packages and"
        " FLASHINFER_* variables: set them in the plan's env of the node or the image, not in one of the two alone."
        " No serving unit was started."
    )


def rebuild_findings(stamp_data, ninja_log_text, library_sha256):
    """What changed in a module's build folder since its prebuild: [] when nothing was rebuilt.

    A rebuild appends to .ninja_log (one line per unit ninja ran) and replaces the .so; a load with nothing to do
    changes neither.
    """
    stamp_data = stamp_data or {}
    findings = []
    lines = (ninja_log_text or "").splitlines()
    recorded = stamp_data.get("ninja_log_lines")
    if recorded is None:
        return ["the prebuild stamp records no .ninja_log line count (a stamp from before issue 17)"]
    if len(lines) != recorded or sha256_text(ninja_log_text or "") != stamp_data.get("ninja_log_sha256"):
        new = ninja_log_entries("\n".join(lines[recorded:])) if len(lines) > recorded else []
        names = [entry[2].rsplit("/", 1)[-1] for entry in new]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        findings.append(
            f".ninja_log has {len(lines)} lines, {recorded} at the prebuild"
            + (f": {len(new)} unit(s) rebuilt ({shown})" if new else " (rewritten)")
        )
    if library_sha256 is None:
        findings.append(f"{stamp_data.get('module', 'the module')}.so is gone")
    elif library_sha256 != stamp_data.get("library_sha256"):
        findings.append(
            f"{stamp_data.get('module', 'the module')}.so sha256 {library_sha256[:12]}, the prebuild's"
            f" {str(stamp_data.get('library_sha256'))[:12]}"
        )
    return findings
