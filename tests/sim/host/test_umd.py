"""The UMD's choice of channel: a stream's own while the process has no more streams than
channels, the launches' round robin beyond that (probe ``channel_choice``)."""

from collections import defaultdict

from gpufe.sim.run import simulate
from tests.sim.workloads import streams, launch, workload, kernels


def _channels(records):
    """Stream -> the channel of each of its kernels, in launch order."""
    out = defaultdict(list)
    for k in kernels(records):
        out[k["stream"]].append(k["channel"])
    return out


def _breadth_first(n_streams, rounds, mc, ns=2000):
    names = [f"s{i}" for i in range(n_streams)]
    prog = streams(*names)
    for _ in range(rounds):
        prog += [launch(n, ns) for n in names]
    return workload(prog + [{"op": "device_synchronize"}], max_connections=mc)


def test_more_streams_than_channels_launched_breadth_first_alternate_channels(params):
    # 3 streams on 2 connections, a kernel each a round: the launches' round robin sends
    # each stream's next kernel to the other channel (24 streams on 16 on the H200 alike)
    r = simulate(_breadth_first(3, 6, 2), params)
    chans = _channels(r.records)
    assert len(chans) == 3
    for seq in chans.values():
        assert all(a != b for a, b in zip(seq, seq[1:])), seq
    # and each stream's kernels still run one after another, across the channels
    for s in chans:
        ks = kernels(r.records, s)
        for a, b in zip(ks, ks[1:]):
            assert b["start"] >= a["end"]


def test_no_more_streams_than_channels_keep_their_own(params):
    r = simulate(_breadth_first(4, 5, 4), params)
    chans = _channels(r.records)
    assert sorted(len(set(seq)) for seq in chans.values()) == [1, 1, 1, 1]
    assert len({seq[0] for seq in chans.values()}) == 4


def test_launches_in_a_row_into_one_stream_stay_on_its_channel(params):
    # depth first: each stream's kernels in a row, more streams than channels
    names = [f"s{i}" for i in range(6)]
    prog = streams(*names)
    for n in names:
        prog += [launch(n, 1000) for _ in range(4)]
    r = simulate(workload(prog + [{"op": "device_synchronize"}], max_connections=4), params)
    assert all(len(set(seq)) == 1 for seq in _channels(r.records).values())


def test_streams_a_multiple_of_the_channels_breadth_first_stay_on_stream_mod_channels(params):
    # 8 streams on 4: each round's 8 launches bring the round robin back to where it was
    chans = _channels(simulate(_breadth_first(8, 4, 4), params).records)
    assert all(len(set(seq)) == 1 for seq in chans.values())
    firsts = [seq[0] for _, seq in sorted(chans.items())]
    assert firsts[:4] == firsts[4:]
