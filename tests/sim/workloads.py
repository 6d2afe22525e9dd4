"""Small workloads for the host-model tests, built as the JSON files would be."""

from gpufe.sim.host.workload import parse_workload


def streams(*names, priorities=None):
    return [{"op": "stream_create", "name": n, "priority": (priorities or {}).get(n, 0)}
            for n in names]


def launch(stream, ns=0, kernel=None, grid=(1, 1, 1), block=(32, 1, 1)):
    return {"op": "launch_kernel", "stream": stream, "kernel": kernel or f"k_{stream}",
            "grid": list(grid), "block": list(block), "block_ns": ns}


def workload(program, name="test", max_connections=None):
    return parse_workload({"name": name, "max_connections": max_connections,
                           "program": program}, name)


def kernels(records, stream=None):
    ks = [r for r in records if r["kind"] == "kernel"]
    return sorted(ks, key=lambda r: r["corr"]) if stream is None else \
        sorted((k for k in ks if k["stream"] == stream), key=lambda r: r["corr"])
