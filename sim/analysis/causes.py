"""Named causes of validation rows out of bounds: what is known of why a row is more than 25%
off, with the measurement that shows it, so that `gpufe validate` can say so beside the row.

A cause names the rows it explains (scenarios by pattern, metrics by name) and says what the
H200's trace shows that gpufe does not do, or why the figure cannot be matched (a recording's
artefact, a process's host speed): a cause explains, it does not excuse; the row still counts
as out of bounds. Rows out of bounds that no cause names are the ones nobody has explained.
"""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    key: str                # short name shown beside the row
    scenarios: str          # regular expression a row's scenario must match in full
    metrics: frozenset      # the metrics it explains
    text: str               # what the measurements show, and where
    within_ns: float = None  # only where model and measured (us) are at most this far apart


CAUSES = (
    Cause("cupti-overlap", r"graph_nodes10000|gupdate_n(300|3000)", frozenset({"max_concurrent"}),
          "CUPTI's timestamps: 1 to 7 pairs of one stream's kernels overlap by 63-480 ns "
          "among 6,000-60,000 records; kernels of one stream never run at once"),
    Cause("timestamp-tick", r".*", frozenset({"median_gap_us", "submitted_to_start_us"}),
          "a figure of a few tens of nanoseconds: model and measured are at most two ticks "
          "apart of the H200's 32 ns timestamps (its kernels' recorded lengths come in "
          "steps of 32 ns)",
          within_ns=64.0),
    Cause("graph-split", r"graph_nodes10000", frozenset({"gpu_span_us"}),
          "in four of the six launches of the 10,000-node graph the H200 stops after node "
          "1,700 for 2.3 to 5.4 ms (until the launch call has returned, in two of them) and "
          "runs the rest after; the first launch runs straight through in 8.08 ms, as "
          "gpufe's do (8.01)"),
    Cause("launch-in-span", r"dl_tail(ff)?_b[124]_m100", frozenset({"gpu_span_us"}),
          "the span, from the plain kernel k_set to the graph's last recorded kernel, holds "
          "the repetition's one cudaGraphLaunch call, which decides it (on the H200 the span "
          "is the call plus 3.4-9.1 us, the call 7.2 to 42.4 us by process and repetition: "
          "the host's first graph launch of a repetition, as in first-launch)"),
    Cause("record-length", r"actgap_c16_A24_g100_hi[012]|threads_T6_sh0",
          frozenset({"median_kernel_us"}),
          "a kernel's record ends behind the next launch of another stream that the front "
          "end is working towards (cupti_end_wait_ns), so its length follows how far the "
          "front end is behind: gpufe's 6 threads launch 17% faster than the H200's "
          "(threads_launches_per_us 0.55 against 0.47) and keep it two launches behind, so "
          "every record waits (1.20 us); the H200 is behind half the time (0.67; 8 threads: "
          "1.18 in both). At A = 24 the H200's long record is the first of a "
          "channel's visit (1.25 us), gpufe's the last (bench/record_lengths.py)"),
    Cause("record-overlap", r"threads_T3_sh0", frozenset({"max_concurrent"}),
          "two kernels of different threads overlap on the H200 because a record ends behind "
          "another stream's launch (bench/record_lengths.py); with 3 threads gpufe's front "
          "end is hardly ever behind enough for one to (6 of 18,030 records; 4 threads: 2 "
          "in both)"),
    Cause("free-slot", r"nocupti_actgap_stamp_c16_A4_g100_hi[12]_load100",
          frozenset({"hi_period_us", "hi_chain_us"}),
          "a high-priority chain under a full-GPU load waits for a block slot the load frees: "
          "its period is set by how many of the load's blocks run out of step with its "
          "wave, which depends on when the four chains' gates end (the host's launches) and "
          "on which of those blocks the chain keeps using: the chaos of phases. The same "
          "program ran 5.2 us a kernel with two high-priority chains on the sm_placement "
          "probe's H100 where the H200 ran 7.3; gpufe's profiled runs of both are within "
          "3% (9.8 against 9.6, 11.3 against 11.4 us), unprofiled 9.6 against 7.1 (one "
          "chain) and 4.4 against 7.3 (two)"),
    Cause("slot-wait", r"actgap_c16_A1_g100_hi1_load100",
          frozenset({"median_gap_us", "submitted_to_start_us"}),
          "a high-priority chain beside the full-GPU load: each kernel waits for a block "
          "slot the load frees, at once or up to a wave (20 us); both wait at once for a "
          "quarter of the kernels (0.5 us) and the chain's period agrees (9.9 us against "
          "10.7; unprofiled 9.56 against 9.36), but the H200's other waits bunch near a "
          "whole wave (18.0-18.2 us at 75-90%) where gpufe's spread between (13.7 at 75%), "
          "so the medians of the waits (3.6 against 6.5 us) and gaps fall apart"),
    Cause("graph-start-per-node", r"dl_hostplain_b1_m100_gate", frozenset({"dl_ctrl_to_next_us"}),
          "queued behind the gate, the next graph's first kernel after the control kernel: "
          "under CUPTI the H200's gap grows with the graph (dl_hostplain 2.70, 3.14, 3.78 us "
          "at 2, 3, 5 nodes; dl_host 7.50, 8.03, 8.56), unprofiled it does not (1.95, 2.24, "
          "2.24; 5.41, 4.99, 4.93); gpufe's is one figure for every size (3.51; 7.21), "
          "fitted between"),
    Cause("few-records", r"dl_tail_b1_m100", frozenset({"median_kernel_us"}),
          "the median of 12 records (4 repetitions of k_set, k_stamp and k_ctrl): the "
          "b = 1 graph's k_stamp records 0.736 us on the H200, the same node 0.960 in the "
          "b = 2 and 4 graphs (gpufe 0.961 in all three)"),
    Cause("host-lead", r"fanout_c(1|8|32)_s256", frozenset({"submitted_to_start_us"}),
          "the lead the host's 256 streams of launches build over the GPU: 211 to 569 us "
          "over the six recordings of c8_s256 (c1: 372-565, c32: 324-603), the launch "
          "call's median 5.3-8.2 us among them; gpufe's launch call (5.66 us) is at the "
          "fast end of those, and its lead (587 us) at the top of the spread"),
    Cause("graph-record-place", r"graph_nodes1", frozenset({"gpu_span_us", "median_kernel_us"}),
          "CUPTI's graph kernel records vary with the node's place: the lone node of a "
          "1-node graph records 0.544 us on the H200 (5 of 6 launches; a stream kernel's "
          "length), in 10-node graphs the first 0.83-0.87, the middle ones 0.61-0.67, the "
          "last 0.74-0.93; gpufe gives every graph node 0.704 (cupti_graph_kernel_ns, "
          "fitted on chain_graph_gate's 1,000-node graph)"),
    Cause("grid-record", r"grid_132", frozenset({"median_kernel_us"}),
          "the H200 records the 128-thread k_empty of 1 and 132 blocks at 0.512 and 0.545 us "
          "(20 launches each, grid_1 and grid_132), where chain's 32-thread one records "
          "0.607 (3,000 launches); gpufe's record is chain's (0.608) plus the blocks' "
          "placement (0.687 at 132 blocks)"),
    Cause("first-graph-launch", r"gupdate_n10", frozenset({"gu_first_launch_sync_us"}),
          "under CUPTI the H200's first launch of a new graph takes 46.8 us at 10 nodes "
          "(later launches 8.9-11.5), 84 at 30, 343 at 100: 36, 61 and 220 us more than a "
          "warm launch, about 2 us a node and ~15 us that does not grow; gpufe's first "
          "launch (its upload, per node) adds 16.5 us at 10 nodes and 160 at 100, nothing "
          "fixed (unprofiled the first launch and sync agree within 12%)"),
    Cause("spin-launch", r"nocupti_chain_ns1000_g0", frozenset({"wall_per_rep_us"}),
          "host-bound: the H200's host issues 300 1-us spin kernels at 6.0 us a launch (five "
          "repetitions: 5.3-6.1), slower than 1,000 empty ones (4.0-4.6, nocupti_chain_g0) "
          "and 5-us spin ones (4.8-5.4, nocupti_chain_ns5000_g0) in the same program; "
          "gpufe's launch costs the same for every kernel (4.4 us)"),
    Cause("reinst-launch", r"nocupti_gupdate_n3000", frozenset({"gu_reinst_launch_sync_us"}),
          "the re-instantiated 3,000-node graph's launch and sync: on the H200 4.32-5.36 ms "
          "over five repetitions (median 4.95), less than the first graph's 5.54 ms though "
          "its kernels spin 100-500 ns more; gpufe's (7.33 ms) is more than its own first "
          "launch's (6.37): its re-instantiated graph's upload costs what a new graph's "
          "does (graph_upload_per_node_ns, 1.58 us a node)"),
    Cause("two-modes", r"(condhost|dl_hostplain)_b1_m100(_gate)?", frozenset({"median_gap_us"}),
          "a median between two modes: the graph's two kernels give 400 gaps inside a launch "
          "(H200 0.288 us, gpufe 0.097) and 396 between launches (H200 3.74 host-bound, "
          "1.54-1.63 queued behind the gate; gpufe 3.45 and 2.46), so the median is the mean "
          "of the last of one mode and the first of the other; queued, the H200's gap "
          "between launches grows with the graph under CUPTI (1.63, 1.98, 2.62 us at 2, 3 "
          "and 5 nodes, dl_hostplain_b{1,2,4}_m100_gate), gpufe's does not (2.46)"),
    Cause("first-launch",
          r"(dl_(host|hostplain|ff)|condhost)_b[124]_m100_gate", frozenset({"launch_api_us"}),
          "the median of six launches, three of them a repetition's first (k_gate, 20 ms "
          "after the thread's previous launch: cold, and in the first repetition its "
          "function's first launch), so the mean of the fastest cold launch and the slowest "
          "warm one: gpufe's cold launch takes 52 us (cold_call_factor), the H200's 10-58 us "
          "in most processes and 5-8 us in some (dl_ff_b4's: 5.1 and 5.3, as warm; the "
          "thread kept its CPU through the wait), which sets the median of its b = 4 "
          "programs' runs 10-12 us against gpufe's 16-17 (probe host_repeats)"),
    Cause("issue-speed", r"nocupti_dl_(host|hostplain|ff)_b[124]_m100(_gate)?",
          frozenset({"dl_issue_us"}),
          "the host's time per graph launch moves by process: on the same host type (an "
          "H100 machine, probe unprofiled_repeats) the gated hostplain programs issue at "
          "1.59-2.78 us over five processes (medians 2.37-2.62; gpufe 2.56-2.57), host_b4 "
          "gated at 4.57-5.26 (5.09; gpufe 5.36), ff_b2 gated 3.66-5.44 (4.94; 5.35), "
          "host_b2 4.48-5.19 (4.88; 4.82); the H200's one recording of each lies at the "
          "fast end or below (1.54-1.65, 3.51, 3.62, 3.62): some processes issue ~35% "
          "faster"),
)

_COMPILED = [(re.compile(c.scenarios), c) for c in CAUSES]


def cause_of(row):
    """The :class:`Cause` naming validation ``row`` (a dict with scenario and metric), or
    None."""
    for pattern, cause in _COMPILED:
        if (row["metric"] in cause.metrics and pattern.fullmatch(row["scenario"])
                and (cause.within_ns is None
                     or abs(row["model"] - row["measured"]) * 1e3 <= cause.within_ns)):
            return cause
    return None
