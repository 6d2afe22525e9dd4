"""Print, for each bundled scenario named (default: every unprofiled one but the device-side
stamp programs actgap and pdl), the command that records it again: one line
``NAME<TAB>ENV<TAB>BINARY SCENARIO key=value ...`` built from the scenario's own trace header
(its program, its arguments in their order, its connection count) and its name
(``nocupti_``: FE_TRACE_NO_CUPTI=1). Run by record.sh on the lent machine, from the
repository root; ``--list`` prints the default names alone."""
import gzip
import json
import pathlib
import sys

REF = pathlib.Path("sim/analysis/reference/h200")
#: fe_trace2's programs (fe_trace.cu has the others)
FE_TRACE2 = {"pdl", "procs", "gupdate", "cond", "devlaunch", "threads", "actgap"}


def command(name):
    with gzip.open(REF / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        head = json.loads(f.readline())
    env = []
    if name.startswith("nocupti_"):
        env.append("FE_TRACE_NO_CUPTI=1")
    if head.get("max_connections", "default") != "default":
        env.append(f"CUDA_DEVICE_MAX_CONNECTIONS={head['max_connections']}")
    binary = "/tmp/fe_trace2" if head["scenario"] in FE_TRACE2 else "/tmp/fe_trace"
    args = " ".join(f"{k}={v}" for k, v in head["params"].items())
    return f"{name}\t{' '.join(env) or '-'}\t{binary} {head['scenario']} {args}"


def default_names():
    return sorted(p.name[:-len(".jsonl.gz")] for p in REF.glob("nocupti_*.jsonl.gz")
                  if not p.name.startswith(("nocupti_actgap", "nocupti_pdl")))


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print(" ".join(default_names()))
    else:
        for name in sys.argv[1:] or default_names():
            print(command(name))
