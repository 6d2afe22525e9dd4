"""Test-suite options. The default run stays under ten minutes on two cores; tests marked
``slow`` (every example on both simulators, long fuzz samples) run with ``--slow``, as CI
does (``.ci/run``)."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (CI runs them)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        # the longest first, so that CI's workers (xdist, loadscope: a class or module each)
        # do not end on one of them: every family's cross-validation (minutes each), then the
        # other slow tests, each group in its own order
        items.sort(key=lambda item: 0 if "test_crossval.py::Test" in item.nodeid
                   else 1 if "slow" in item.keywords else 2)
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
