import pytest

from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import SecOp, Method, SemOp, Subchannel
from gpufe.sim.host.encode import (PushBuffer, method_header, sem_execute, gp_entry,
                                   launch_descriptor, decode_launch_descriptor, syncpoint_address)


def test_method_header_bits_match_the_documented_format():
    # SEC_OP 31:29, COUNT 28:16, SUBCHANNEL 15:13, ADDRESS 11:0 (dwords)
    assert method_header(SecOp.INC, Method.SEM_ADDR_LO, 5) == 0x2005_0017
    assert method_header(SecOp.IMMD, Method.SEND_SIGNALING_PCAS2_B, 9,
                         Subchannel.COMPUTE) == (4 << 29) | (9 << 16) | (1 << 13) | 0xB0
    with pytest.raises(ValueError):
        method_header(SecOp.INC, Method.NOP, 1 << 13)


def test_sem_execute_and_gp_entry_bits():
    assert sem_execute(SemOp.RELEASE, release_wfi=True, timestamp=True) == 1 | 1 << 20 | 1 << 25
    assert sem_execute(SemOp.ACQ_CIRC_GEQ) == 3
    e = gp_entry(0x12_3456_7890, 20)
    assert e & 0xFFFF_FFFF == 0x3456_7890
    assert e >> 32 == 0x12 | (20 << 10)
    with pytest.raises(ValueError):
        gp_entry(0x1002, 4)


def test_launch_and_copy_sizes_and_descriptor_roundtrip():
    assert len(PushBuffer().launch(0x1_0000_0100)) == 3
    assert len(PushBuffer().copy(0, 0, 64)) == 9
    assert len(PushBuffer().sem_release(0x100, 1)) == 6
    words = launch_descriptor(grid=(7, 2, 1), block=(128, 1, 1), block_ns=20_000, kernel_id=42)
    d = decode_launch_descriptor(words)
    assert (d["grid_x"], d["grid_y"], d["block_x"], d["block_ns"], d["kernel_id"]) == \
        (7, 2, 128, 20_000, 42)
    with pytest.raises(ValueError):
        PushBuffer().launch(0x1_0000_0010)


def test_syncpoint_addresses():
    assert syncpoint_address(SMALL, 3) == SMALL.syncpoint_base + 12
    with pytest.raises(ValueError):
        syncpoint_address(SMALL, SMALL.syncpoints)
