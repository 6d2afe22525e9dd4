"""The parameter set: every latency, rate and size of the model, in one object.

Each value is written once, in a parameter file: ``sim/params/h200.json`` (the output of
``gpufe calibrate``) holds every parameter; :class:`Params` has no values of its own, only
the list of parameters, each with its meaning, unit and range. ``load("h200")`` reads the
shipped set; any other file may give only some parameters, the others are :data:`BASE`'s.
``gpufe params`` lists the sets and, for one, every parameter; ``--set name=value``
(:func:`apply_settings`) overrides one for a run. Times are ns; the front end's clock turns
them into cycles where the RTL needs them. The front end's sizes for a run come from the set
alone (:meth:`Params.frontend_config`).
"""

from dataclasses import dataclass, field, fields, asdict, replace
import functools
import json
import math
import pathlib

from gpufe.rtl.config import FrontEndConfig, bits_for

_HERE = pathlib.Path(__file__).parent
#: the shipped set: it gives every parameter, and the values a file of one's own leaves out
BASE = "h200"


def _p(doc, unit="", lo=None, hi=None, note=""):
    """A parameter: what it is, its unit, the range a file may give (numbers) and why."""
    return field(metadata={"doc": doc, "unit": unit, "range": (lo, hi), "note": note})


def _ns(doc, lo=0, note=""):
    return _p(doc, "ns", lo, 1e9, note)


def _cpu(doc, lo=0, note=""):
    """A CPU time of the driver or the profiler: it runs as fast as the host does, so a run
    multiplies it by ``host_cpu_scale`` (:meth:`Params.on_host`)."""
    f = _ns(doc, lo, note)
    return field(metadata={**f.metadata, "host_cpu": True})


def _rate(doc):
    return _p(doc, "bytes/ns (GB/s)", 0.001, 1e6)


