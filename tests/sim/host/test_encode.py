import pytest

from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import (SecOp, Method, SemOp, Subchannel, LaunchDescriptor,
                               LAUNCH_DESCRIPTOR_DWORDS, COPY_FLAG_DESCRIPTOR)
from gpufe.sim.host.encode import (PushBuffer, method_header, sem_execute, gp_entry,
                                   launch_descriptor, syncpoint_address, submitted_update,
                                   copy_descriptor)


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
    assert len(words) == LAUNCH_DESCRIPTOR_DWORDS
    # grid_x in dword 0, grid_y | grid_z << 16 in dword 1, block_x | block_y << 16 in dword 2
    assert words[:3] == [7, 2 | 1 << 16, 128 | 1 << 16]
    assert words[5] == 42 and words[6] | words[7] << 32 == 20_000_000    # kernel id, block ps
    with pytest.raises(ValueError):
        PushBuffer().launch(0x1_0000_0010)
    # a copy by descriptor is the same 9 dwords, its descriptor as the source offset
    pb = PushBuffer().copy_by_descriptor(0x1_0000_0200, 0x80_0000_0000, 64)
    assert len(pb) == 9 and pb.words[2] == 0x200 and pb.words[-1] == COPY_FLAG_DESCRIPTOR
    with pytest.raises(ValueError, match="copy kind"):
        copy_descriptor(0, 0, 64, "h2h")


def test_descriptor_fields_are_checked_and_updated_in_place():
    with pytest.raises(ValueError, match="priority"):
        launch_descriptor(priority=1 << 31)
    with pytest.raises(ValueError, match="grid_y"):
        launch_descriptor(grid=(1, 1 << 16, 1))
    negative = launch_descriptor(priority=-1)
    assert negative[8] == 0xFFFFFFFF                  # two's complement in its own dword
    # the UMD's kickoff writes the submitted time over its two dwords, lowest first
    offset, words = submitted_update(0x1_2345_6789)
    assert 8 * offset == dict(LaunchDescriptor.as_shape())["submitted_ns"].offset
    assert words == [0x2345_6789, 1]


def test_syncpoint_addresses():
    assert syncpoint_address(SMALL, 3) == SMALL.syncpoint_base + 12
    with pytest.raises(ValueError):
        syncpoint_address(SMALL, SMALL.syncpoints)
