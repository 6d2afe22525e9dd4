# amaranth: UnusedElaboratable=no
"""Bad constructor arguments are refused at once, with a TypeError or ValueError that says
what was expected (not later, at elaboration, with an error from inside Amaranth)."""

import dataclasses

import pytest
from amaranth import Signal
from amaranth.hdl import Fragment

from gpufe.rtl.arbiter import PriorityRoundRobin
from gpufe.rtl.bits import lowest_set
from gpufe.rtl.command_processor import CommandProcessor
from gpufe.rtl.config import SMALL, FrontEndConfig
from gpufe.rtl.doorbell import DoorbellRegisterFile
from gpufe.rtl.fetcher import DmaFetcher
from gpufe.rtl.fifo_sram import PartitionedFifo
from gpufe.rtl.frontend import FrontEnd
from gpufe.rtl.graph_walker import GraphWalker
from gpufe.rtl.stream_mux import StreamMux
from gpufe.rtl.syncpoint import SyncpointUnit

CONFIGURED = [DoorbellRegisterFile, DmaFetcher, PartitionedFifo, CommandProcessor,
              SyncpointUnit, GraphWalker, FrontEnd]


@pytest.mark.parametrize("block", CONFIGURED, ids=lambda b: b.__name__)
@pytest.mark.parametrize("cfg", [SMALL.as_dict(), 4, "SMALL"], ids=["dict", "int", "str"])
def test_blocks_are_built_from_a_frontend_config_only(block, cfg):
    with pytest.raises(TypeError, match=rf"^{block.__name__}: cfg must be a FrontEndConfig"):
        block(cfg)


@pytest.mark.parametrize("block, field", [
    (CommandProcessor, "priority_levels"),
    (SyncpointUnit, "syncpoints"), (SyncpointUnit, "seq_bits"), (SyncpointUnit, "inflight_bits"),
    (GraphWalker, "graph_queue"), (GraphWalker, "graph_inflight_max"),
    (GraphWalker, "graph_edges_max"),
], ids=lambda x: getattr(x, "__name__", x))
def test_sizes_a_block_cannot_be_built_with(block, field):
    cfg = dataclasses.replace(SMALL, **{field: 0})       # FrontEndConfig lets these through
    with pytest.raises(ValueError, match=rf"^{block.__name__}: cfg.{field} must be at least 1, "
                                         rf"not 0$"):
        block(cfg)


@pytest.mark.parametrize("args, error, message", [
    ((0,), ValueError, "n must be at least 1, not 0"),
    ((-3,), ValueError, "n must be at least 1, not -3"),
    ((4.0,), TypeError, "n must be an int, not float 4.0"),
    (("4",), TypeError, "n must be an int, not str '4'"),
    ((True,), TypeError, "n must be an int, not bool True"),
    ((4, 0), ValueError, "levels must be at least 1, not 0"),
    ((4, None), TypeError, "levels must be an int, not NoneType None"),
])
def test_arbiter_wants_positive_int_sizes(args, error, message):
    with pytest.raises(error, match=rf"^PriorityRoundRobin: {message}$"):
        PriorityRoundRobin(*args)


def test_arbiter_of_one_requester_and_one_level_is_fine():
    dut = PriorityRoundRobin(1, levels=1)
    assert (dut.n, dut.levels) == (1, 1) and "priority" not in dut.signature.members


@pytest.mark.parametrize("layout", ["payload", None, -1, 3.5, object()])
def test_stream_mux_wants_a_shape(layout):
    with pytest.raises(TypeError, match=r"^StreamMux: layout must be a shape"):
        StreamMux(layout)


@pytest.mark.parametrize("bits, idx_bits, error, message", [
    (5, 3, TypeError, r"bits must be an Amaranth Value, not 5"),
    (Signal(8), 0, ValueError, r"idx_bits must be at least 1, not 0"),
    (Signal(8), 3.0, TypeError, r"idx_bits must be an int, not 3.0"),
])
def test_lowest_set_checks_its_arguments(bits, idx_bits, error, message):
    with pytest.raises(error, match=rf"^lowest_set: {message}$"):
        lowest_set(bits, idx_bits)


def test_frontend_without_a_config_takes_the_default():
    dut = FrontEnd(None)
    assert dut.cfg == FrontEndConfig()
    for block in (dut.doorbell, dut.fetcher, dut.fifo, dut.cp, dut.syncpoint, dut.walker):
        assert block.cfg is dut.cfg
    Fragment.get(dut, None)         # and it elaborates (which also marks its blocks used)