@dataclass(frozen=True)
class Params:
    name: str = _p("name of the parameter set")
    # -- device --
    device: str = _p("device name written into timeline headers")
    clock_ghz: float = _p("front-end clock; one RTL cycle is 1/clock_ghz ns", "GHz", 0.001, 100)
    sms: int = _p("streaming multiprocessors", "SMs", 1, 1024)
    max_threads_per_sm: int = _p("resident threads per SM", "threads", 1024, 65536,
                                 "(a block may have 1,024 threads)")
    max_blocks_per_sm: int = _p("resident thread blocks per SM", "blocks", 1, 1024)
    max_resident_kernels: int = _p("kernels that may have blocks on the SMs at once",
                                   "kernels", 1, 65536)
    block_dispatch_ns: float = _ns("work distributor: time between two block placements")
    dispatch_switch_ns: float = _ns("work distributor: setting up another kernel's blocks "
                                    "while the kernel it leaves has blocks left to place "
                                    "(a kernel of greater priority takes the next free "
                                    "slot), and again as it goes back to that kernel")
    launch_latency_ns: float = _ns("compute dispatch by the CP -> kernel eligible for block "
                                   "placement (descriptor fetch, setup)")
    graph_launch_latency_ns: float = _ns("graph node dispatch by the walker -> kernel eligible "
                                         "(launch state prepared at instantiation)")
    block_overhead_ns: float = _ns("fixed run time of every block on top of block_ns")
    kernel_end_ns: float = _ns("last block done -> completion reported to the front end")
    # -- host threads (the driver's locks) --
    thread_contention_ns: float = _ns("host threads: a launch while another thread of its "
                                      "process is inside a CUDA call: the driver's shared "
                                      "state comes over from another CPU's cache (memory-"
                                      "system time, not the core's: as long on a slow vCPU as "
                                      "on a fast one)")
    thread_contention_per_thread_ns: float = _ns("host threads: and this much more for each "
                                                 "other thread launching at that moment (not "
                                                 "waiting for a lock): the lines go back and "
                                                 "forth between more CPUs")
    lock_turn_ns: float = _ns("host threads: a driver lock goes to a thread that has waited "
                              "this long, not back to the thread that released it (the "
                              "lock is unfair: turns this long on a shared stream)")
    lock_wake_ns: float = _ns("host threads: a thread sleeping on a driver lock runs this long "
                              "after the release that wakes it (by then the releasing thread "
                              "has taken the lock back, unless its turn is over: then the "
                              "lock, handed to the waiter, is idle this long)")
    # -- programmatic dependent launch --
    pdl_launch_ns: float = _ns("PDL: the primary kernel triggers (all its blocks) -> the "
                               "dependent kernel, already dispatched, eligible for block "
                               "placement")
    pdl_flush_ns: float = _ns("PDL: the primary's last block exits -> "
                              "cudaGridDependencySynchronize returns in the dependent's blocks "
                              "(memory flush and notification)")
    pdl_window: int = _p("PDL in a stream: kernels that may be in flight at once (a "
                         "programmatic launch still waits in its channel for the completion "
                         "of the kernel this many launches before it)", "kernels", 1, 1 << 16)
    # -- copy engines --
    copy_latency_ns: float = _ns("copy dispatch -> first byte moves")
    h2d_bytes_per_ns: float = _rate("host-to-device copy bandwidth")
    d2h_bytes_per_ns: float = _rate("device-to-host copy bandwidth")
    d2d_bytes_per_ns: float = _rate("device-to-device copy bandwidth")
    # -- PCIe and host memory --
    mmio_write_ns: float = _ns("doorbell MMIO write: CPU store -> register written")
    dma_read_latency_ns: float = _ns("DMA read request -> first dword back")
    dma_read_bytes_per_ns: float = _rate("DMA read bandwidth of the fetcher's path")
    dma_write_ns: float = _ns("front end's DMA write port busy per 8-byte write (semaphore "
                              "and timestamp writes)")
    timestamp_hold_ns: float = _ns("a RELEASE_WFI timestamp release (an event's time) holds its "
                                   "channel this long after its writes (the timestamp's round "
                                   "trip)")
    stamp_hold_ns: float = _ns("a timestamp release without WFI (a front-end time stamp: "
                               "CUPTI's per-launch `submitted`) holds its channel this long "
                               "after its writes")
    stamp_fetch_ns: float = _ns("added to a timestamp release's round trip while its channel's "
                                "PBDMA still has GPFIFO entries to fetch (the write is "
                                "confirmed behind the prefetch reads)")
    host_write_visible_ns: float = _ns("DMA write issued -> visible to CPU polling (fitted: a "
                                       "host wait ends ~2.4 us after its kernel on the H200)")
    # -- CPU: the runtime API (time of each call when it does not block) --
    launch_cpu_ns: float = _cpu("cudaLaunchKernel")
    launch_encode_ns: float = _cpu("launch call start -> commands in the push buffer (CUPTI "
                                   "queued)")
    kickoff_ns: float = _ns("commands queued -> GPFIFO entry and doorbell written (CUPTI "
                            "submitted); bound by the writes to the GPU, not by the CPU's "
                            "speed (the same on the reference's fast and slow vCPUs)")
    kickoff_batch: int = _p("API calls whose commands the UMD gathers into one GPFIFO entry "
                            "and doorbell (synchronizing calls flush at once)", "calls", 1, 1024)
    memcpy_cpu_ns: float = _cpu("cudaMemcpyAsync")
    event_record_cpu_ns: float = _cpu("cudaEventRecord, DisableTiming event")
    event_record_timing_cpu_ns: float = _cpu("cudaEventRecord, timing event")
    stream_wait_event_cpu_ns: float = _cpu("cudaStreamWaitEvent")
    stream_create_cpu_ns: float = _cpu("cudaStreamCreate")
    event_create_cpu_ns: float = _cpu("cudaEventCreate")
    sync_call_ns: float = _cpu("synchronize call overhead before it starts waiting")
    sync_return_ns: float = _cpu("semaphore seen in host memory -> synchronize returns")
    query_cpu_ns: float = _cpu("one cudaEventQuery", lo=1,
                              note="(event_query spins: each query must take time)")
    begin_capture_cpu_ns: float = _cpu("cudaStreamBeginCapture")
    capture_call_cpu_ns: float = _cpu("a launch, copy or event call while capturing")
    end_capture_cpu_ns: float = _cpu("cudaStreamEndCapture")
    capture_first_cpu_ns: float = _cpu("a process's first cudaStreamBeginCapture: the capture "
                                       "machinery's setup, once")
    capture_grow_per_node_ns: float = _cpu("a captured launch or copy beyond the most nodes any "
                                           "capture of the process has held: the driver's "
                                           "node store grows")
    instantiate_cpu_ns: float = _cpu("cudaGraphInstantiate, fixed part")
    instantiate_per_node_ns: float = _cpu("cudaGraphInstantiate, per node")
    graph_launch_cpu_ns: float = _cpu("cudaGraphLaunch, fixed part")
    graph_launch_per_node_ns: float = _cpu("cudaGraphLaunch, per node")
    graph_branch_cpu_ns: float = _cpu("cudaGraphLaunch of a graph captured from several "
                                      "streams: each branch after the first is handed to the "
                                      "device this long after the one before (under CUPTI "
                                      "after its nodes' records too)",
                                      note="probe graph_branches (H100, the reference's host "
                                           "type): branches start 0.64-1.22 us apart, the "
                                           "call ~1 us longer a branch")
    device_runtime_launch_cpu_ns: float = _cpu("a host launch (cudaGraphLaunch or "
                                               "cudaLaunchKernel) of a graph or kernel holding "
                                               "device-runtime code: the driver's set-up of "
                                               "the device runtime's environment for it")
    graph_set_params_cpu_ns: float = _cpu("cudaGraphExecKernelNodeSetParams, one node")
    graph_update_cpu_ns: float = _cpu("cudaGraphExecUpdate, fixed part")
    graph_update_per_node_ns: float = _cpu("cudaGraphExecUpdate, per node")
    graph_exec_destroy_cpu_ns: float = _cpu("cudaGraphExecDestroy, fixed part")
    graph_exec_destroy_per_node_ns: float = _cpu("cudaGraphExecDestroy, per node: its "
                                                 "memory goes back to the graph pool")
    graph_reinstantiate_per_node_ns: float = _cpu(
        "cudaGraphInstantiate per node when the graph pool holds memory freed by "
        "cudaGraphExecDestroy for all its nodes (nothing allocated: the writes only)")
    graph_upload_per_node_ns: float = _cpu("an executable graph's first launch: its upload, "
                                           "per node, before the submission")
    # the driver's state of a graph against the host CPU's cache: an operation that walks a
    # graph's nodes finds those of up to graph_cache_nodes in the cache; beyond, every
    # further node costs its misses, the more the more the operation touches of it
    graph_cache_nodes: float = _p("nodes of a graph whose driver state fits the host CPU's "
                                  "cache: graph operations on more pay each further node's "
                                  "misses (the *_miss_ns)", "nodes", 1, 1e9)
    graph_update_miss_ns: float = _cpu("cudaGraphExecUpdate: per node beyond "
                                       "graph_cache_nodes, its misses")
    graph_exec_destroy_miss_ns: float = _cpu("cudaGraphExecDestroy: per node beyond "
                                             "graph_cache_nodes, its misses")
    graph_reinstantiate_miss_ns: float = _cpu("a re-instantiation (graph pool holding the "
                                              "memory): per node beyond graph_cache_nodes")
    graph_upload_miss_ns: float = _cpu("a first launch's upload: per node beyond "
                                       "graph_cache_nodes, its misses")
    capture_miss_ns: float = _cpu("a captured call when the capture already holds "
                                  "graph_cache_nodes nodes or more: its misses")
    host_cpu_scale: float = _p("the host CPU's time for the driver's and the profiler's work "
                               "relative to the host this set was calibrated on: every CPU "
                               "time of this group and CUPTI's are multiplied by it", "x",
                               0.05, 20)
    host_fast_cpu_scale: float = _p("host_cpu_scale of the reference machine's fast vCPUs (its "
                                    "guest's vCPUs run at two speeds; the set is calibrated on "
                                    "a slow one): the CPU times' scale that gives their launch "
                                    "calls, the kickoff taking the same time on both; traces "
                                    "recorded on a fast one are validated with it", "x", 0.05,
                                    20)
    function_load_cpu_ns: float = _cpu("a kernel function's first launch from the host: "
                                       "CUDA's lazy loading puts its code on the GPU (a "
                                       "function first captured into a graph is loaded with "
                                       "the graph)")
    # a call's code and data leave the host CPU's caches while its thread does other things
    # (sleeps in a synchronize, runs its own code): the first launch after a while misses
    cold_call_factor: float = _p("a launch call (cudaLaunchKernel, cudaLaunchKernelEx or "
                                 "cudaGraphLaunch) whose code and data have left the host "
                                 "CPU's caches costs this many times its warm CPU time more "
                                 "(the refill), scaled by how far they have gone "
                                 "(cold_decay_ns)", "x", 0, 100)
    cold_decay_ns: float = _ns("how fast a thread's launch path leaves the caches: a launch "
                               "t ns after the thread's previous one of its kind pays "
                               "cold_call_factor x (1 - exp(-t / cold_decay_ns)) of its warm "
                               "CPU time more", lo=1)
    acquire_retry_ns: float = _ns("syncpoint change -> parked acquires re-checked (a channel "
                                  "that failed an acquire retries after this)")
    acquire_poll_ns: float = _ns("re-checking one channel parked on an acquire and on no "
                                 "PBDMA (its acquire state read back from its context): after "
                                 "a syncpoint change, such channels are polled one at a time, "
                                 "round robin")
    # -- the profiler (--profiler cupti: CUPTI activity tracing, as the traces were taken) --
    cupti_launch_ns: float = _cpu("CUPTI: CPU time added inside every cudaLaunchKernel")
    cupti_call_gap_ns: float = _cpu("CUPTI: CPU time added after every API call")
    # a call captured into a graph launches nothing: CUPTI's callbacks run around it, but no
    # kernel activity record is set up inside it nor finished after it
    cupti_captured_call_ns: float = _cpu("CUPTI: CPU time added inside a launch or copy "
                                         "captured into a graph (its runtime record ends "
                                         "after it)")
    cupti_captured_gap_ns: float = _cpu("CUPTI: CPU time added after a captured launch or "
                                        "copy, instead of cupti_call_gap_ns")
    cupti_graph_node_ns: float = _cpu("CUPTI: cudaGraphLaunch CPU time added per node (its "
                                     "per-node records)")
    profiler_op_ns: float = _cpu("torch.profiler: CPU time per operator record (Kineto's "
                                 "cpu_op) beyond CUPTI's per-call costs; a replay takes it "
                                 "out of a trace's CPU gaps for --profiler off")
    # CUPTI's time per node of the graph operations, each its own (its callbacks differ by
    # what the operation does to a node: new parameters, a node freed, a node made)
    cupti_graph_update_node_ns: float = _cpu("CUPTI: CPU time per node of cudaGraphExecUpdate")
    cupti_graph_set_params_ns: float = _cpu("CUPTI: CPU time of a SetParams call's node")
    cupti_graph_destroy_node_ns: float = _cpu("CUPTI: CPU time per node of "
                                              "cudaGraphExecDestroy")
    cupti_graph_reinstantiate_node_ns: float = _cpu("CUPTI: CPU time per node of a "
                                                    "re-instantiation (into the graph pool a "
                                                    "destroyed executable graph freed)")
    cupti_kernel_ns: float = _ns("CUPTI: added to every kernel's duration (its timestamps)")
    cupti_graph_kernel_ns: float = _ns("CUPTI: added to every graph kernel's duration")
    cupti_device_launch_ns: float = _ns("CUPTI: added to each operation of the device "
                                        "runtime (a fire-and-forget device-side "
                                        "cudaGraphLaunch call, where it is measured; a tail "
                                        "launch as its launching graph completes; a host "
                                        "launch's set-up of a graph holding its code); a tail "
                                        "launch's call itself, measured, pays next to "
                                        "nothing")
    cupti_cond_record_ns: float = _ns("CUPTI: each iteration of a conditional node takes this "
                                      "much more per node of its body before the body's "
                                      "roots start (CUPTI records the body's kernels one by "
                                      "one, on the device runtime's stream: its cost follows "
                                      "the body's kernels, not the iteration)")
    cupti_flush_ns: float = _ns("CUPTI: added to a PDL dependent's wait after its primary's "
                                "exit (the primary's end record, written as its grid "
                                "completes, goes out with the memory flush the dependent "
                                "waits for)")
    cupti_release_ns: float = _ns("CUPTI: a stream kernel's end -> its completion reaches the "
                                  "front end (its end timestamp is written first), so the "
                                  "kernel waiting for it starts later")
    cupti_launch_hold_ns: float = _ns("CUPTI latency timestamps: front-end time after every "
                                      "kernel launch it dispatches (0 in h200, not fitted: "
                                      "the CP's wait for each launch's time stamp gives the "
                                      "profiled cost)")
    cupti_submitted_lead_ns: float = _ns("CUPTI latency timestamps: once a context's stamp "
                                         "slots are all taken (sim/host/profiler.py), a "
                                         "launch's `submitted` is recorded this much before "
                                         "its dispatch (measured: probe multistream_state, "
                                         "submitted -> start before and after)")
    cupti_end_wait_ns: float = _ns("CUPTI latency timestamps: a stream kernel's end "
                                   "timestamp goes out through the front end's release path "
                                   "behind the next launch, if another stream's submitted up "
                                   "to this long after the kernel ended (the front end's "
                                   "work towards it was under way): its record ends at that "
                                   "launch's `submitted` (measured: the H200's records, "
                                   "calibrate.end_wait_ns)")
    cupti_latency_timestamps: int = _p("CUPTI latency timestamps on (1, as the reference traces "
                                       "were taken: cuptiActivityEnableLatencyTimestamps; each "
                                       "stream launch is preceded by a `submitted` time stamp) "
                                       "or off (0)", "0/1", 0, 1)
    # -- the host scheduler (runlist, TSGs, PBDMA) --
    tsg_timeslice_ns: float = _ns("time a context (TSG: one process) may hold the GPU while "
                                  "another has work ((TIMEOUT << SCALE) x 1024 ns)")
    tsg_switch_ns: float = _ns("a context switch between TSGs: nothing is served meanwhile")
    tsg_preempt_ns: float = _ns("added to a switch whose outgoing TSG still has work (its "
                                "timeslice ran out): preempting and saving its work in flight")
    pbdma_ctx_save_ns: float = _ns("PBDMA: saving a channel's context when it moves to another "
                                   "channel")
    pbdma_ctx_load_ns: float = _ns("PBDMA: loading the next channel's context")
    cp_switch_ns: float = _ns("command processor: moving to another resident channel's methods "
                              "(its decode context and engine state loaded)")
    graph_prepare_ns: float = _ns("graph walker: the part of a graph launch's set-up that runs "
                                  "from its reaching the head of the walker's queue, while "
                                  "the launch before it still runs")
    graph_start_ns: float = _ns("graph walker: a graph launch taken -> its first node dispatched "
                                "(the launch's set-up on the device, whatever the graph's size)")
    cond_iteration_ns: float = _ns("graph walker: a conditional node's iteration begins (the "
                                   "node ready, or its body's previous run complete) -> its "
                                   "body's roots queued (the condition read, the body "
                                   "launched on the device)")
    device_launch_call_ns: float = _ns("device graph launch: a kernel's device-side "
                                       "cudaGraphLaunch fire-and-forget call (the device "
                                       "runtime queues the launch); a tail launch's run pays "
                                       "the same work as its launching run completes")
    tail_launch_call_ns: float = _ns("device graph launch: a kernel's device-side "
                                     "cudaGraphLaunch tail-launch call (the launch is noted "
                                     "for the launching graph's completion)")
    device_graph_start_ns: float = _ns("device-launch walker: a device launch taken -> its "
                                       "first node dispatched (a device graph is uploaded: its "
                                       "set-up is shorter than a host launch's)")
    device_runtime_start_ns: float = _ns("a host launch of a graph (or stream kernel) holding "
                                         "device-runtime code: added to its set-up (the "
                                         "device runtime's environment for the launch)")
    pbdma_ch_timeslice_ns: float = _ns("PBDMA: time a channel may hold it while another "
                                       "channel waits (0: until it runs out of work or an "
                                       "acquire fails)")
    # -- driver structures --
    gpfifo_entries: int = _p("GPFIFO ring entries per channel", "entries", 2, 65536,
                             "(a power of two)")
    pushbuffer_bytes: int = _p("push-buffer bytes per channel", "bytes", 4096, 1 << 30)
    max_connections: int = _p("CUDA_DEVICE_MAX_CONNECTIONS default (1..32)", "connections",
                              1, 32)
    # -- front end sizes (RTL generics: one build serves every driver setting) --
    hw_channels: int = _p("hardware channels (their contexts in SRAM); the KMD gives each "
                          "process max_connections + 2 of them", "channels", 1, 256)
    pbdmas: int = _p("PBDMA units: channels resident (fetched and decoded) at once", "units",
                     1, 16)
    fifo_depth: int = _p("FIFO SRAM dwords", "dwords", 64, 65536)
    slot_words: int = _p("FIFO allocation granule in dwords", "dwords", 1, 256)
    syncpoints: int = _p("on-chip syncpoint counters", "counters", 1, 4096)
    dma_burst: int = _p("largest fetcher DMA read in dwords", "dwords", 2, 1024)

    @property
    def cycle_ns(self):
        return 1.0 / self.clock_ghz

    def frontend_config(self):
        """RTL sizes, every one that is a parameter taken from this set: the hardware
        channels and PBDMAs, the FIFO, the GPFIFO ring, the syncpoints, the DMA burst. (The
        rest of :class:`FrontEndConfig` are RTL constants, not parameters.) No driver setting
        enters: one compiled model serves every ``max_connections`` and process count."""
        return FrontEndConfig(channels=self.hw_channels, pbdmas=self.pbdmas,
                              fifo_depth=self.fifo_depth, slot_words=self.slot_words,
                              gp_entries_log2_max=bits_for(self.gpfifo_entries),
                              syncpoints=self.syncpoints, dma_burst=self.dma_burst)

    def frontend_settings(self, profiled=False):
        """Values of the FrontEnd's configuration inputs (registers a driver would program),
        which the harness drives for the whole run: they need no rebuild of a compiled model."""
        return {"acquire_retry": round(self.acquire_retry_ns * self.clock_ghz),
                "acquire_poll": round(self.acquire_poll_ns),
                "timestamp_hold": round(self.timestamp_hold_ns),
                "stamp_hold": round(self.stamp_hold_ns),
                "stamp_fetch": round(self.stamp_fetch_ns)}

    def scheduler_registers(self, profiled=False):
        """The host scheduler's and the walker's configuration registers (``GlobalReg`` ->
        value), which the KMD writes before the program runs, in ns (the front end's timers are
        deadlines on its ``now``)."""
        from gpufe.rtl.layouts import GlobalReg
        return {GlobalReg.TSG_TIMESLICE: round(self.tsg_timeslice_ns),
                GlobalReg.TSG_SWITCH: round(self.tsg_switch_ns),
                GlobalReg.TSG_PREEMPT: round(self.tsg_preempt_ns),
                GlobalReg.CTX_SAVE: round(self.pbdma_ctx_save_ns),
                GlobalReg.CTX_LOAD: round(self.pbdma_ctx_load_ns),
                GlobalReg.CH_TIMESLICE: round(self.pbdma_ch_timeslice_ns),
                GlobalReg.CP_SWITCH: round(self.cp_switch_ns),
                GlobalReg.GRAPH_START: round(self.graph_start_ns),
                GlobalReg.GRAPH_PREPARE: round(self.graph_prepare_ns),
                GlobalReg.COND_START: round(self.cond_iteration_ns),
                GlobalReg.COND_RECORD: round(self.cupti_cond_record_ns) if profiled else 0,
                GlobalReg.DEVICE_START: round(self.device_graph_start_ns),
                # a tail launch: the device runtime's launch work as the launching run
                # completes, then the device graph's start
                GlobalReg.TAIL_START: round(self.device_launch_call_ns
                                            + self.device_graph_start_ns
                                            + self.cupti_device_runtime_ns(profiled)),
                GlobalReg.RUNTIME_START: round(self.device_runtime_start_ns
                                               + self.cupti_device_runtime_ns(profiled)),
                GlobalReg.LAUNCH_HOLD: round(self.cupti_launch_hold_ns)
                if profiled and self.cupti_latency_timestamps else 0}

    def graph_walk_ns(self, per_node_ns, miss_ns, nodes):
        """CPU time of a graph operation over ``nodes`` nodes: ``per_node_ns`` each, and
        ``miss_ns`` for each node beyond those whose state fits the host's cache
        (``graph_cache_nodes``)."""
        return per_node_ns * nodes + miss_ns * max(nodes - self.graph_cache_nodes, 0)

    def cupti_device_runtime_ns(self, profiled):
        """What CUPTI adds to each of the device runtime's operations (a fire-and-forget
        call, a tail launch, a host launch's set-up of its environment): its instrumentation
        of them, measured on the fire-and-forget call."""
        return self.cupti_device_launch_ns if profiled else 0.0

    def host_scale_for_launch(self, ns, profiled=True):
        """The ``host_cpu_scale`` at which a launch call takes ``ns`` (:meth:`launch_call_ns`
        inverted; below the set's host the kickoff's fixed time is a floor), within 0.2..5."""
        p = self.with_overrides(host_cpu_scale=1.0)
        full = p.launch_call_ns(1.0, profiled)
        if ns >= full:
            s = ns / full
        else:
            fixed = p.launch_call_ns(0.0, profiled)
            s = (ns - fixed) / (full - fixed) if full > fixed else 1.0
        return min(max(s, 0.2), 5.0)

    def launch_call_ns(self, host_cpu_scale=None, profiled=True):
        """A cudaLaunchKernel that does not block, start to return, on a host
        ``host_cpu_scale`` times as slow (default: the set's): its encoding and the rest of
        the driver's time follow the CPU, the kickoff's writes to the GPU (``kickoff_ns``)
        do not (``Runtime.launch_kernel``; CUPTI's time inside it when ``profiled``)."""
        s = self.host_cpu_scale if host_cpu_scale is None else host_cpu_scale
        driver = max(self.launch_cpu_ns * s, self.launch_encode_ns * s + self.kickoff_ns)
        return driver + (self.cupti_launch_ns * s if profiled else 0.0)

    def on_host(self):
        """The set as a run uses it: the driver's and the profiler's CPU times (the fields
        made with ``_cpu``) multiplied by ``host_cpu_scale``; the set itself when that is 1."""
        if self.host_cpu_scale == 1:
            return self
        return replace(self, **{name: getattr(self, name) * self.host_cpu_scale
                                for name in HOST_CPU})

    def describe(self):
        return {f.name: f.metadata["doc"] for f in fields(self)}

    def with_overrides(self, **kw):
        return replace(self, **kw)


