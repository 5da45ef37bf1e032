# Copyright: gb10.serving maintainers
# Apache-2.0
"""The node_files module on a real folder: writes what differs in one run, nothing the second time, nothing in check
mode, and nothing outside its destination."""

from __future__ import annotations

import base64
import importlib
import os

from module_harness import run_main

module = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.node_files")


def _no_commands(_self, argv, **_kwargs):
    raise AssertionError(f"node_files runs no command: {argv}")


def _args(dest, files, **extra):
    listed = [{"path": path, "content": base64.b64encode(data).decode()} for path, data in files.items()]
    return {"dest": str(dest), "files": listed, "mode": "0640", "directory_mode": "0700", **extra}


FILES = {"weights_transfer.py": b"print('x')\n", "_weights/__init__.py": b"", "_weights/manifest.py": b"A = 1\n"}


def test_writes_every_file_then_nothing(tmp_path):
    dest = tmp_path / "state"
    result = run_main(module.main, _args(dest, FILES), _no_commands)
    assert result["changed"] and result["files"] == 3
    assert result["written"] == [f"{dest}/", f"{dest}/_weights/"] + [str(dest / path) for path in FILES]
    assert (dest / "_weights" / "manifest.py").read_bytes() == b"A = 1\n"
    assert oct(os.stat(dest / "weights_transfer.py").st_mode & 0o777) == "0o640"
    assert oct(os.stat(dest / "_weights").st_mode & 0o777) == "0o700"
    again = run_main(module.main, _args(dest, FILES), _no_commands)
    assert again["changed"] is False and again["written"] == []
    assert not [name for name in os.listdir(dest) if name.startswith(".gb10-node-files-")]


def test_check_mode_reports_content_and_mode_and_writes_nothing(tmp_path):
    dest = tmp_path / "state"
    run_main(module.main, _args(dest, FILES), _no_commands)
    os.chmod(dest / "weights_transfer.py", 0o644)
    changed = {**FILES, "_weights/manifest.py": b"A = 2\n"}
    result = run_main(module.main, {**_args(dest, changed), "_ansible_check_mode": True, "_ansible_diff": True}, None)
    assert result["written"] == [str(dest / "weights_transfer.py"), str(dest / "_weights" / "manifest.py")]
    assert result["diff"] == [
        {
            "before_header": str(dest / "_weights" / "manifest.py"),
            "after_header": str(dest / "_weights" / "manifest.py"),
            "before": "A = 1\n",
            "after": "A = 2\n",
        }
    ]
    assert (dest / "_weights" / "manifest.py").read_bytes() == b"A = 1\n"
    assert oct(os.stat(dest / "weights_transfer.py").st_mode & 0o777) == "0o644"


def test_check_mode_on_a_bare_node_makes_no_folder(tmp_path):
    dest = tmp_path / "state"
    result = run_main(module.main, {**_args(dest, FILES), "_ansible_check_mode": True}, _no_commands)
    assert result["changed"] and not dest.exists()


def test_refuses_a_path_outside_its_destination_and_a_src_given_to_the_module(tmp_path):
    result = run_main(module.main, _args(tmp_path / "state", {"../escape.py": b"x"}), _no_commands)
    assert result["failed"] and "is not below" in result["msg"] and not (tmp_path / "escape.py").exists()
    result = run_main(module.main, {**_args(tmp_path, {}), "src": ["x.py"]}, _no_commands)
    assert result["failed"] and "action plugin" in result["msg"]


def test_a_folder_of_the_installed_tree_takes_its_mode_again_dest_itself_is_left_alone(tmp_path):
    dest = tmp_path / "state"
    run_main(module.main, _args(dest, FILES), _no_commands)
    os.chmod(dest / "_weights", 0o755)
    os.chmod(dest, 0o711)
    checked = run_main(module.main, {**_args(dest, FILES), "_ansible_check_mode": True}, _no_commands)
    assert checked["changed"] and checked["written"] == [f"{dest}/_weights/"]
    assert oct(os.stat(dest / "_weights").st_mode & 0o777) == "0o755"
    result = run_main(module.main, _args(dest, FILES), _no_commands)
    assert result["written"] == [f"{dest}/_weights/"]
    assert oct(os.stat(dest / "_weights").st_mode & 0o777) == "0o700"
    # the caller's folder is the caller's: made where missing, never changed here
    assert oct(os.stat(dest).st_mode & 0o777) == "0o711"
    assert run_main(module.main, _args(dest, FILES), _no_commands)["changed"] is False
