"""Issue 41's graph-update classes: an update reaches a conditional node's body; a device
graph takes an update in stream order (launches queued before it keep the old parameters;
its next upload or host launch brings the new ones); updates CUDA refuses are refused at
the update, with the op's path; the run limits see what an update brings; a run-time error
names its thread."""

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import ProgramError, WorkloadError, check_run, parse_workload
from tests.sim.workloads import streams, launch, workload


def capture(graph, ops, stream="s"):
    return ([{"op": "stream_begin_capture", "stream": stream}] + ops
            + [{"op": "stream_end_capture", "stream": stream, "graph": graph}])


def dgl_kernel(name, graph, mode, count=1, ns=0):
    op = launch("s", ns, kernel=name)
    op["device_graph_launch"] = {"graph": graph, "mode": mode, "count": count}
    return op


def work_of(records, kernel="k_work"):
    """(start, block work) of every run of ``kernel``, in start order."""
    ks = sorted((r for r in records if r["kind"] == "kernel" and r["name"] == kernel),
                key=lambda r: r["start"])
    return [(k["start"], k["end"] - k["start"]) for k in ks]


def run(params, prog):
    return simulate(workload(prog), params, backend="compiled").records


def test_an_update_reaches_a_conditional_nodes_body(params):
    def cond_graph(g, body, ns):
        return (capture(body, [launch("s", ns, kernel="k_work")])
                + [{"op": "graph_create", "graph": g},
                   {"op": "graph_add_conditional", "graph": g, "kind": "while",
                    "body": body, "iterations": 3}])
    prog = (streams("s") + cond_graph("g", "b1", 1000) + cond_graph("g20", "b20", 20_000)
            + [{"op": "graph_instantiate", "graph": "g"},
               {"op": "graph_launch", "graph": "g", "stream": "s"},
               {"op": "graph_exec_update", "graph": "g", "from": "g20"},
               {"op": "graph_launch", "graph": "g", "stream": "s"},
               {"op": "stream_synchronize", "stream": "s"}])
    runs = [d for _, d in work_of(run(params, prog))]
    assert len(runs) == 6
    assert all(d < 2_000 for d in runs[:3])
    assert all(20_000 <= d < 21_000 for d in runs[3:])


def tail_program(upload=False):
    return (streams("s") + capture("loop", [launch("s", 1000, kernel="k_work"),
                                            dgl_kernel("k_ctrl", "loop", "tail", 3)])
            + [{"op": "graph_instantiate", "graph": "loop", "device_launch": True},
               launch("s", 100_000, kernel="gate"),
               {"op": "graph_launch", "graph": "loop", "stream": "s"},
               {"op": "graph_exec_set_params", "graph": "loop", "nodes": [0],
                "block_ns": 20_000}]
            + ([{"op": "graph_upload", "graph": "loop", "stream": "s"}] if upload else [])
            + [{"op": "graph_launch", "graph": "loop", "stream": "s"},
               {"op": "stream_synchronize", "stream": "s"}])


@pytest.mark.parametrize("upload", [False, True])
def test_a_tail_loop_queued_before_an_update_keeps_the_old_parameters(params, upload):
    runs = [d for _, d in work_of(run(params, tail_program(upload)))]
    assert len(runs) == 8
    # the first launch (queued behind the gate when the update came) and its three tail
    # launches: 1 us; the second launch and its tail launches: 20 us
    assert all(d < 2_000 for d in runs[:4]), runs
    assert all(20_000 <= d < 21_000 for d in runs[4:]), runs


def ff_program(upload):
    return (streams("s") + capture("child", [launch("s", 1000, kernel="k_work")])
            + [{"op": "graph_instantiate", "graph": "child", "device_launch": True}]
            + capture("launcher", [dgl_kernel("k_launcher", "child", "fire_and_forget")])
            + [{"op": "graph_instantiate", "graph": "launcher"},
               launch("s", 100_000, kernel="gate"),
               {"op": "graph_launch", "graph": "launcher", "stream": "s"},
               {"op": "graph_exec_set_params", "graph": "child", "nodes": "all",
                "block_ns": 20_000}]
            + ([{"op": "graph_upload", "graph": "child", "stream": "s"}] if upload else [])
            + [{"op": "graph_launch", "graph": "launcher", "stream": "s"},
               {"op": "stream_synchronize", "stream": "s"}])