#: parameter name -> its dataclass field (type and metadata: doc, unit, range, note)
FIELDS = {f.name: f for f in fields(Params)}
#: the CPU times that follow the host's speed (``host_cpu_scale``)
HOST_CPU = tuple(f.name for f in fields(Params) if f.metadata.get("host_cpu"))
#: the groups of parameters, in order: (title, first parameter of the group)
GROUPS = (("the set", "name"), ("device", "device"), ("copy engines", "copy_latency_ns"),
          ("PCIe and host memory", "mmio_write_ns"),
          ("CPU: the runtime API (time of each call when it does not block)", "launch_cpu_ns"),
          ("the profiler (--profiler cupti: CUPTI activity tracing, as the traces were "
           "taken)", "cupti_launch_ns"),
          ("the host scheduler (runlist, TSGs, PBDMA)", "tsg_timeslice_ns"),
          ("driver structures", "gpfifo_entries"),
          ("front end sizes (RTL generics: one build serves every driver setting)",
           "hw_channels"))


class ParamsError(ValueError):
    """A parameter file or setting that cannot be used; names the file (or --set) and the
    field."""


def _is_int(f):
    return f.type in (int, "int")


def _is_str(f):
    return f.type in (str, "str")


def unit(name):
    """The unit of parameter ``name`` as ``gpufe params`` shows it ('' for a name or count
    without one)."""
    return FIELDS[name].metadata["unit"]


