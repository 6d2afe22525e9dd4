"""The parameter set: every latency, rate and size of the model, in one object.

``load("h200")`` reads ``sim/params/h200.json``; :class:`Params` documents each field. Times
are ns; the front end's clock turns them into cycles where the RTL needs them. The values of
``h200`` are first estimates from the reference traces' key figures, to be fitted by
calibration.
"""

from dataclasses import dataclass, field, fields, asdict, replace
import json
import pathlib

from gpufe.rtl.config import FrontEndConfig

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


class ParamsError(ValueError):
    """A parameter file that cannot be used; names the file and the field."""


def _limits(name):
    """(least, most, unit) of a numeric parameter."""
    if name == "query_cpu_ns":
        return 1, 1e9, "ns (event_query spins: each query must take time)"
    if name.endswith("_bytes_per_ns"):
        return 0.001, 1e6, "bytes per ns"
    if name.endswith("_ns"):
        return 0, 1e9, "ns"
    return {"clock_ghz": (0.001, 100, "GHz"), "sms": (1, 1024, ""),
            "max_threads_per_sm": (1024, 65536, "(a block may have 1,024 threads)"),
            "max_blocks_per_sm": (1, 1024, ""), "max_resident_kernels": (1, 65536, ""),
            "kickoff_batch": (1, 1024, ""), "gpfifo_entries": (2, 65536, "(a power of two)"),
            "pushbuffer_bytes": (4096, 1 << 30, "bytes"), "max_connections": (1, 32, ""),
            "fifo_depth": (64, 65536, "dwords"), "slot_words": (1, 256, "dwords"),
            "syncpoints": (1, 4096, ""), "dma_burst": (2, 1024, "dwords")}.get(name)


def check(raw, source):
    """The fields of a parameter file (a dict from JSON) checked: known names, the right
    types, finite numbers in range, sizes the front end can be built with."""
    from gpufe.sim.host.workload import show, number, _check_text, _key
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: the top level must be an object")
    types = {f.name: f.type for f in fields(Params)}
    unknown = sorted(set(raw) - set(types) - {"_doc"})
    if unknown:
        raise ParamsError(f"{source}: unknown parameters {', '.join(_key(u) for u in unknown)}")
    for name, v in raw.items():
        typ = types.get(name)
        if typ is None:
            continue
        where = f"{source}: {name}"
        if typ in (str, "str"):
            if not isinstance(v, str):
                raise ParamsError(f"{where} must be a string, not {show(v)}")
            _check_text(v, where, ParamsError)
            continue
        integer = typ in (int, "int")
        if not number(v) or (integer and not isinstance(v, int)):
            raise ParamsError(f"{where} must be {'an integer' if integer else 'a finite number'}"
                              f", not {show(v)}")
        lo, hi, unit = _limits(name)
        if not lo <= v <= hi:
            raise ParamsError(f"{where} is {v:g}; it must be {lo:g}..{hi:g} {unit}".rstrip())
    p = Params(**{k: v for k, v in raw.items() if k in types})
    if p.gpfifo_entries & (p.gpfifo_entries - 1):
        raise ParamsError(f"{source}: gpfifo_entries must be a power of two, not "
                          f"{p.gpfifo_entries}")
    if p.pushbuffer_bytes < 1024 * p.kickoff_batch:
        raise ParamsError(f"{source}: pushbuffer_bytes {p.pushbuffer_bytes} cannot hold "
                          f"kickoff_batch {p.kickoff_batch} calls (1,024 bytes each)")
    for profiled in (False, True):
        for reg, cycles in p.frontend_settings(profiled).items():
            if cycles > 0xFFFF:
                what = {"acquire_retry": "acquire_retry_ns" + (" + cupti_acquire_ns"
                                                               if profiled else ""),
                        "timestamp_hold": "timestamp_hold_ns"}.get(reg, reg)
                raise ParamsError(f"{source}: {what} is {cycles:,} cycles at clock_ghz "
                                  f"{p.clock_ghz:g}; the front end's {reg} register holds "
                                  f"65,535")
    check_config(p, p.max_connections, source)
    return p


def check_config(params, max_connections, source=None):
    """The front end this parameter set builds for ``max_connections`` channels, or
    :class:`ParamsError` saying why it cannot be built."""
    try:
        return params.frontend_config(max_connections)
    except ValueError as e:
        raise ParamsError(f"{source or params.name}: with max_connections {max_connections}: "
                          f"{e}") from None


def load(name_or_path="h200"):
    from gpufe.sim.host.workload import load_json
    path = pathlib.Path(name_or_path)
    if not path.suffix:
        path = _HERE / f"{name_or_path}.json"
    if not path.exists():
        raise ParamsError(f"no parameter set {str(name_or_path)!r} ({path})")
    return check(load_json(path, ParamsError), str(path))


def dump(params, path):
    pathlib.Path(path).write_text(json.dumps(asdict(params), indent=1) + "\n")