def test_a_fire_and_forget_child_takes_an_update_with_its_upload_in_stream_order(params):
    first, second = [d for _, d in work_of(run(params, ff_program(upload=True)))]
    assert first < 2_000 and 20_000 <= second < 21_000
    # not uploaded again, the device still launches what it was given
    first, second = [d for _, d in work_of(run(params, ff_program(upload=False)))]
    assert first < 2_000 and second < 2_000


def update_program(a, b, device_launch=False):
    return (streams("s") + capture("g", a) + capture("h", b)
            + [{"op": "graph_instantiate", "graph": "g", "device_launch": device_launch},
               {"op": "graph_exec_update", "graph": "g", "from": "h"}])


COPY = {"op": "memcpy_async", "stream": "s", "kind": "h2d", "bytes": 4096}


@pytest.mark.parametrize("a, b, why", [
    ([COPY], [dict(COPY, kind="d2h")],
     r"node 0 copies d2h, not h2d \(a copy node's memory types cannot change\)"),
    ([launch("s", 0, kernel="k")], [dgl_kernel("k", "g", "tail", 2)],
     r"node 0's kernel launches graph 'g' from the device, which the instantiated kernel "
     r"does not"),
])
def test_updates_cuda_refuses_are_refused(params, a, b, why):
    with pytest.raises(ProgramError, match=r"program\[8\] \(graph_exec_update\): the executable "
                                           r"graph of 'g' cannot "
                                           r"take the parameters of graph 'h': "
                                           + why + r".*cudaErrorGraphExecUpdateFailure"):
        run(params, update_program(a, b))


def test_an_update_pointing_a_device_launch_at_a_plain_graph_fails_at_the_update(params):
    a = [dgl_kernel("k", "other", "fire_and_forget", 0)]
    b = [dgl_kernel("k", "other", "fire_and_forget", 1)]
    prog = (streams("s") + capture("other", [launch("s")])
            + [{"op": "graph_instantiate", "graph": "other"}] + update_program(a, b)[1:])
    with pytest.raises(ProgramError, match=r"program\[12\] \(graph_exec_update\).*launches "
                                           r"graph 'other' from the device, which is not "
                                           r"instantiated with device_launch"):
        run(params, prog)


def test_a_device_launch_of_a_graph_nobody_made_says_so(params):
    prog = (streams("s") + capture("g", [dgl_kernel("k", "nowhere", "fire_and_forget")])
            + [{"op": "graph_instantiate", "graph": "g"}])
    with pytest.raises(ProgramError, match=r"launches graph 'nowhere' from the device, which "
                                           r"no stream_end_capture or graph_create has made"):
        run(params, prog)


BIG = [1 << 30, 2, 1]        # 2^31 blocks


@pytest.mark.parametrize("how", ["direct", "update", "tail count"])
def test_run_limits_see_what_an_update_brings(params, how):
    small = [launch("s", 1000, kernel="k")]
    if how == "direct":
        prog = streams("s") + [launch("s", 1000, kernel="k", grid=BIG)]
    elif how == "update":
        prog = (update_program(small, [launch("s", 1000, kernel="k", grid=BIG)])
                + [{"op": "graph_launch", "graph": "g", "stream": "s"}])
    else:
        prog = (update_program([dgl_kernel("k", "g", "tail", 1)],
                               [dgl_kernel("k", "g", "tail", (1 << 31) - 1)],
                               device_launch=True)
                + [{"op": "graph_launch", "graph": "g", "stream": "s"}])
    with pytest.raises(WorkloadError, match="the limit is"):
        check_run(workload(prog), params)
    # the graph as captured alone is within them
    if how != "direct":
        check_run(workload(prog[:-2] + prog[-1:]), params)


def test_set_params_longer_blocks_count_against_the_time_bound(params):
    prog = (streams("s") + capture("g", [launch("s", 1000, kernel="k", grid=[100_000, 1, 1])])
            + [{"op": "graph_instantiate", "graph": "g"},
               {"op": "graph_exec_set_params", "graph": "g", "block_ns": 10**9},
               {"op": "repeat", "count": 100_000,
                "body": [{"op": "graph_launch", "graph": "g", "stream": "s"}]}])
    with pytest.raises(WorkloadError, match="simulated time"):
        check_run(workload(prog), params, limits=False)
    check_run(workload(prog[:-2] + prog[-1:]), params, limits=False)
