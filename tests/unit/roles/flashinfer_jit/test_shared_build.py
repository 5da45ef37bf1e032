# Copyright: gb10.serving maintainers
# Apache-2.0
"""Built once per cluster (issue 17): the stand-in's module built on one "node", sent by the real weights_transfer.py
(--layout files) over 127.0.0.1 to a second node's empty cache at the same path, and the serving call there finds
ninja with nothing to do (the rebuild-at-profiling pitfall: seed 004, the CUTLASS saga)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import rebuild_findings
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_files import file_sha256
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import STAMP_NAME
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import cache_state
from ansible_collections.gb10.serving.plugins.modules import flashinfer_jit_share_manifest as share_manifest

REPO = Path(__file__).resolve().parents[4]
# The stand-in's prebuild and serving call, as tests/unit/sim/test_flashinfer_standin.py runs them.
_SPEC = importlib.util.spec_from_file_location(
    "_standin", REPO / "tests" / "unit" / "sim" / "test_flashinfer_standin.py"
)
_STANDIN = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_STANDIN)
prebuild, serving_call = _STANDIN.prebuild, _STANDIN.serving_call
SCRIPT = REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py"
TOKEN = "flashinfer-share-token-0123456789abcdef"
ARCH = ".cache/flashinfer/0.6.18/121a"
BUILD = f"{ARCH}/cached_ops/fused_moe_120"

pytestmark = pytest.mark.skipif(
    not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc (apt-get install ninja-build gcc)"
)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def transfer(state, command, root, *args):
    argv = [
        sys.executable,
        str(SCRIPT),
        command,
        "--layout=files",
        f"--root={root}",
        f"--manifest={state / 'manifest.json'}",
        f"--status={state / f'status-{command}.json'}",
        f"--token-file={state / 'share.token'}",
        "--timeout=30",
        *args,
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def state_folder(path):
    path.mkdir()
    (path / "share.token").write_text(TOKEN + "\n")
    (path / "share.token").chmod(0o600)
    return path


def copy(giver_root, receiver_root, state, *receive_args):
    port = free_port()
    serve = transfer(state, "serve", giver_root, "--bind=127.0.0.1", f"--port={port}", "--allow=127.0.0.1")
    receive = transfer(
        state,
        "receive",
        receiver_root,
        "--source=127.0.0.1",
        f"--port={port}",
        "--local-address=127.0.0.1",
        f"--commit-last={STAMP_NAME}",
        *receive_args,
    )
    out, err = receive.communicate(timeout=60)
    serve_out, serve_err = serve.communicate(timeout=60)
    return receive.returncode, out + err + serve_out + serve_err


def run_manifest(workspace, dest):
    """The share manifest module on the builder, its cache at the container path (workspace_base == cache_dir)."""
    return share_manifest.run(
        {
            "node": "spark-1",
            "cache_dir": str(workspace),
            "workspace_base": str(workspace),
            "flashinfer_version": "0.6.18",
            "compute_capability": "12.1",
            "dest": str(dest),
        },
        check_mode=False,
    )


def manifest_of(workspace, state):
    result = run_manifest(workspace, state / "manifest.json")
    assert not result["problems"], result["problems"]
    return json.loads((state / "manifest.json").read_text())


def test_pitfall_rebuild_at_profiling_received_module_loads_with_no_work_to_do(tmp_path):
    """The receiver's cache is at the builder's path (the same container path on every node); after the copy its
    serving call runs ninja with nothing to do, .ninja_log and the .so unchanged, the stamp the builder's."""
    workspace = tmp_path / "workspace"
    rc, built, out = prebuild(workspace)
    assert (rc, built["status"]) == (0, "built"), out
    state = state_folder(tmp_path / "state")
    manifest = manifest_of(workspace, state)
    assert (
        "cached_ops/fused_moe_120/.ninja_deps" in manifest and "cached_ops/fused_moe_120/fused_moe_120.so" in manifest
    )
    assert any(path.startswith("generated/cutlass_instantiations/120/") for path in manifest), sorted(manifest)
    # The builder's cache moves aside; the receiver's, empty, takes its path.
    giver = tmp_path / "giver"
    workspace.rename(giver)
    workspace.mkdir()
    rc, out = copy(giver / ARCH, workspace / ARCH, state)
    assert rc == 0, out
    stamp = json.loads((workspace / BUILD / STAMP_NAME).read_text())
    assert stamp == json.loads((giver / BUILD / STAMP_NAME).read_text())
    library = file_sha256(str(workspace / BUILD / "fused_moe_120.so"))
    present, reason = cache_state(
        {"image_digest": stamp["image_digest"], "flashinfer_version": "0.6.18", "compute_capability": "12.1"},
        stamp,
        library,
        file_sha256(str(workspace / BUILD / "build.ninja")),
    )
    assert present, reason

    proc = serving_call(workspace)
    assert "ninja: no work to do." in proc.stdout, proc.stdout + proc.stderr
    log = (workspace / BUILD / ".ninja_log").read_text()
    assert rebuild_findings(stamp, log, file_sha256(str(workspace / BUILD / "fused_moe_120.so"))) == []


def test_pitfall_rebuild_at_profiling_fresh_mtimes_would_rebuild(tmp_path):
    """Why the copy keeps mtimes: the same bytes with fresh mtimes on the generated sources make ninja rebuild."""
    workspace = tmp_path / "workspace"
    assert prebuild(workspace)[0] == 0
    # Newer than every output, as a copy that wrote fresh times would leave them (one second later is not: the
    # outputs were written after the sources).
    fresh = time.time_ns() + 3600 * 10**9
    for source in (workspace / ARCH / "generated").rglob("*.c"):
        os.utime(source, ns=(fresh, fresh))
    proc = serving_call(workspace)
    assert "ninja: no work to do." not in proc.stdout


def test_receiver_refuses_content_that_is_not_the_manifest(tmp_path):
    workspace = tmp_path / "workspace"
    assert prebuild(workspace)[0] == 0
    state = state_folder(tmp_path / "state")
    manifest_of(workspace, state)
    giver = tmp_path / "giver"
    workspace.rename(giver)
    (giver / BUILD / "fused_moe_120.so").write_bytes(b"\0" * (giver / BUILD / "fused_moe_120.so").stat().st_size)
    receiver = tmp_path / "receiver"
    rc, out = copy(giver / ARCH, receiver / ARCH, state)
    assert rc == 5, out
    assert "sha256" in out
    # Nothing was put in place: no stamp, no partial file.
    assert not (receiver / BUILD / STAMP_NAME).exists()
    assert not list(receiver.rglob("*.gb10-incomplete"))


def test_manifest_refuses_a_module_whose_stamp_does_not_hold(tmp_path):
    workspace = tmp_path / "workspace"
    assert prebuild(workspace)[0] == 0
    (workspace / BUILD / "build.ninja").write_text("# rewritten by another environment\n")
    result = run_manifest(workspace, tmp_path / "manifest.json")
    assert any("build.ninja sha256" in problem for problem in result["problems"]), result["problems"]
    assert not (tmp_path / "manifest.json").exists()
