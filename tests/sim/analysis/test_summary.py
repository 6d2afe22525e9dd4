"""The run summary is the metrics: on every bundled example, the figures ``gpufe run`` prints
(text and ``--json``) are those ``gpufe metrics`` prints for the timeline the run wrote."""

import json
import pathlib
import re

import pytest

from gpufe.sim.analysis.metrics import METRICS, format_value, metrics
from gpufe.sim.analysis.summary import COUNTS, OTHERS, ROWS
from gpufe.sim.analysis.traces import read_trace
from gpufe.sim.cli import main

EXAMPLES = sorted((pathlib.Path(__file__).parents[3] / "examples").glob("*.json"))


def test_every_metric_has_one_place_in_the_summary():
    places = list(ROWS) + list(COUNTS) + list(OTHERS)
    assert len(places) == len(set(places))
    assert set(places) == set(METRICS)


def shown_by_gpufe_metrics(text):
    """{metric: value as shown} from ``gpufe metrics`` output (one trace)."""
    out = {}
    for line in text.splitlines()[1:]:
        name, value = line.split()[:2]
        out[name] = value
    return out


def shown_by_the_summary(text):
    """{metric: value as shown} read back from the text summary of ``gpufe run``."""
    lines = text.splitlines()
    out = {}
    (counts,) = [line for line in lines if line.startswith("  API calls ")]
    for key, label in COUNTS.items():
        m = re.search(rf"(?:^  |, ){label} ([\d,]+)(?:,|$)", counts)
        if m:
            out[key] = m.group(1)
    for line in lines:
        for key, label in ROWS.items():
            if line.startswith(f"  {label:40s} "):
                out[key] = line[len(label) + 3:].split()[0]
        m = re.match(r"  repetitions ([\d,]+) \(rep_begin to rep_end marks\)", line)
        if m:
            out["repetitions"] = m.group(1)
        m = re.match(r"  largest (H2D|D2H|D2D) copy: ([\d,]+) B at ([\d,.]+) GB/s$", line)
        if m:
            kind = m.group(1).lower()
            out[f"copy_{kind}_bytes"], out[f"copy_{kind}_gbps"] = m.group(2), m.group(3)
        m = re.match(r"  simulated ([\d,.]+) us: ", line)
        if m:
            out["trace_us"] = m.group(1)
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_run_summary_is_gpufe_metrics_of_the_timeline_it_wrote(path, tmp_path, capsys):
    text_tl, json_tl = tmp_path / "text.jsonl", tmp_path / "json.jsonl"
    assert main(["run", str(path), "--timeline", str(text_tl)]) == 0
    text = capsys.readouterr().out
    assert main(["run", str(path), "--timeline", str(json_tl), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert json_tl.read_bytes() == text_tl.read_bytes()
    assert main(["metrics", str(text_tl)]) == 0
    shown = shown_by_gpufe_metrics(capsys.readouterr().out)

    assert figures["metrics"] == metrics(read_trace(text_tl))
    assert {k: format_value(v) for k, v in figures["metrics"].items()} == shown
    assert shown_by_the_summary(text) == shown
    assert figures["workload"] == json.loads(path.read_text())["name"]
    assert figures["outputs"] == {"timeline": str(json_tl)}
    assert set(figures["simulator"]) == {"rtl_cycles", "jumps", "jumped_us", "wall_s"}


def test_a_run_that_keeps_its_records_gives_the_same_figures(tmp_path, capsys):
    """With --perfetto the run keeps its records (metrics of the list) instead of streaming
    them (the digest gathered as they go): the same figures."""
    path = [p for p in EXAMPLES if p.stem == "copies"][0]
    assert main(["run", str(path), "--json"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert main(["run", str(path), "--json", "--perfetto", str(tmp_path / "p.json")]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert kept["metrics"] == streamed["metrics"]
    assert streamed["metrics"]["copies"] == 9 and streamed["metrics"]["channels_used"] == 3
