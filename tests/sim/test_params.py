"""One source for every parameter: the shipped file holds the values, Params only lists and
documents them, the front end's sizes for a run come from the set alone; --set overrides."""

import dataclasses
import json
import pathlib

import pytest

import gpufe.rtl.config
from gpufe.rtl.config import FrontEndConfig
from gpufe.sim.params import (BASE, FIELDS, Params, ParamsError, apply_settings, check, load,
                              set_names)

SHIPPED = pathlib.Path(__file__).parents[2] / "sim" / "params" / f"{BASE}.json"


def test_no_value_is_written_twice():
    """Params has no default of its own (each value is in the parameter file only), and the
    shipped set gives every parameter, and nothing else."""
    with_default = [f.name for f in dataclasses.fields(Params)
                    if f.default is not dataclasses.MISSING
                    or f.default_factory is not dataclasses.MISSING]
    assert with_default == []
    assert list(json.loads(SHIPPED.read_text())) == list(FIELDS)


def test_every_parameter_is_documented_with_a_unit_and_a_range():
    for name, f in FIELDS.items():
        assert f.metadata["doc"], name
        if f.type is str:
            continue
        lo, hi = f.metadata["range"]
        assert lo is not None and hi is not None and lo < hi, name
        assert f.metadata["unit"], name
        assert lo <= getattr(load(BASE), name) <= hi, name
    assert {n for n, f in FIELDS.items() if f.metadata["unit"] == "ns"} == \
        {n for n in FIELDS if n.endswith("_ns") and not n.endswith("_bytes_per_ns")}


def test_the_front_end_of_a_run_takes_every_size_from_the_set():
    """No size that is a parameter falls back on FrontEndConfig's own defaults (the front end
    built alone, for an FPGA): each follows the set."""
    p = load(BASE).with_overrides(fifo_depth=2048, slot_words=32, gpfifo_entries=64,
                                  syncpoints=100, dma_burst=16, hw_channels=100, pbdmas=3)
    cfg = p.frontend_config()
    assert (cfg.channels, cfg.pbdmas, cfg.fifo_depth, cfg.slot_words, cfg.gp_entries_log2_max,
            cfg.syncpoints, cfg.dma_burst) == (100, 3, 2048, 32, 6, 100, 16)
    # max_connections is a driver setting: the front end does not change with it
    assert p.with_overrides(max_connections=5).frontend_config() == cfg
    defaults = FrontEndConfig()
    assert all(getattr(cfg, n) != getattr(defaults, n) for n in
               ("channels", "fifo_depth", "slot_words", "gp_entries_log2_max", "syncpoints",
                "dma_burst"))


def test_rtl_config_exports():
    assert sorted(gpufe.rtl.config.__all__) == ["FrontEndConfig", "SMALL", "bits_for"]


def test_a_file_of_ones_own_takes_the_rest_from_the_shipped_set(tmp_path):
    p = tmp_path / "fast_cpu.json"
    p.write_text('{"launch_cpu_ns": 1000, "sms": 66}')
    mine, base = load(str(p)), load(BASE)
    assert (mine.name, mine.launch_cpu_ns, mine.sms) == ("fast_cpu", 1000, 66)
    assert dataclasses.replace(mine, name=base.name, launch_cpu_ns=base.launch_cpu_ns,
                               sms=base.sms) == base
    assert set_names() == ["h200"]                   # the residuals file is not a set
    assert load(base) is base


def test_the_shipped_set_must_give_every_parameter():
    raw = json.loads(SHIPPED.read_text())
    del raw["kickoff_ns"], raw["sms"]
    with pytest.raises(ParamsError, match=r"^x.json: missing parameters sms, kickoff_ns$"):
        check(raw, "x.json")


def test_settings_override_one_parameter_each():
    base = load(BASE)
    p = apply_settings(base, ["launch_cpu_ns=20000", "sms=66", "clock_ghz=1.5",
                              "device=Test GPU"])
    assert (p.launch_cpu_ns, p.sms, p.clock_ghz, p.device) == (20000, 66, 1.5, "Test GPU")
    assert type(p.sms) is int and type(p.launch_cpu_ns) is int    # as a file would have them
    assert p.name == "h200 (launch_cpu_ns=20000, sms=66, clock_ghz=1.5, device=Test GPU)"
    assert apply_settings(base, []) is base
    assert apply_settings(base, ["name=mine"]).name == "mine"


@pytest.mark.parametrize("setting, message", [
    ("foo=1", "--set foo=1: no parameter 'foo' (gpufe params lists them)"),
    ("sms", "--set sms: expected name=value (gpufe params lists the names)"),
    ("=5", "--set =5: expected name=value (gpufe params lists the names)"),
    ("sms=many", "--set sms=many: sms must be an integer, not 'many'"),
    ("sms=1.5", "--set sms=1.5: sms must be an integer, not 1.5"),
    ("sms=0", "--set sms=0: sms is 0; it must be 1..1024 SMs"),
    ("launch_cpu_ns=fast", "--set launch_cpu_ns=fast: launch_cpu_ns must be a finite number, "
                           "not 'fast'"),
    ("launch_cpu_ns=nan", "--set launch_cpu_ns=nan: launch_cpu_ns must be a finite number, "
                          "not 'nan'"),
    ("query_cpu_ns=0", "--set query_cpu_ns=0: query_cpu_ns is 0; it must be 1..1e+09 ns "
                       "(event_query spins: each query must take time)"),
    ("gpfifo_entries=1000", "--set gpfifo_entries=1000: gpfifo_entries must be a power of two"),
    ("slot_words=3", "--set slot_words=3: FrontEndConfig: slot_words must be a power of two"),
    ("hw_channels=9", "--set hw_channels=9: 1 process(es) with max_connections 8 need 10 "
                      "channels; the front end has hw_channels = 9"),
])
def test_a_bad_setting_says_what_is_wrong(setting, message):
    with pytest.raises(ParamsError) as e:
        apply_settings(load(BASE), ["sms=100", setting])
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_host_cpu_scale_scales_the_cpu_times_and_nothing_on_the_gpu():
    """The driver's and CUPTI's CPU times follow the host's speed; the GPU's latencies and the
    doorbell's kickoff (bound by the writes to the GPU) do not; a scale of 1 is the set
    itself."""
    from gpufe.sim.params import HOST_CPU
    p = load(BASE)
    assert p.on_host() is p
    half = p.with_overrides(host_cpu_scale=0.5).on_host()
    assert {"launch_cpu_ns", "launch_encode_ns", "cupti_launch_ns", "event_record_cpu_ns",
            "graph_launch_per_node_ns"} <= set(HOST_CPU)
    assert not {"kickoff_ns", "launch_latency_ns", "mmio_write_ns",
                "cupti_kernel_ns"} & set(HOST_CPU)
    for name in FIELDS:
        want = getattr(p, name) * 0.5 if name in HOST_CPU else getattr(p, name)
        if name == "host_cpu_scale":
            want = 0.5
        assert getattr(half, name) == want, name
