# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What the serving image's Dockerfile is written with, checked before it is: the pins and the index URL.

The serving plan never sees these (they are roles/serving_image variables, not profile values), so the role's
preflight checks them through the ``serving_image_input_problems`` filter, on the controller. The Dockerfile
holds each pin as ``"<name>==<version>"`` in a RUN line and the index URL bare after ``--index-url``: a quote,
a space or a line break in either would become pip arguments or Dockerfile instructions of their own.
"""

from __future__ import annotations

from urllib.parse import urlsplit

try:  # ansible-core depends on packaging on every controller; ansible-test's import check runs without it
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    PACKAGING_ERROR = None
except ImportError as exc:  # pragma: no cover - only in ansible-test's bare import environment
    PACKAGING_ERROR = exc

_URL_UNSAFE = "\"'`$\\<>"


def pin_problem(name, version, what="serving_image_extra_pins"):
    """Why ``name==version`` is no exact pin of one distribution (None when it is one)."""
    if PACKAGING_ERROR is not None:
        raise ImportError(f"checking {what} needs the packaging library on the controller: {PACKAGING_ERROR}")
    text = f"{name}=={version}"
    try:
        requirement = Requirement(text)
        Version(str(version))
    except (InvalidRequirement, InvalidVersion) as exc:
        return f"{what} {name!r}: {version!r} does not make an exact pin {text!r} ({exc})"
    if requirement.name != str(name) or requirement.extras or requirement.marker or requirement.url:
        return f"{what} {name!r} is not a bare distribution name (extras, markers or URLs do not belong in a pin)"
    return None


def url_problem(url, what="serving_image_index_url"):
    """Why ``url`` is no http(s) index URL that the Dockerfile can hold bare (None when it is one)."""
    url = str(url)
    if any(c.isspace() or c in _URL_UNSAFE or ord(c) < 32 for c in url):
        return f"{what} {url!r} holds whitespace, a quote or a shell character: percent-encode it"
    try:
        parts = urlsplit(url)
        _port = parts.port  # reading it raises ValueError on a port that is not a number
    except ValueError as exc:
        return f"{what} {url!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{what} {url!r} must be an http:// or https:// URL with a host, e.g. https://pypi.org/simple"
    return None


def input_problems(ray_version, extra_pins, index_url):
    """Every problem of the pins and the index URL the Dockerfile is written with (empty: none)."""
    problems = []
    ray = pin_problem("ray", ray_version, what="serving_image_ray_version")
    if ray:
        problems.append(ray)
    for name, version in sorted((extra_pins or {}).items(), key=lambda kv: str(kv[0])):
        problem = pin_problem(name, version)
        if problem:
            problems.append(problem)
    if index_url:
        problem = url_problem(index_url)
        if problem:
            problems.append(problem)
    return problems
