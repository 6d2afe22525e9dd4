"""The workload reference (docs/workload.md) is generated from the tables the checks use, and
the committed file is what the generator writes now."""

import pathlib
import subprocess
import sys

import pytest

from gpufe.sim.host.workload import (OPS, TOP, REQUIRED, LIMITS, REFERENCE_COMMAND, WorkloadError,
                                     parse_workload, reference)
from gpufe.sim import cli

DOC = pathlib.Path(__file__).parents[3] / "docs" / "workload.md"

#: a valid value for every field, to build ops from the table alone
SAMPLE = {str: "s", bool: False, list: [], (int,): 1, (int, float): 1.5}


def _program(kind, fields):
    """A program around one op: the stream, event and graph it refers to made first."""
    pre = [{"op": "stream_create", "name": "s"}, {"op": "event_create", "name": "e"},
           {"op": "stream_begin_capture", "stream": "s"}]
    if kind != "stream_end_capture":
        pre.append({"op": "stream_end_capture", "stream": "s", "graph": "g"})
    return {"program": pre + [{"op": kind, **fields}]}


def _required(kind):
    """The op's required fields, each with a valid value."""
    refs = {"stream": "s", "event": "e", "name": "new", "from": "g", "body": "g",
            "graph": "new" if kind in ("stream_end_capture", "graph_create") else "g"}
    fields = {}
    for name, f in OPS[kind].fields.items():
        if f.default is REQUIRED:
            fields[name] = (f.choices[0] if f.choices else
                            refs.get(name, "x") if f.types is str else SAMPLE[f.types])
    return fields


def test_the_committed_reference_is_what_the_generator_writes():
    assert DOC.read_text() == reference(), (
        f"docs/workload.md is stale: regenerate it with {REFERENCE_COMMAND}")


def test_the_generator_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "gpufe.sim.host.workload", "--reference"],
                         capture_output=True, text=True, check=True).stdout
    assert out == reference()


def test_every_op_and_field_is_in_the_reference():
    text = reference()
    for kind, op in OPS.items():
        assert f"### {kind}\n\n{op.doc}\n" in text
        for name, f in op.fields.items():
            assert f"| `{name}` |" in text and f.doc in text
    for name, f in TOP.items():
        assert f"| `{name}` |" in text and f.doc in text
    # bounds and choices come from the same entries the checks use
    assert "1 to 4,294,967,295 (4 GiB - 1 per copy" in text
    assert "string: `h2d`, `d2h` or `d2d`" in text
    assert "at most 1,024 in x, 1,024 in y, 64 in z" in text


@pytest.mark.parametrize("kind", sorted(OPS))
def test_the_table_drives_the_checks(kind):
    """Required fields are required, defaults are filled in, types and bounds are enforced,
    exactly as the table (and so the reference) says."""
    fields = _required(kind)
    checked = parse_workload(_program(kind, fields), "w.json")["program"][-1]
    for name, f in OPS[kind].fields.items():
        if f.default is REQUIRED:
            missing = {k: v for k, v in fields.items() if k != name}
            with pytest.raises(WorkloadError, match=f"{kind} needs field '{name}'"):
                parse_workload(_program(kind, missing), "w.json")
        elif f.dims:
            assert checked[name] == f.default + [1] * (3 - len(f.default))
        else:
            assert checked[name] == f.default
        takes_str = f.types is str or isinstance(f.types, tuple) and str in f.types
        wrong = 1 if takes_str else "s"
        with pytest.raises(WorkloadError, match=f"{kind}.{name} has the wrong type"):
            parse_workload(_program(kind, {**fields, name: wrong}), "w.json")
        if f.most is not None:
            assert LIMITS[kind, name] == (f.least, f.most, f.why)
            with pytest.raises(WorkloadError, match=f"{kind}.{name} is .*at most"):
                parse_workload(_program(kind, {**fields, name: f.most + 1}), "w.json")
            with pytest.raises(WorkloadError, match=f"{kind}.{name} is .*at least"):
                parse_workload(_program(kind, {**fields, name: f.least - 1}), "w.json")
        if f.choices:
            with pytest.raises(WorkloadError, match="must be " + ", ".join(f.choices[:-1])):
                parse_workload(_program(kind, {**fields, name: "nope"}), "w.json")
        if f.dims:
            too_big = [m + 1 if i == 2 else 1 for i, m in enumerate(f.dims)]
            with pytest.raises(WorkloadError, match=f"{name}.z is {f.dims[2] + 1:,}"):
                parse_workload(_program(kind, {**fields, name: too_big}), "w.json")
    with pytest.raises(WorkloadError, match=f"{kind} has no field"):
        parse_workload(_program(kind, {**fields, "bogus": 1}), "w.json")


def test_top_level_fields_are_the_tables():
    with pytest.raises(WorkloadError, match="unknown top-level field"):
        parse_workload({"program": [], "bogus": 1}, "w.json")
    w = parse_workload({"program": []}, "dir/w.json")
    assert w["name"] == "w" and w["description"] == TOP["description"].default
    most = TOP["max_connections"].most
    with pytest.raises(WorkloadError, match=f"max_connections must be 1..{most}"):
        parse_workload({"program": [], "max_connections": most + 1}, "w.json")


def test_run_help_says_where_the_reference_is(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "docs/workload.md" in out and REFERENCE_COMMAND in out
