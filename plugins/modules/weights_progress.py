#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Documentation of gb10.serving.weights_progress; the work is done by the action plugin of the same name."""

from __future__ import annotations

DOCUMENTATION = r"""
module: weights_progress
short_description: One round of the model weights progress loop - wait up to an interval, report bytes, rate, ETA
description:
  - Waits up to O(interval_s) for the status file that the model_weights transfer script writes to say it finished,
    looking every O(poll_s), then returns one progress line (bytes, percent, rate since the start, ETA) in C(msg).
  - Meant to be looped over C(range(rounds)) with C(loop_control.break_when) on C(ended) and the line as the loop
    label, so a wait of hours is one flat task that prints a line a round, never a self-including file (which
    Ansible aborts with RecursionError after a few hundred rounds) and never a wall of C(FAILED - RETRYING).
  - Ends the loop with C(error) set when the status records an error, when it stopped moving for more than
    O(stale_s) (the container died or hangs), or when no status file appeared within O(stale_s); the task after the
    loop fails with it (a failed item would leave the task's message at "One or more items failed").
  - Runs on the controller (an action plugin) and reads the file with one plain command per look, not a module.
version_added: 0.1.1
extends_documentation_fragment:
  - gb10.serving.read_only
  - gb10.serving.node
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  phase:
    description: What runs (C(fetch), C(receive)), used in messages.
    type: str
    required: true
  status:
    description: The status file on the node (JSON with bytes_done, bytes_total, finished, error, time).
    type: path
    required: true
  container:
    description: The container doing the work, named in messages (C(docker logs)).
    type: str
    required: true
  interval_s:
    description: Longest wait of one round, in seconds.
    type: float
    default: 15.0
  poll_s:
    description: Seconds between two looks at the status file within a round.
    type: float
    default: 3.0
  stale_s:
    description: A status not updated for this many seconds (or never written) means the job is dead.
    type: float
    default: 120.0
  round:
    description: The number of this round (the loop item), for the message.
    type: int
    required: true
  rounds:
    description: The number of rounds of the loop, for the message.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Show progress until the fetch ends
  gb10.serving.weights_progress:
    node: "{{ inventory_hostname }}"
    phase: fetch
    status: /var/lib/gb10/model-weights/status-fetch.json
    container: gb10-weights-fetch
    interval_s: 15
    round: "{{ item }}"
    rounds: 960
  loop: "{{ range(1, 961) | list }}"
  loop_control:
    label: "{{ __progress.msg | default(item) }}"
    break_when: __progress.ended | default(true)
  register: __progress

- name: Stop on a failed fetch
  ansible.builtin.fail:
    msg: "{{ (__progress.results | last).error }}"
  when: (__progress.results | last).error is not none
"""

RETURN = r"""
ended:
  description: Whether the job ended (finished, failed or dead); the loop stops on it.
  type: bool
  returned: always
error:
  description: What went wrong, with the node, the numbers and the fix; null while all is well.
  type: str
  returned: always
finished:
  description: Whether the job finished without an error.
  type: bool
  returned: always
bytes_done:
  description: Bytes done.
  type: int
  returned: always
bytes_total:
  description: Bytes to do.
  type: int
  returned: always
rate:
  description: Bytes a second since the job started (null until known).
  type: float
  returned: always
eta_s:
  description: Seconds left at that rate (null until known).
  type: float
  returned: always
msg:
  description: The progress line, or what went wrong with node, numbers and the fix.
  type: str
  returned: always
"""
