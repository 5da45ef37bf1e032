from ansible_collections.gb10.serving.plugins.module_utils._disk import GIB, mount_for, weights_disk_problems

MOUNTS = [
    {"mount": "/", "size_available": 50 * GIB},
    {"mount": "/var", "size_available": 20 * GIB},
    {"mount": "/var/lib/gb10", "size_available": 300 * GIB},
    {"mount": "/var/lib/gb1", "size_available": 1 * GIB},
]


def test_mount_for_takes_the_nearest_parent_not_a_name_prefix():
    assert mount_for("/var/lib/gb10/hf-cache", MOUNTS)["mount"] == "/var/lib/gb10"
    assert mount_for("/var/lib/gb100/x", MOUNTS)["mount"] == "/var"
    assert mount_for("/opt/cache/", MOUNTS)["mount"] == "/"


def test_weights_disk_problems_fits():
    assert weights_disk_problems("spark-1", "/var/lib/gb10/hf-cache", MOUNTS, 181 * GIB, 0, 10) == []


def test_weights_disk_problems_names_node_mount_numbers_and_fix():
    (msg,) = weights_disk_problems("spark-2", "/srv/hf", MOUNTS, 181 * GIB, 40 * GIB, 10)
    assert msg.startswith("spark-2: /srv/hf (on /) has 50.0 GiB free")
    assert "still need 141.0 GiB plus the 10 GiB reserve = 151.0 GiB" in msg
    assert "free 101.0 GiB there" in msg


def test_weights_disk_problems_nothing_missing_needs_no_space():
    assert weights_disk_problems("spark-1", "/srv/hf", MOUNTS, 181 * GIB, 181 * GIB, 10) == []


def test_weights_disk_problems_unknown_mount():
    (msg,) = weights_disk_problems("spark-1", "/srv/hf", [], 1, 0, 0)
    assert "free space is unknown" in msg
