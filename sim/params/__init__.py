"""The parameter set: every latency, rate and size of the model, in one object.

``load("h200")`` reads ``sim/params/h200.json``; :class:`Params` documents each field. Times
are ns; the front end's clock turns them into cycles where the RTL needs them. The values of
``h200`` are first estimates from the reference traces' key figures, to be fitted by
calibration.
"""

from dataclasses import dataclass, field, fields, asdict, replace
import json
import pathlib

from rtl.config import FrontEndConfig

_HERE = pathlib.Path(__file__).parent


def _p(default, doc):
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Params:
    name: str = _p("h200", "name of the parameter set")
    # -- device --
    device: str = _p("NVIDIA H200", "device name written into timeline headers")
    clock_ghz: float = _p(1.0, "front-end clock; one RTL cycle is 1/clock_ghz ns")
    sms: int = _p(132, "streaming multiprocessors")
    max_threads_per_sm: int = _p(2048, "resident threads per SM")
    max_blocks_per_sm: int = _p(32, "resident thread blocks per SM")
    max_resident_kernels: int = _p(128, "kernels that may have blocks on the SMs at once")
    block_dispatch_ns: float = _p(0.6, "work distributor: time between two block placements")
    launch_latency_ns: float = _p(150.0, "compute dispatch by the CP -> kernel eligible for "
                                         "block placement (descriptor fetch, setup)")
    graph_launch_latency_ns: float = _p(86.0, "graph node dispatch by the walker -> kernel "
                                              "eligible (launch state prepared at instantiation)")
    block_overhead_ns: float = _p(548.0, "fixed run time of every block on top of block_ns")
    kernel_end_ns: float = _p(60.0, "last block done -> completion reported to the front end")
    # -- copy engines --
    copy_latency_ns: float = _p(700.0, "copy dispatch -> first byte moves")
    h2d_bytes_per_ns: float = _p(55.0, "host-to-device copy bandwidth (GB/s)")
    d2h_bytes_per_ns: float = _p(55.0, "device-to-host copy bandwidth (GB/s)")
    d2d_bytes_per_ns: float = _p(1500.0, "device-to-device copy bandwidth (GB/s)")
    # -- PCIe and host memory --
    mmio_write_ns: float = _p(150.0, "doorbell MMIO write: CPU store -> register written")
    dma_read_latency_ns: float = _p(180.0, "DMA read request -> first dword back")
    dma_read_bytes_per_ns: float = _p(25.0, "DMA read bandwidth of the fetcher's path")
    dma_write_ns: float = _p(40.0, "front end's DMA write port busy per 8-byte write "
                                   "(semaphore and timestamp writes)")
    timestamp_hold_ns: float = _p(0.0, "a timestamp release holds its channel this long after "
                                       "its writes (the timestamp's round trip)")
    host_write_visible_ns: float = _p(250.0, "DMA write issued -> visible to CPU polling")
    # -- CPU: the runtime API (time of each call when it does not block) --
    launch_cpu_ns: float = _p(5650.0, "cudaLaunchKernel")
    launch_encode_ns: float = _p(2000.0, "launch call start -> commands in the push buffer "
                                         "(CUPTI queued)")
    kickoff_ns: float = _p(3470.0, "commands queued -> GPFIFO entry and doorbell written "
                                   "(CUPTI submitted)")
    kickoff_batch: int = _p(1, "API calls whose commands the UMD gathers into one GPFIFO "
                               "entry and doorbell (synchronizing calls flush at once)")
    memcpy_cpu_ns: float = _p(6000.0, "cudaMemcpyAsync")
    event_record_cpu_ns: float = _p(780.0, "cudaEventRecord, DisableTiming event")
    event_record_timing_cpu_ns: float = _p(1820.0, "cudaEventRecord, timing event")
    stream_wait_event_cpu_ns: float = _p(1500.0, "cudaStreamWaitEvent")
    stream_create_cpu_ns: float = _p(150000.0, "cudaStreamCreate")
    event_create_cpu_ns: float = _p(6000.0, "cudaEventCreate")
    sync_call_ns: float = _p(1200.0, "synchronize call overhead before it starts waiting")
    sync_kickoff_ns: float = _p(1000.0, "a synchronize call's own kickoff (its fence)")
    sync_return_ns: float = _p(800.0, "semaphore seen in host memory -> synchronize returns")
    query_cpu_ns: float = _p(3000.0, "one cudaEventQuery")
    begin_capture_cpu_ns: float = _p(7000.0, "cudaStreamBeginCapture")
    capture_call_cpu_ns: float = _p(1000.0, "a launch, copy or event call while capturing")
    end_capture_cpu_ns: float = _p(3000.0, "cudaStreamEndCapture")
    instantiate_cpu_ns: float = _p(40000.0, "cudaGraphInstantiate, fixed part")
    instantiate_per_node_ns: float = _p(4300.0, "cudaGraphInstantiate, per node")
    graph_launch_cpu_ns: float = _p(2500.0, "cudaGraphLaunch, fixed part")
    graph_launch_per_node_ns: float = _p(500.0, "cudaGraphLaunch, per node")
    acquire_retry_ns: float = _p(0.0, "syncpoint change -> parked acquires re-checked (a "
                                      "channel that failed an acquire retries after this)")
    # -- the profiler (--profiler cupti: CUPTI activity tracing, as the traces were taken) --
    cupti_launch_ns: float = _p(0.0, "CUPTI: CPU time added inside every cudaLaunchKernel")
    cupti_call_gap_ns: float = _p(0.0, "CUPTI: CPU time added after every API call")
    cupti_graph_node_ns: float = _p(0.0, "CUPTI: cudaGraphLaunch CPU time added per node "
                                         "(its per-node records)")
    cupti_kernel_ns: float = _p(0.0, "CUPTI: added to every kernel's duration (its "
                                     "timestamps)")
    cupti_graph_kernel_ns: float = _p(0.0, "CUPTI: added to every graph kernel's duration")
    cupti_acquire_ns: float = _p(0.0, "CUPTI: added to the acquire retry interval (a stream "
                                      "kernel waiting for the one before it starts later)")
    # -- driver structures --
    gpfifo_entries: int = _p(1024, "GPFIFO ring entries per channel")
    pushbuffer_bytes: int = _p(1 << 20, "push-buffer bytes per channel")
    max_connections: int = _p(8, "CUDA_DEVICE_MAX_CONNECTIONS default (1..32)")
    # -- front end sizes (RTL generics; channels follow max_connections) --
    fifo_depth: int = _p(1024, "FIFO SRAM dwords")
    slot_words: int = _p(16, "FIFO allocation granule in dwords")
    syncpoints: int = _p(256, "on-chip syncpoint counters")
    dma_burst: int = _p(32, "largest fetcher DMA read in dwords")

    @property
    def cycle_ns(self):
        return 1.0 / self.clock_ghz

    def frontend_config(self, max_connections=None):
        """RTL sizes for a run: one compute channel per connection plus H2D and D2H."""
        mc = max_connections or self.max_connections
        log2 = max(1, (self.gpfifo_entries - 1).bit_length())
        return FrontEndConfig(channels=mc + 2, fifo_depth=self.fifo_depth,
                              slot_words=self.slot_words, gp_entries_log2_max=log2,
                              syncpoints=self.syncpoints, dma_burst=self.dma_burst)

    def frontend_settings(self, profiled=False):
        """Values of the FrontEnd's configuration inputs (registers a driver would program),
        which the harness drives for the whole run: they need no rebuild of a compiled model."""
        retry = self.acquire_retry_ns + (self.cupti_acquire_ns if profiled else 0)
        return {"acquire_retry": round(retry * self.clock_ghz),
                "timestamp_hold": round(self.timestamp_hold_ns * self.clock_ghz)}

    def describe(self):
        return {f.name: f.metadata.get("doc", "") for f in fields(self)}

    def with_overrides(self, **kw):
        return replace(self, **kw)


def load(name_or_path="h200"):
    path = pathlib.Path(name_or_path)
    if not path.suffix:
        path = _HERE / f"{name_or_path}.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no parameter set {name_or_path!r} ({path})") from None
    known = {f.name for f in fields(Params)}
    unknown = sorted(set(raw) - known - {"_doc"})
    if unknown:
        raise ValueError(f"{path}: unknown parameters {unknown}")
    return Params(**{k: v for k, v in raw.items() if k in known})


def dump(params, path):
    pathlib.Path(path).write_text(json.dumps(asdict(params), indent=1) + "\n")
