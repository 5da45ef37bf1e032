"""The gc_freeze callback: the main process's objects frozen at each task's start, before its workers fork."""

import gc

from ansible_collections.gb10.serving.plugins.callback.gc_freeze import CallbackModule


def test_each_task_start_freezes_what_the_main_process_holds():
    held = [[index] for index in range(1000)]  # tracked objects alive in the "main process"
    gc.unfreeze()
    try:
        callback = CallbackModule()
        callback.v2_playbook_on_task_start(task=None, is_conditional=False)
        first = gc.get_freeze_count()
        assert first >= len(held)
        more = [[index] for index in range(500)]  # lists are always tracked (a dict of atoms is not)
        callback.v2_playbook_on_handler_task_start(task=None)
        assert gc.get_freeze_count() >= first + len(more)
    finally:
        gc.unfreeze()


def test_it_is_off_unless_enabled():
    assert CallbackModule.CALLBACK_NEEDS_ENABLED is True
    assert CallbackModule.CALLBACK_TYPE == "aggregate"  # never the stdout callback: it prints nothing
