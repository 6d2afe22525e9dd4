"""Test-suite options. The default run stays under ten minutes on two cores; tests marked
``slow`` (every example on both simulators, long fuzz samples) run with ``--slow``, as CI
does (``.ci/run``)."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (CI runs them)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