def _check_value(f, v, where):
    from gpufe.sim.host.workload import show, number, _check_text
    if _is_str(f):
        if not isinstance(v, str):
            raise ParamsError(f"{where} must be a string, not {show(v)}")
        _check_text(v, where, ParamsError)
        return
    integer = _is_int(f)
    if not number(v) or (integer and not isinstance(v, int)):
        raise ParamsError(f"{where} must be {'an integer' if integer else 'a finite number'}"
                          f", not {show(v)}")
    lo, hi = f.metadata["range"]
    if not lo <= v <= hi:
        limits = " ".join(t for t in (f"{lo:g}..{hi:g}", f.metadata["unit"],
                                      f.metadata["note"]) if t)
        raise ParamsError(f"{where} is {v:g}; it must be {limits}")


def check(raw, source, base=None, name=None):
    """The fields of a parameter file (a dict from JSON) checked: known names, the right
    types, finite numbers in range, sizes the front end can be built with. ``base``: the
    :class:`Params` whose values stand for those ``raw`` leaves out (None: ``raw`` must give
    every parameter); ``name``: the set's name if ``raw`` gives none."""
    from gpufe.sim.host.workload import _key
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: the top level must be an object")
    unknown = sorted(set(raw) - set(FIELDS) - {"_doc"}, key=str)
    if unknown:
        raise ParamsError(f"{source}: unknown parameters {', '.join(_key(u) for u in unknown)}")
    if base is None:
        missing = [n for n in FIELDS if n not in raw and not (n == "name" and name)]
        if missing:
            raise ParamsError(f"{source}: missing parameters {', '.join(missing)}")
    for key, v in raw.items():
        if key in FIELDS:
            _check_value(FIELDS[key], v, f"{source}: {key}")
    values = asdict(base) if base is not None else {}
    if name:
        values["name"] = name
    values.update((k, v) for k, v in raw.items() if k in FIELDS)
    p = Params(**values)
    if p.gpfifo_entries & (p.gpfifo_entries - 1):
        raise ParamsError(f"{source}: gpfifo_entries must be a power of two, not "
                          f"{p.gpfifo_entries}")
    if p.pushbuffer_bytes < 1024 * p.kickoff_batch:
        raise ParamsError(f"{source}: pushbuffer_bytes {p.pushbuffer_bytes} cannot hold "
                          f"kickoff_batch {p.kickoff_batch} calls (1,024 bytes each)")
    for profiled in (False, True):
        for reg, value in p.frontend_settings(profiled).items():
            if value > 0xFFFF:
                what = f"{reg}_ns"
                amount = (f"{value:,} cycles at clock_ghz {p.clock_ghz:g}"
                          if reg == "acquire_retry" else f"{value:,} ns")
                raise ParamsError(f"{source}: {what} is {amount}; the front end's {reg} "
                                  f"register holds 65,535")
    limits = {"TSG_TIMESLICE": 0xFFFFFFFF, "TSG_SWITCH": 0xFFFFFFFF, "TSG_PREEMPT": 0xFFFFFFFF}
    for profiled in (False, True):
        for reg, value in p.scheduler_registers(profiled).items():
            top = limits.get(reg.name, 0xFFFF)
            if value > top:
                raise ParamsError(f"{source}: the front end's {reg.name} register is {value:,} "
                                  f"with these parameters; it holds {top:,}")
    check_config(p, p.max_connections, source)
    return p


