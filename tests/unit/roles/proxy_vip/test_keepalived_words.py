# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/proxy_vip writes into keepalived.conf is checked before configure
writes it: the address, prefix, router id, priorities and interface names by the plan (gb10.serving.proxy_vip_plan,
whose parsed values the template takes), the track check's URL and figures, the advert interval and the interface
name by the preflight's one-word check (roles/proxy_vip/tasks/preflight.yml, run here by the real ansible-playbook).
Each is tried with a line break and a quote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml
from task_file_runner import run_task_file
from template_words import refusal
from test_keepalived_conf import block, render

from ansible_collections.gb10.serving.plugins.module_utils._plan import proxy_vip as vip

ROLE = Path(__file__).resolve().parents[4] / "roles" / "proxy_vip"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
CHECK = "Refuse a value keepalived.conf could not hold as one word"
BAD = {"a line break": "\n    notify_master /tmp/evil", "a quote": '"'}
# The preflight's check, on the variables keepalived.conf is written with as they are (gb10_fabric_interface, the
# adverts' interface, is roles/gb10's, written here).
CHECKED = [
    "proxy_vip_check_url",
    "proxy_vip_interface",
    "gb10_fabric_interface",
    "proxy_vip_advert_int",
    "proxy_vip_check_interval",
    "proxy_vip_check_timeout",
    "proxy_vip_check_fall",
    "proxy_vip_check_rise",
]
# Good values of each: the role's defaults, a real interface name for the two interfaces.
GOOD = {
    **{name: DEFAULTS.get(name) for name in CHECKED},
    "proxy_vip_interface": "eth0",
    "gb10_fabric_interface": "eth0",
}


def check(tmp_path, **given):
    """(rc, output) of the preflight's one-word check, the role's own task, on localhost with the role's defaults."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(t for t in tasks if t["name"] == CHECK)
    tasks_file = tmp_path / "check.yml"
    tasks_file.write_text(json.dumps([task]))
    variables = {**DEFAULTS, "gb10_fabric_interface": "eth0", **given}
    return run_task_file(tmp_path, tasks_file, variables, name="The one-word check")


def test_pitfall_newline_in_proxy_vip_check_url_adds_directives(tmp_path):
    # The URL is written inside the track script's quoted string: a line break ends the string's line and the
    # next starts a keepalived directive of the operator's choosing (here a script run as root on MASTER).
    url = DEFAULTS["proxy_vip_check_url"] + BAD["a line break"]
    script = block(render(proxy_vip_check_url=url), "vrrp_script gb10_haproxy_answers")
    assert re.search(r"^    notify_master /tmp/evil\"$", script, re.M)
    rc, out = check(tmp_path, proxy_vip_check_url=url)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith(f"localhost: proxy_vip_check_url is {json.dumps(url)}; set an http(s) URL"), msg
    assert "e.g. http://127.0.0.1:8404/stats" in msg


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_variable_keepalived_conf_is_written_with_refuses_a_line_break_and_a_quote(tmp_path, kind):
    given = {name: f"{GOOD[name]}{BAD[kind]}" for name in CHECKED}
    rc, out = check(tmp_path, **given)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    for name in CHECKED:
        assert f"{name} is {json.dumps(given[name])}; set " in msg, msg


def test_a_trailing_line_break_in_a_number_is_refused_though_argument_specs_take_it(tmp_path):
    rc, out = check(tmp_path, proxy_vip_check_fall="2\n", proxy_vip_advert_int="1\n")
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert 'proxy_vip_check_fall is "2\\n"' in msg and 'proxy_vip_advert_int is "1\\n"' in msg


def test_values_at_the_edge_of_the_patterns_pass(tmp_path):
    rc, out = check(
        tmp_path,
        proxy_vip_check_url="https://[::1]:8404/stats?a=1&b=%2F~x,y+z@",
        proxy_vip_interface="enP2p1s0f1np1",
        proxy_vip_advert_int=0.5,
    )
    assert rc == 0, out[-3000:]


NODES = {
    f"spark-{i}": {
        "fabric_address": f"10.93.0.1{i}",
        "fabric_interface": "eth0",
        "vip_interface": "eth0",
        "interfaces": {"eth0": f"10.93.0.1{i}/24"},
    }
    for i in (1, 2)
}


def test_the_plan_refuses_a_line_break_in_the_interface_names_and_a_quote_in_one_the_node_lacks():
    # A quote the kernel allows in a name; the plan refuses proxy_vip_interface unless the node has it, and the
    # preflight's check above refuses it in both names (test_each_variable_...).
    for key, bad in (("fabric_interface", "\n"), ("vip_interface", "\n"), ("vip_interface", '"')):
        nodes = {host: {**node, key: "eth0" + bad} for host, node in NODES.items()}
        planned = vip.plan("10.93.0.10", 24, sorted(nodes), nodes)
        assert {v["rule"] for v in planned["violations"]} & {"interface_name", "vip_interface"}, (key, planned)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_the_plan_writes_the_address_and_prefix_it_parsed_never_the_text_given(kind):
    planned = vip.plan("10.93.0.10" + BAD[kind], 24, sorted(NODES), NODES)
    if planned["violations"]:
        assert {v["rule"] for v in planned["violations"]} == {"address"}
    else:
        assert planned["address"] == "10.93.0.10" and planned["prefix"] == 24
    for bad in ("24" + BAD[kind], "24\n"):
        planned = vip.plan("10.93.0.10", bad, sorted(NODES), NODES)
        assert planned["prefix"] in (None, 24), planned
    # router id and priorities reach the template as the plan's integers
    planned = vip.plan("10.93.0.10", 24, sorted(NODES), NODES, virtual_router_id="51" + BAD[kind])
    assert planned["virtual_router_id"] == 0 and planned["violations"]


def test_every_variable_the_template_writes_is_checked():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    listed = [word[0] for word in next(t for t in tasks if t["name"] == CHECK)["vars"]["__proxy_vip_words"]]
    assert listed == CHECKED
    parsed = jinja2.Environment().parse((ROLE / "templates" / "keepalived.conf.j2").read_text())
    written = {n for n in jinja2.meta.find_undeclared_variables(parsed) if n.startswith("proxy_vip_")}
    # proxy_vip_interface reaches the template through the plan (its vip_interface), checked here and by the plan
    for name in written | {"proxy_vip_interface"}:
        assert name in CHECKED or specs[name]["type"] == "bool", name
    assert sorted(p.name for p in (ROLE / "templates").iterdir()) == ["keepalived.conf.j2"]
