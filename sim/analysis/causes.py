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
    Cause("record-length", r"actgap_c16_A24_g100_hi[012]|threads_T(8|12)_sh0",
          frozenset({"median_kernel_us"}),
          "CUPTI's kernel records lengthen with other channels' kernels pending at their end "
          "on the H200 (0.58 us with none, 0.96-1.22 with two, 1.15-1.18 with three or more; "
          "at A = 24 the first of a channel's visit is the long one), gpufe's stay 0.61 us "
          "(bench/record_lengths.py)"),
    Cause("record-overlap", r"threads_T[34]_sh0", frozenset({"max_concurrent"}),
          "two kernels of different threads overlap on the H200 because their records are "
          "longer with several channels busy (bench/record_lengths.py); gpufe's records "
          "are not, and its kernels do not overlap"),
    Cause("cond-stream", r"cond_b[124]_m100", frozenset({"channels_used"}),
          "CUPTI records a WHILE node's body kernels on the device runtime's stream (15) and "
          "another channel (0) than the graph's own kernel (stream 13, channel 2); gpufe "
          "records them on the channel that launched the graph"),
    Cause("free-slot", r"(nocupti_)?actgap(_stamp)?_c16_A4_g100_hi[12]_load100",
          frozenset({"hi_period_us", "hi_chain_us", "median_gap_us", "stream_period_us"}),
          "a high-priority chain under a full-GPU load waits for a freed block slot; on the "
          "H200 one is free about half as often as in gpufe at A = 4 (probe sm_placement: "
          "gaps of 4.1, 7.4 and 12.9 us; gpufe's load blocks start 171 times per 800 us "
          "against the H200's 119)"),
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
