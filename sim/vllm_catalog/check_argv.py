#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""Run planned ``vllm serve`` argv lists through the real vLLM parser and its start-up checks.

Run it with the Python of the throwaway venv that has the vLLM release installed (README.md next to this file),
never the project's ``.venv``. Each argv goes through what ``vllm serve`` does before it loads a model:

1. ``parse``: vLLM's FlexibleArgumentParser with the ``serve`` sub-parser (argparse converts every value);
   ``exact``: every ``--option`` word is one of that parser's own option strings, spelled out. vLLM accepts an
   abbreviation (argparse's allow_abbrev: ``--kv-cache-memory`` is read as ``--kv-cache-memory-bytes``) and the
   underscore spelling; the plan refuses both, so an argv that leans on either is refused here too;
2. ``validate``: ``ServeSubcommand.validate`` (validate_parsed_serve_args: tool choice needs a parser, ...);
3. ``parsers``: ``validate_api_server_args`` (the tool-call and reasoning parser names against vLLM's registries);
4. ``engine`` (only with a model directory): ``EngineArgs.create_engine_config()`` on that directory's
   config.json, under the node's planned env: --max-model-len against the model's length, the speculative method
   against the model. The snapshot path of the argv is replaced by the directory.

Inputs: ``--shipped`` plans every profile of the shipped inventories (examples and sim) from this checkout (the
plan needs ``collections/`` as ``make venv`` lays it out); files are plan.yml's ``plan_output`` JSON or a JSON
list of argv lists. Prints one line per argv and stage, exits 1 when any is refused. ``--expect-refused FILE``
turns it round: FILE maps a case's name to ``{"argv": [...], "refused_at": STAGE}`` and each case must be refused
at exactly that stage (known_bad.json: the proof that the check can fail). ``make argv-real`` runs both on what
playbooks/plan.yml renders for every profile of every inventory (argv_real.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = {
    "example-pair": ("glm-5.3-flash-tp2", "glm-replicas-mtp"),
    "sim": ("sim-replicas", "sim-tp", "sim-tp-ray"),
}


def shipped_argvs():
    """``[(label, argv, env, inventory)]`` of every serving node of every shipped profile, planned here."""
    sys.path[:0] = [os.path.join(REPO, "collections"), os.path.join(REPO, "tests/unit/plugins/module_utils/_plan")]
    import _plan_fixtures  # the loader the unit tests plan the shipped inventories with

    found = []
    for inventory, profiles in SHIPPED.items():
        for profile in profiles:
            plan = _plan_fixtures.shipped_plan(inventory, profile)
            if plan["violations"]:
                found.append((f"{inventory}/{profile}", None, {}, inventory))
                continue
            for host, entry in sorted(plan["nodes"].items()):
                if entry["argv"]:
                    found.append((f"{inventory}/{profile}/{host}", entry["argv"], entry["env"], inventory))
    return found


def file_argvs(path):
    """``[(label, argv, env, None)]`` of one file; a plan with violations is one item whose argv is None.

    A plan's label is its file name without ``.json`` (argv_real.sh names them ``<inventory>.<profile>.json``)
    and the host, so a refusal names the inventory, the profile and the node; the inventory is the name's part
    before its first dot (``--sim-model-dir`` applies to ``sim``).
    """
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if isinstance(data, list):
        return [(f"{path}[{i}]", argv, {}, None) for i, argv in enumerate(data)]
    plan = data.get("plan", data)
    name = os.path.basename(path)
    name = name[: -len(".json")] if name.endswith(".json") else name
    inventory = name.partition(".")[0] if "." in name else None
    if plan.get("violations"):
        return [(name, None, {}, inventory)]
    return [
        (f"{name}/{host}", entry["argv"], entry.get("env") or {}, inventory)
        for host, entry in sorted((plan.get("nodes") or {}).items())
        if entry.get("argv")
    ]


def inexact_options(words, option_strings):
    """``[message]`` for each ``--option`` word of ``words`` that is not spelled as one of ``option_strings``.

    ``words`` is the argv after ``vllm serve``; ``option_strings`` the real serve parser's own option table.
    vLLM would take such a word (an argparse prefix abbreviation, or the underscore spelling FlexibleArgumentParser
    rewrites), but the plan and the catalog readers take exact spellings only, and a prefix silently changes
    meaning when a later release adds an option that shares it.
    """
    messages = []
    for word in words:
        if not word.startswith("--") or word == "--":
            continue
        option = word.split("=", 1)[0]
        if option in option_strings:
            continue
        spelled = option.replace("_", "-")
        if spelled in option_strings:
            reads = spelled
        else:
            reads = " or ".join(sorted(o for o in option_strings if o.startswith(spelled))) or "nothing"
        messages.append(f"{option} is not an option of vllm serve as spelled (vLLM reads it as {reads})")
    return messages


def expectation_failures(cases, verdicts):
    """``[message]`` for each known-bad case the real parser did not refuse at its ``refused_at`` stage.

    ``cases``: name -> ``{"argv", "refused_at"}``; ``verdicts``: name -> ``check()``'s ``[(stage, verdict)]``.
    """
    failures = []
    for name, case in sorted(cases.items()):
        results = verdicts.get(name) or []
        refused = [stage for stage, verdict in results if verdict.startswith("refused")]
        if not refused:
            failures.append(f"{name}: accepted, expected refused at {case['refused_at']}")
        elif refused[0] != case["refused_at"]:
            failures.append(f"{name}: refused at {refused[0]}, expected at {case['refused_at']}")
    return failures


@contextlib.contextmanager
def _env(values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _serve_parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(dest="subparser")
    command = ServeSubcommand()
    command.subparser_init(subparsers)
    return top, command, set(subparsers.choices["serve"]._option_string_actions)


def check(argv, env, model_dir=None):
    """``[(stage, verdict)]`` for one argv (``vllm serve <model> ...``): "ok" or the refusal in vLLM's words."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.launcher import validate_api_server_args

    words = list(argv[2:] if argv[:2] == ["vllm", "serve"] else argv)
    if model_dir:
        words[0] = model_dir
    top, command, option_strings = _serve_parser()
    results = []
    error = []
    with contextlib.redirect_stderr(_Capture(error)):
        try:
            args = top.parse_args(["serve", *words])
        except SystemExit:
            return [("parse", "refused: " + " ".join("".join(error).split())[-400:])]
    results.append(("parse", "ok"))
    inexact = inexact_options(words[1:], option_strings)
    if inexact:
        return [*results, ("exact", "refused: " + "; ".join(inexact))]
    results.append(("exact", "ok"))
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag  # as ServeSubcommand.cmd does before anything else
    stages = [("validate", lambda: command.validate(args))]

    def parsers():
        engine_args = AsyncEngineArgs.from_cli_args(args)
        # vLLM 0.32's server merges --reasoning-parser into the structured outputs config before it validates the
        # parser names (EngineArgs.create_structured_outputs_config); 0.31's has no such step and validates the
        # config as parsed (vllm/entrypoints/launchers/launcher.py's setup_server in each release).
        merge = getattr(engine_args, "create_structured_outputs_config", None)
        if merge is not None:
            args.structured_outputs_config = merge()
        validate_api_server_args(args)

    stages.append(("parsers", parsers))
    unchecked = model_dir and getattr(args, "distributed_executor_backend", None) == "ray" and not _has_ray()
    if model_dir and not unchecked:
        stages.append(("engine", lambda: AsyncEngineArgs.from_cli_args(args).create_engine_config()))
    with _env({"HF_HUB_OFFLINE": "1", **env}):  # the model is a local directory: never ask the hub
        for stage, run in stages:
            try:
                run()
            except Exception as exc:  # vLLM's own refusal, whatever its class, is the result
                results.append((stage, f"refused: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}"))
                break
            results.append((stage, "ok"))
    if unchecked and all(verdict == "ok" for _stage, verdict in results):
        results.append(("engine", "not checked: Ray is not installed in this venv (the ray executor needs it)"))
    return results


def _has_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


class _Capture:
    def __init__(self, sink):
        self.sink = sink

    def write(self, text):
        self.sink.append(text)

    def flush(self):
        pass


def main(argv=None):
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("files", nargs="*", help="plan.yml plan_output JSON, or a JSON list of argv lists")
    cli.add_argument("--shipped", action="store_true", help="plan and check every shipped example and sim profile")
    cli.add_argument("--model-dir", help="a directory with the model's config.json: also run the engine config")
    cli.add_argument("--sim-model-dir", help="the sim model's config.json directory, for sim plans only")
    cli.add_argument("--expect-refused", metavar="FILE", help="known-bad cases that must each be refused (JSON)")
    cli.add_argument(
        "--sim-model", action="store_true", help="--sim-model-dir from the sim model's own config.json (sim/model)"
    )
    args = cli.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="argv-real-") as scratch:
        if args.sim_model and not args.sim_model_dir:
            args.sim_model_dir = write_model_dir(os.path.join(scratch, "sim-model"), sim_model_config())
        return _run(cli, args)


def _run(cli, args):
    items = shipped_argvs() if args.shipped else []
    for path in args.files:
        items.extend(file_argvs(path))
    if not items and not args.expect_refused:
        cli.error("give --shipped, --expect-refused or at least one file")
    # Both in one process, since importing vLLM costs ~10 s of the two cores make test shares; the known-bad cases
    # first, so that a refused shipped argv is what a log cut to its tail shows.
    rc = expect_refused(args.expect_refused) if args.expect_refused else 0
    if items:
        rc |= check_items(items, args)
    return rc


def check_items(items, args):
    refusals = []
    for label, words, env, inventory in items:
        if words is None:
            line = f"{label}: the plan refuses this profile (run playbooks/plan.yml for its violations)"
            print(line)
            refusals.append(line)
            continue
        model_dir = args.model_dir or (args.sim_model_dir if inventory == "sim" else None)
        results = check(words, env, model_dir)
        for stage, verdict in results:
            print(f"{label}: {stage}: {verdict}")
        refusals.extend(f"{label}: {stage}: {v}" for stage, v in results if v.startswith("refused"))
    # Repeated last, where a CI log cut to its tail still names the profile, the node and vLLM's words.
    for line in refusals:
        print(f"REFUSED {line}")
    print(f"{len(items) - len(refusals)} of {len(items)} argv accepted by the real vLLM parser")
    return 1 if refusals else 0


def write_model_dir(folder, config):
    """A model directory that holds only ``config``, as config.json: all the engine stage reads of a model."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
    return folder


def sim_model_config():
    """config.json of the sim model (sim/model/tiny_moe.py, standard library only) as the sim profiles pin it."""
    sys.path.insert(0, os.path.join(REPO, "sim", "model"))
    import tiny_moe

    return tiny_moe._config("revision 1")  # REVISION_1, the one inventories/sim pins; both share the shape


def expect_refused(path):
    """Each case of ``path`` through ``check``; a case with ``config`` also runs the engine stage on it."""
    with open(path, encoding="utf-8") as handle:
        cases = json.load(handle)
    verdicts = {}
    with tempfile.TemporaryDirectory(prefix="argv-real-") as scratch:
        for name, case in sorted(cases.items()):
            model_dir = None
            if case.get("config"):
                model_dir = write_model_dir(os.path.join(scratch, str(len(verdicts))), case["config"])
            verdicts[name] = check(case["argv"], case.get("env") or {}, model_dir)
            refused = [(stage, v) for stage, v in verdicts[name] if v.startswith("refused")]
            print(f"known bad {name}: " + (f"{refused[0][0]}: {refused[0][1]}" if refused else "accepted"))
    failures = expectation_failures(cases, verdicts)
    for failure in failures:
        print(f"NOT REFUSED AS EXPECTED: {failure}")
    print(f"{len(cases) - len(failures)} of {len(cases)} known-bad argv refused by the real vLLM parser as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
