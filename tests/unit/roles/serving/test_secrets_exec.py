# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving/files/gb10-secrets-exec (issue 37 item 2): it reads the root-only secrets file exactly as `docker
run --env-file` read it (what gb10.serving.docker_env_file writes, through the role's own secrets.env.j2), refuses
what docker would read otherwise or a file others may read, and execs the program with its argv unchanged and the
secrets added to its environment, never through a shell."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from serving_render import ROLE, environment

SCRIPT = ROLE / "files" / "gb10-secrets-exec"
_loader = importlib.machinery.SourceFileLoader("gb10_secrets_exec", str(SCRIPT))
_spec = importlib.util.spec_from_loader("gb10_secrets_exec", _loader)
secrets_exec = importlib.util.module_from_spec(_spec)
_loader.exec_module(secrets_exec)

# Values a shell or a quote-stripping parser would change: docker takes each literally to the end of the line.
AWKWARD = {
    "VLLM_API_KEY": 'sk-$HOME`id`\'"a b"  ',
    "HF_TOKEN": "hf_x=y#not-a-comment\\n",
    "GB10_CANARY": "",
    "LONE": "$(touch /tmp/gb10-secrets-exec-pwned)",
}
PRINT_ENV_AND_ARGV = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))"


def _secrets_env(secrets):
    """secrets.env as the role writes it: its own template, the collection's filter."""
    return (
        environment().get_template("secrets.env.j2").render(ansible_managed="Ansible managed", _serving_secrets=secrets)
    )


def _write(path, text, mode=0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def test_parses_the_roles_own_secrets_file_as_docker_reads_it():
    text = _secrets_env(AWKWARD)
    assert text.splitlines()[0] == "# Ansible managed"
    assert secrets_exec.parse_env_file(text) == AWKWARD


def test_docker_env_file_rules_blank_lines_comments_leading_blanks_crlf_and_bom():
    text = "\ufeffA=1\r\n\n   # a comment\n  B= two  \n#C=3\nD==x\n"
    assert secrets_exec.parse_env_file(text) == {"A": "1", "B": " two  ", "D": "=x"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("VLLM_API_KEY\n", "line 1 holds no '='"),
        ("A=1\nBAD NAME=x\n", "line 2 does not start with an environment variable name"),
        ("=value\n", "line 1 does not start"),
        ("export A=1\n", "line 1 does not start"),
    ],
)
def test_refuses_what_docker_would_read_otherwise_naming_the_line(text, words):
    with pytest.raises(secrets_exec.Refused, match=words):
        secrets_exec.parse_env_file(text, "/run/gb10/secrets.env")


def test_refuses_a_file_others_may_read_and_a_missing_one(tmp_path):
    shared = _write(tmp_path / "secrets.env", "A=1\n", 0o644)
    with pytest.raises(secrets_exec.Refused, match="mode 0644: only its owner"):
        secrets_exec.read_env_file(str(shared))
    with pytest.raises(secrets_exec.Refused, match="cannot read"):
        secrets_exec.read_env_file(str(tmp_path / "absent.env"))
    assert secrets_exec.read_env_file(str(_write(tmp_path / "ok.env", "A=1\n"))) == {"A": "1"}


def _run(*argv, env=None):
    return subprocess.run(
        [sys.executable, "-I", str(SCRIPT), *argv], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_execs_the_program_with_its_argv_unchanged_and_the_secrets_in_its_environment(tmp_path):
    path = _write(tmp_path / "secrets.env", _secrets_env(AWKWARD))
    argv = ["serve", "/m", "--port", "8000", "a b", "$HOME", "--"]
    done = _run(str(path), "--", sys.executable, "-c", PRINT_ENV_AND_ARGV, *argv, env={"KEEP": "1", "HF_TOKEN": "x"})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["argv"] == argv
    # the container's own environment kept, the file's values win (docker's later --env-file did the same)
    assert seen["env"]["KEEP"] == "1" and {k: seen["env"][k] for k in AWKWARD} == AWKWARD
    assert not os.path.exists("/tmp/gb10-secrets-exec-pwned")


def test_fails_closed_without_its_file_and_never_prints_a_value(tmp_path):
    # an engine started without its API key would serve /v1 to anyone
    done = _run(str(tmp_path / "absent.env"), "--", sys.executable, "-c", "print('started')")
    assert done.returncode == 2 and "started" not in done.stdout and "not started" in done.stderr
    bad = _write(tmp_path / "bad.env", "VLLM_API_KEY=sk-secret-1\nsk-secret-2\n")
    done = _run(str(bad), "--", sys.executable, "-c", "print('started')")
    assert done.returncode == 2 and "line 2 holds no '='" in done.stderr
    assert "sk-secret" not in done.stderr + done.stdout
    assert _run(str(bad), sys.executable).returncode == 2  # no "--": usage
    missing = _run(str(_write(tmp_path / "ok.env", "A=1\n")), "--", "/nonexistent/vllm")
    assert missing.returncode == 127 and "cannot run /nonexistent/vllm" in missing.stderr