def check_config(params, max_connections=None, source=None, processes=None):
    """The front end this parameter set builds, or :class:`ParamsError` saying why it cannot
    be built or cannot hold the run's channels: one process of ``max_connections`` (the set's
    default when None) compute channels, or ``processes`` (a list of each process's
    max_connections), each with its two copy channels."""
    try:
        cfg = params.frontend_config()
    except ValueError as e:
        raise ParamsError(f"{source or params.name}: {e}") from None
    mcs = processes or [max_connections or params.max_connections]
    need = sum(mc + 2 for mc in mcs)
    if need > cfg.channels:
        raise ParamsError(f"{source or params.name}: {len(mcs)} process(es) with "
                          f"max_connections {', '.join(map(str, mcs))} need {need} channels; "
                          f"the front end has hw_channels = {cfg.channels}")
    return cfg


def set_names():
    """The parameter sets shipped in ``sim/params`` (their names, for ``load``)."""
    return sorted(p.stem for p in _HERE.glob("*.json") if not p.stem.endswith("_residuals"))


def _path(name_or_path):
    path = pathlib.Path(name_or_path)
    if not path.suffix:
        path = _HERE / f"{name_or_path}.json"
    if not path.exists():
        raise ParamsError(f"no parameter set {str(name_or_path)!r} ({path}; gpufe params "
                          f"lists them)")
    return path


