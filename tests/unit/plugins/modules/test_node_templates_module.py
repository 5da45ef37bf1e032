# Copyright: gb10.serving maintainers
# Apache-2.0
"""The node_templates module on real files: writes what differs in one run and nothing the second time, validates a
candidate before it replaces a file (a refusal leaves the file and those after it alone), and in check mode writes
nothing and validates nothing."""

from __future__ import annotations

import base64
import importlib
import os

from module_harness import run_main

module = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.node_templates")


def _entry(dest, data, mode="0644", validate=None):
    return {"dest": str(dest), "content": base64.b64encode(data).decode(), "mode": mode, "validate": validate}


def _run_commands(_self, argv, **_kwargs):
    # the validate command line as AnsibleModule.run_command gets it: "test-ok %s" passes, anything else refuses
    words = argv.split() if isinstance(argv, str) else argv
    assert os.path.isfile(words[-1]) and os.path.dirname(words[-1]).startswith("/tmp"), words
    return (0, "", "") if words[0] == "test-ok" else (1, "", "refused by the test")


def test_writes_what_differs_then_nothing(tmp_path):
    files = [
        _entry(tmp_path / "a.env", b"A=1\n", "0600"),
        _entry(tmp_path / "b.service", b"[Unit]\n", validate="test-ok %s"),
    ]
    result = run_main(module.main, {"files": files}, _run_commands)
    assert result["changed"] and result["written"] == [str(tmp_path / "a.env"), str(tmp_path / "b.service")]
    assert (tmp_path / "a.env").read_bytes() == b"A=1\n" and oct(os.stat(tmp_path / "a.env").st_mode & 0o777) == "0o600"
    again = run_main(module.main, {"files": files}, _run_commands)
    assert again["changed"] is False and again["written"] == [] and again["files"] == 2
    os.chmod(tmp_path / "a.env", 0o644)
    mode_only = run_main(module.main, {"files": files}, _run_commands)
    assert mode_only["written"] == [str(tmp_path / "a.env")]


def test_a_refused_candidate_leaves_the_file_and_the_ones_after_it(tmp_path):
    (tmp_path / "b.service").write_bytes(b"old\n")
    files = [
        _entry(tmp_path / "a.env", b"A=1\n"),
        _entry(tmp_path / "b.service", b"new\n", validate="test-refuse %s"),
        _entry(tmp_path / "c.timer", b"c\n"),
    ]
    result = run_main(module.main, {"files": files}, _run_commands)
    assert result["failed"] and "refused" in result["msg"] and str(tmp_path / "b.service") in result["msg"]
    assert result["written"] == [str(tmp_path / "a.env")] and result["changed"] is True
    assert (tmp_path / "b.service").read_bytes() == b"old\n" and not (tmp_path / "c.timer").exists()


def test_check_mode_reports_the_diff_writes_nothing_and_validates_nothing(tmp_path):
    (tmp_path / "b.service").write_bytes(b"old\n")
    os.chmod(tmp_path / "b.service", 0o644)
    files = [_entry(tmp_path / "b.service", b"new\n", validate="test-refuse %s"), _entry(tmp_path / "new.env", b"N\n")]
    result = run_main(module.main, {"files": files, "_ansible_check_mode": True, "_ansible_diff": True}, None)
    assert result["written"] == [str(tmp_path / "b.service"), str(tmp_path / "new.env")]
    path = str(tmp_path / "b.service")
    assert result["diff"][0] == {"before_header": path, "after_header": path, "before": "old\n", "after": "new\n"}
    assert (tmp_path / "b.service").read_bytes() == b"old\n" and not (tmp_path / "new.env").exists()


def test_relative_or_repeated_destinations_and_a_validate_without_its_file_are_refused(tmp_path):
    files = [
        _entry("relative.env", b"x"),
        _entry(tmp_path / "a", b"x", validate="true"),
        _entry(tmp_path / "a", b"y"),
    ]
    result = run_main(module.main, {"files": files}, None)
    assert result["failed"]
    for said in ("'relative.env' is not an absolute path", "two files write", "must name the candidate file as %s"):
        assert said in result["msg"], result["msg"]
    assert not (tmp_path / "a").exists()


def test_folders_are_made_with_their_parents_before_the_files_and_their_mode_kept(tmp_path):
    folders = [
        {"path": str(tmp_path / "etc" / "gb10"), "mode": "0700"},
        {"path": str(tmp_path / "run"), "mode": "0755"},
    ]
    files = [_entry(tmp_path / "etc" / "gb10" / "engine.env", b"A=1\n")]
    check = run_main(module.main, {"directories": folders, "files": files, "_ansible_check_mode": True}, None)
    assert check["written"] == [
        f"{tmp_path}/etc/gb10/",
        f"{tmp_path}/run/",
        str(tmp_path / "etc" / "gb10" / "engine.env"),
    ]
    assert not (tmp_path / "etc").exists()
    made = run_main(module.main, {"directories": folders, "files": files}, _run_commands)
    assert made["written"] == check["written"]
    assert oct(os.stat(tmp_path / "etc" / "gb10").st_mode & 0o777) == "0o700"
    assert run_main(module.main, {"directories": folders, "files": files}, _run_commands)["changed"] is False
    os.chmod(tmp_path / "run", 0o777)
    again = run_main(module.main, {"directories": folders}, _run_commands)
    assert again["written"] == [f"{tmp_path}/run/"] and oct(os.stat(tmp_path / "run").st_mode & 0o777) == "0o755"
    relative = run_main(module.main, {"directories": [{"path": "run", "mode": "0755"}]}, None)
    assert relative["failed"] and "are not absolute paths" in relative["msg"]


def test_the_files_text_is_kept_out_of_the_modules_journal_line():
    # AnsibleModule logs "Invoked with <arguments>" to the node's journal, masking the values of no_log options
    from ansible_collections.gb10.serving.plugins.module_utils._node_write import FILE_OPTIONS

    assert FILE_OPTIONS["content"]["no_log"] is True
