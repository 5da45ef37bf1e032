# Copyright: gb10.serving maintainers
# Apache-2.0
"""The fetch's status file (roles/weights_transfer/files/weights_transfer.py): the reporter thread, the final write."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from source_loader import load

REPO = Path(__file__).resolve().parents[4]
transfer = load("gb10_weights_transfer_status", REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py")


def test_pitfall_reporter_and_final_write_race_on_one_temporary_file(tmp_path):
    # Seen in make test on a loaded machine: the final write's os.replace found no .tmp, because the reporter
    # thread had just replaced it; the fetch died with FileNotFoundError after every byte had arrived.
    status = transfer.Status(str(tmp_path / "status.json"), "fetch", total=100)
    errors = []

    def hammer():
        try:
            for _n in range(300):
                status.write()
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _n in range(4)]
    for thread in threads:
        thread.start()
    for _n in range(300):
        status.write()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_progress_write_after_the_final_one_changes_nothing(tmp_path):
    status = transfer.Status(str(tmp_path / "status.json"), "fetch", total=100)
    status.done_fn = lambda: 100
    status.write(final=True)
    status.done_fn = lambda: 7
    status.write()
    written = json.loads((tmp_path / "status.json").read_text())
    assert written["finished"] is True and written["bytes_done"] == 100


def test_pitfall_reporter_dies_when_a_partial_file_is_renamed_under_it(tmp_path, monkeypatch):
    # Seen in make test: blob_bytes found the .incomplete file, the fetch renamed it to its blob, and getsize raised
    # FileNotFoundError in the reporter thread, which died: the status file stopped moving for the rest of the fetch.
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "b1").write_bytes(b"x" * 5)
    (blobs / "b2.incomplete").write_bytes(b"x" * 3)
    manifest = {"a": {"blob": "b1"}, "b": {"blob": "b2"}, "c": {"blob": "b3"}}
    assert transfer.blob_bytes(str(tmp_path), manifest) == 8
    real = transfer.os.path.getsize

    def renamed_meanwhile(path):
        if path.endswith("b2.incomplete"):
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(transfer.os.path, "getsize", renamed_meanwhile)
    assert transfer.blob_bytes(str(tmp_path), manifest) == 5
