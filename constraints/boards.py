"""Boards ``gpufe synth`` knows: a name, the amaranth-boards platform and its nextpnr family.

All are ECP5 boards: the open flow (YoWASP Yosys, nextpnr-ecp5, ecppack) installs from PyPI.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Board:
    name: str
    platform: str          # "module:Class" in amaranth_boards
    leds: int
    note: str

    def make_platform(self):
        import importlib
        module, cls = self.platform.split(":")
        return getattr(importlib.import_module(module), cls)()


BOARDS = {b.name: b for b in (
    Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform", 8,
          "Radiona ULX3S, LFE5U-85F-6BG381C: 83,640 LUT4s, 208 18-kbit block RAMs, 25 MHz"),
    Board("ulx3s-45f", "amaranth_boards.ulx3s:ULX3S_45F_Platform", 8,
          "Radiona ULX3S, LFE5U-45F-6BG381C: 43,848 LUT4s, 108 block RAMs, 25 MHz"),
)}


def board(name):
    try:
        return BOARDS[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r}; known: {', '.join(BOARDS)}") from None
