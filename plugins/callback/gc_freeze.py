# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Freeze the controller's Python objects before each task's workers fork (docs/converge-cost.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gc_freeze
type: aggregate
short_description: Keep the controller's objects out of the workers' garbage collection
version_added: 0.1.0
description:
  - ansible-core forks a worker process per task and host from its main process. Python's garbage collector in
    each worker walks, and so writes to, every object the worker inherited, which turns the main process's shared
    pages into copies (copy-on-write) and costs each worker CPU proportional to what the main process holds.
  - At the start of each task, before its workers fork, this moves every object the main process holds to the
    collector's permanent generation (C(gc.freeze()), which the Python documentation recommends before a POSIX
    C(fork())), so no worker's collection walks them.
  - Objects frozen are never collected by the main process, cyclic garbage among them included, so the main
    process can hold a little more memory at the end of a run. It prints nothing and changes no result.
  - Enable it in C(ansible.cfg) (C(callbacks_enabled = gb10.serving.gc_freeze)), as this collection's own does.
author:
  - gb10.serving maintainers (!UNKNOWN)
requirements:
  - enable in configuration (C(callbacks_enabled))
"""

EXAMPLES = r"""
example: >-
  Enabled in ansible.cfg, not called from a task (it returns nothing); in its [defaults] section:
  callbacks_enabled = gb10.serving.gc_freeze
"""

import gc

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gb10.serving.gc_freeze"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        gc.freeze()

    def v2_playbook_on_handler_task_start(self, task):
        gc.freeze()
