"""Named causes of rows out of bounds (sim/analysis/causes.py) and how validate shows them."""

import re

from gpufe.sim.analysis.causes import CAUSES, cause_of
from gpufe.sim.analysis.scenarios import scenario_names
from gpufe.sim.analysis.validate import error_summary, format_table, named_cause


def row(scenario, metric, model, measured, **kw):
    return {"scenario": scenario, "metric": metric, "model": model, "measured": measured,
            "rel_error": model / measured - 1, "side": "device", **kw}


def test_every_cause_names_scenarios_of_the_reference_set():
    """A cause whose pattern matches no bundled scenario is stale (a renamed scenario)."""
    names = scenario_names()
    assert len({c.key for c in CAUSES}) == len(CAUSES)      # the table lists them by key
    for cause in CAUSES:
        assert any(re.fullmatch(cause.scenarios, n) for n in names), cause.key
        assert cause.metrics and cause.text


def test_a_cause_names_its_scenarios_and_metrics_only():
    over = row("gupdate_n3000", "max_concurrent", 1.0, 2.0)
    assert cause_of(over).key == "cupti-overlap"
    assert cause_of(row("gupdate_n3000", "gu_destroy_us", 1.0, 2.0)) is None
    # the pattern matches the whole name: gupdate_n30 is not gupdate_n300
    assert cause_of(row("gupdate_n30", "max_concurrent", 1.0, 2.0)) is None
    assert cause_of(row("nocupti_actgap_stamp_c16_A4_g100_hi2_load100", "hi_period_us",
                        4.2, 7.3)).key == "free-slot"
    # a gap two 32 ns ticks off is the timestamps' resolution; three ticks off is not
    assert cause_of(row("pdl_stamp_p1_t0_ns5000_g0", "median_gap_us", 0.055, 0.096)).key \
        == "timestamp-tick"
    assert cause_of(row("pdl_stamp_p1_t0_ns5000_g1", "median_gap_us", -0.20, -0.06)) is None


def test_only_rows_out_of_bounds_carry_a_cause_and_the_table_says_it():
    off = row("threads_T6_sh0", "median_kernel_us", 1.20, 0.67)
    near = row("threads_T6_sh0", "median_kernel_us", 0.7, 0.67)
    inside = row("threads_T12_sh0", "median_kernel_us", 0.61, 0.93, runs=3,
                 spread=[0.6, 1.2], bundled=0.93)
    assert named_cause(off).key == "record-length"
    assert named_cause(near) is None and named_cause(inside) is None
    summary = error_summary([off, near, inside])
    assert summary["over_25pct"] == 1 and summary["named"] == 1
    table = format_table([off, near, inside])
    assert "[record-length]" in table and "1 of them with a named cause" in table
    assert next(c for c in CAUSES if c.key == "record-length").text in table
    unexplained = row("chain_stream_gate", "median_kernel_us", 0.9, 0.61)
    assert "named cause" not in format_table([unexplained])
