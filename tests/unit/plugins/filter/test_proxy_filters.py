"""Filters of the proxy role: the plan's affinity rule on the role's own variables."""

from ansible_collections.gb10.serving.plugins.filter.proxy import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils._plan import rules_api

F = FilterModule().filters()


def test_usable_or_off_affinity_has_no_problem():
    off = {"proxy_affinity": "none", "proxy_affinity_header": "", "proxy_affinity_balance_factor": 0}
    assert F["proxy_affinity_problems"](off) == []
    on = {"proxy_affinity": "user", "proxy_affinity_header": "X-Session-Id", "proxy_affinity_balance_factor": "150"}
    assert F["proxy_affinity_problems"](on) == []  # digits, as an inventory or -e may give them


def test_each_unusable_setting_is_the_plans_own_message():
    given = {"proxy_affinity": "header", "proxy_affinity_header": "Host", "proxy_affinity_balance_factor": 99}
    expected = [m for _v, _x, m in rules_api.affinity_problems(rules_api.affinity_settings(given, {}))]
    assert F["proxy_affinity_problems"](given) == expected
    assert len(expected) == 2 and expected[0].startswith("proxy_affinity_header is Host")
    assert expected[1].startswith("proxy_affinity_balance_factor is 99")