@functools.lru_cache(maxsize=None)
def _base():
    from gpufe.sim.host.workload import load_json
    path = _HERE / f"{BASE}.json"
    return check(load_json(path, ParamsError), str(path))


def load(name_or_path=BASE):
    """The parameter set of a name in ``sim/params`` or of a JSON file (a :class:`Params`
    is returned as it is). :data:`BASE` must give every parameter; any other set takes the
    ones it leaves out from it, and its file's name if it has no ``name``."""
    from gpufe.sim.host.workload import load_json
    if isinstance(name_or_path, Params):
        return name_or_path
    path = _path(name_or_path)
    if path.resolve() == (_HERE / f"{BASE}.json").resolve():
        return _base()
    return check(load_json(path, ParamsError), str(path), base=_base(), name=path.stem)


def _parse_setting(f, text, where):
    """The value of ``--set name=text`` for parameter field ``f``, as a parameter file would
    have it (a number is an integer if written as one); :func:`check` checks it."""
    if _is_str(f):
        return text
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v):
        raise ParamsError(f"{where}: {f.name} must be "
                          f"{'an integer' if _is_int(f) else 'a finite number'}, not {text!r}")
    return v


def apply_settings(params, settings):
    """``params`` with each ``name=value`` of ``settings`` (``--set``, in order) in place of
    its value, checked as a file's value is; the set's name says what was changed (it goes
    into timeline headers)."""
    changed = []
    for text in settings or ():
        where = f"--set {text}"
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ParamsError(f"{where}: expected name=value (gpufe params lists the names)")
        f = FIELDS.get(key)
        if f is None:
            raise ParamsError(f"{where}: no parameter {key!r} (gpufe params lists them)")
        raw = asdict(params)
        raw[key] = _parse_setting(f, value, where)
        params = check(raw, where)
        if key != "name":
            changed.append(f"{key}={raw[key]}")
    if changed:
        params = replace(params, name=f"{params.name} ({', '.join(changed)})")
    return params


