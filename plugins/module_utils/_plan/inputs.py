# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The patterns input validation checks against (``rules_inputs.py``): values written bare into a systemd unit
line, haproxy.cfg or keepalived.conf, Linux interface names, and names that carry secrets.

A profile name and served_model_name are written bare into unit lines (``Description=``, comments), where
a line break starts a new directive: a served_model_name of ``"x\\n[Service]\\nExecStartPre=..."`` would give
the unit a second, root ExecStartPre. Such values must match a safe pattern before anything is rendered.
"""

from __future__ import annotations

import re

# What a unit line, haproxy.cfg or keepalived.conf can hold bare: no whitespace, quotes, '%', '$' or '\'.
PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
SERVED_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# The kernel's dev_valid_name: 1..15 bytes (IFNAMSIZ 16 with the NUL), not . or .., no '/', ':' or whitespace.
IFNAME_MAX = 15
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
# Where vLLM and huggingface_hub read what these flags carry from the environment instead.
SECRET_ENV = {"api-key": "VLLM_API_KEY", "hf-token": "HF_TOKEN"}
SECRETS_HOME = (
    "set it in serving_secrets instead (roles/serving writes it to a root-only 0600 env file that the engine "
    "container reads; it is never printed or put on a command line)"
)


def ifname_problem(name):
    """Why ``name`` is no Linux interface name ('' when it is one)."""
    name = str(name)
    if not name or name in (".", ".."):
        return "is empty, '.' or '..'"
    if len(name.encode()) > IFNAME_MAX:
        return f"is {len(name.encode())} bytes long, the kernel takes at most {IFNAME_MAX}"
    if any(c == "/" or c == ":" or c.isspace() for c in name):
        return "holds '/', ':' or whitespace, which the kernel refuses in an interface name"
    return ""


def secret_env_name(name):
    """An environment variable name with a word TOKEN, KEY, SECRET or PASSWORD (HF_TOKEN, not TOKENIZERS_*)."""
    return any(word in SECRET_WORDS for word in re.split(r"[^A-Z0-9]+", str(name).upper()))


def secret_flag(name):
    """A flag that carries a secret: api-key, or a name whose last word is token/key/secret/password.

    The last word only: vLLM's --max-num-batched-tokens, --tokenizer and --long-prefill-token-threshold
    hold no secret, --hf-token and --api-key do.
    """
    words = re.split(r"[-_]+", name.lower())
    return name.lower() == "api-key" or words[-1].upper() in SECRET_WORDS
