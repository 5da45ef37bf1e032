# Copyright: gb10.serving maintainers
# Apache-2.0
"""What gb10.serving.node_files installs from a source: a file by its name, a folder whole, never a checkout's
interpreter caches; two sources may not write one path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _node_files as node_files
from ansible_collections.gb10.serving.plugins.module_utils import _node_write as node_write

REPO = Path(__file__).resolve().parents[4]


def test_a_folder_lands_whole_under_its_name_without_caches(tmp_path):
    package = tmp_path / "_weights"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__pycache__" / "manifest.cpython-311.pyc").write_bytes(b"\0")
    (package / "sub").mkdir()
    for name in ("manifest.py", "__init__.py", "sub/deep.py", ".hidden", "stale.pyc"):
        (package / name).write_text("x\n")
    (tmp_path / "weights_transfer.py").write_text("y\n")
    pairs = node_files.source_files(str(tmp_path / "weights_transfer.py"), "/var/lib/gb10/weights")
    pairs += node_files.source_files(str(package) + "/", "/var/lib/gb10/weights")
    assert [(Path(src).relative_to(tmp_path).as_posix(), dest) for src, dest in pairs] == [
        ("weights_transfer.py", "/var/lib/gb10/weights/weights_transfer.py"),
        ("_weights/__init__.py", "/var/lib/gb10/weights/_weights/__init__.py"),
        ("_weights/manifest.py", "/var/lib/gb10/weights/_weights/manifest.py"),
        ("_weights/sub/deep.py", "/var/lib/gb10/weights/_weights/sub/deep.py"),
    ]


def test_the_weights_package_travels_with_every_module_it_imports():
    """The real package the transfer script imports: every .py file of plugins/module_utils/_weights lands."""
    package = REPO / "plugins" / "module_utils" / "_weights"
    landed = {dest for _src, dest in node_files.source_files(str(package), "/d")}
    assert (
        landed == {f"/d/_weights/{path.name}" for path in package.glob("*.py")} and "/d/_weights/__init__.py" in landed
    )


def test_two_sources_writing_one_path_are_named():
    pairs = [("/a/x.py", "/d/x.py"), ("/b/x.py", "/d/x.py"), ("/a/y.py", "/d/y.py")]
    assert node_files.duplicate_targets(pairs) == ["/d/x.py"]
    assert node_files.duplicate_targets(pairs[1:]) == []


def test_missing_parents_come_parents_first_once():
    existing = {"/", "/var", "/var/lib"}
    wanted = node_files.missing_parents(
        ["/var/lib/gb10/w/_weights/a.py", "/var/lib/gb10/w/b.py"], existing.__contains__
    )
    assert wanted == ["/var/lib/gb10", "/var/lib/gb10/w", "/var/lib/gb10/w/_weights"]


def test_template_each_writes_one_file_an_item_with_the_item_as_the_templates_item():
    files = node_write.template_each(["vllm", "node"], "targets.yml.j2", "/etc/prometheus/gb10/{item}.yml")
    assert files == [
        {"src": "targets.yml.j2", "dest": "/etc/prometheus/gb10/vllm.yml", "mode": "0644", "vars": {"item": "vllm"}},
        {"src": "targets.yml.j2", "dest": "/etc/prometheus/gb10/node.yml", "mode": "0644", "vars": {"item": "node"}},
    ]
    checked = node_write.template_each([{"name": "a"}], "t.j2", "/x/{item[name]}.conf", "0600", "check %s")
    assert checked[0]["dest"] == "/x/a.conf" and checked[0]["validate"] == "check %s" and checked[0]["mode"] == "0600"
    with pytest.raises(ValueError, match="does not format with item"):
        node_write.template_each(["a"], "t.j2", "/x/{item[name]}")


def test_the_files_asked_for_are_absolute_each_once_and_a_validate_names_its_candidate():
    assert node_write.validate_problems([{"dest": "/a", "validate": "check %s"}, {"dest": "/b"}]) == []
    assert node_write.validate_problems([{"dest": "a"}, {"dest": "/b", "validate": "x"}, {"dest": "/b/"}]) == [
        "dest 'a' is not an absolute path",
        "validate 'x' of /b must name the candidate file as %s exactly once",
        "two files write /b/",
    ]


def test_tree_folders_are_those_below_dest_parents_first():
    from ansible_collections.gb10.serving.plugins.module_utils._node_files import tree_folders

    paths = ["/s/a.py", "/s/_w/b.py", "/s/_w/sub/c.py", "/s/_w/d.py", "/sx/e.py"]
    assert tree_folders(paths, "/s") == ["/s/_w", "/s/_w/sub"]
    assert tree_folders(["/s/a.py"], "/s") == []