def format_sets():
    """The shipped parameter sets, one a line (``gpufe params``)."""
    lines = [f"parameter sets in {_HERE} (gpufe run --params NAME; a JSON file of your own "
             f"may give only some parameters, the others are {BASE}'s):"]
    for name in set_names():
        try:
            p = load(name)
            what = f"{p.device}, {len(FIELDS)} parameters"
        except ParamsError as e:
            what = f"unusable: {e}"
        lines.append(f"  {name:16s} {what}")
    lines.append("gpufe params NAME: every parameter of one, with its value, unit and meaning")
    return "\n".join(lines)


def format_params(params):
    """Every parameter of a set, by group: name, value, unit and meaning (``gpufe params
    NAME``)."""
    starts = {first: title for title, first in GROUPS}
    lines = [f"parameter set {params.name}: {len(FIELDS)} parameters"]
    for f in fields(params):
        if f.name in starts:
            lines.append(f"  -- {starts[f.name]} --")
        v = getattr(params, f.name)
        shown = v if isinstance(v, str) else f"{v:,}" if isinstance(v, int) else f"{v:,g}"
        lines.append(f"  {f.name:28s} {shown:>14s} {f.metadata['unit']:15s} "
                     f"{f.metadata['doc']}")
    return "\n".join(lines)


def dump(params, path):
    pathlib.Path(path).write_text(json.dumps(asdict(params), indent=1) + "\n")
