"""Formal properties of the front end's blocks, one module per block beside it
(:mod:`gpufe.rtl.arbiter` -> :mod:`gpufe.rtl.formal.arbiter`), proven by ``gpufe prove``
(:mod:`gpufe.sim.prove`) with SymbiYosys.

Each module holds a harness: an elaboratable that instantiates its block at small sizes
(:func:`small_config`), with every input free (a top-level port of the harness, or
``AnySeq``: the solver picks any value each cycle; ``AnyConst`` for a choice fixed for the
whole run, such as the channel watched) unless an ``assume`` restricts it, and states the
block's properties on its outputs and, where a property needs history, on monitor registers
of the harness's own. A property is named: the
name is what ``gpufe prove`` reports and what the counterexample's waveform shows as a signal
(``assert_<name>``, ``cover_<name>``) beside the block's own.

:func:`all_proofs` lists every proof: the block, the harness, how it is proven (``prove``:
k-induction to ``depth``; ``bmc``: bounded model checking to ``depth`` cycles, where the
properties are not inductive at that size) and how deep the covers are searched."""

import functools
from dataclasses import dataclass
from typing import Callable

from amaranth import Signal
from amaranth.hdl import Assert, Assume, Cover

from ..config import FrontEndConfig

__all__ = ["Properties", "Proof", "all_proofs", "proofs_of", "blocks", "small_config"]

#: the prefix that tells a property's location in the solver's log (its source location is
#: replaced by its name: a property made in a loop has one line for all its instances)
TAG = "@"


def small_config(**sizes):
    """The front end's sizes for a proof: 4 channels, one PBDMA, 2 priority levels, 2 TSGs,
    rings of up to 8 entries, a 64-dword FIFO, graph tables of 4; ``sizes`` changes those the
    block's properties need otherwise."""
    return FrontEndConfig(**{**dict(channels=4, pbdmas=1, tsgs=2, priority_levels=2,
                                    gp_entries_log2_max=3, fifo_depth=64, slot_words=16,
                                    dma_burst=16, syncpoints=4, graph_nodes_max=4,
                                    graph_edges_max=4, graph_inflight_max=4), **sizes})


class Properties:
    """The named properties of a harness, added to module ``m`` under ``block``'s name.

    ``assert_(name, test)``: must hold on every cycle. ``assume(name, test)``: restricts the
    free inputs (the environment's contract). ``cover(name, test)``: must be reachable (a
    property whose interesting case never happens proves nothing). Each test is also a named
    signal (``assert_<name>`` ...), so that a counterexample's waveform shows which failed."""

    def __init__(self, m, block):
        self.m, self.block = m, block
        self.names = {"assert": [], "assume": [], "cover": []}

    def _add(self, kind, stmt, name, test):
        if not name.isidentifier():
            raise ValueError(f"{self.block}: property name {name!r} is not an identifier")
        if name in self.names[kind]:
            raise ValueError(f"{self.block}: two {kind}s named {name!r}")
        self.names[kind].append(name)
        sig = Signal(name=f"{kind}_{name}")
        self.m.d.comb += sig.eq(test)
        prop = stmt(sig, f"{self.block}.{name}")
        prop.src_loc = (f"{TAG}{self.block}.{name}", 0)
        self.m.d.comb += prop

    def assert_(self, name, test):
        self._add("assert", Assert, name, test)

    def assume(self, name, test):
        self._add("assume", Assume, name, test)

    def cover(self, name, test):
        self._add("cover", Cover, name, test)


@dataclass(frozen=True)
class Proof:
    """A proof: ``harness()`` gives the elaboratable (with ``ports``, its free inputs, and
    ``properties`` once elaborated); ``mode`` "prove" (k-induction, ``depth`` steps) or "bmc"
    (every property holds for ``depth`` cycles from reset); covers searched to
    ``cover_depth`` cycles; ``sizes`` says at which sizes, for the report."""
    block: str
    name: str
    harness: Callable
    mode: str
    depth: int
    cover_depth: int
    sizes: str

    def __post_init__(self):
        if self.mode not in ("prove", "bmc"):
            raise ValueError(f"proof {self.block}.{self.name}: mode {self.mode!r}: "
                             f"'prove' or 'bmc'")


@functools.cache
def all_proofs():
    """Every proof, block by block (each block's module lists its own, ``PROOFS``)."""
    from . import arbiter, doorbell, fifo_sram, pbdma
    return tuple(arbiter.PROOFS + doorbell.PROOFS + fifo_sram.PROOFS + pbdma.PROOFS)


def proofs_of(names=()):
    """The proofs of the blocks (or ``block.proof``) named, all when none is; an unknown name
    is an error that lists the known ones."""
    if not names:
        return all_proofs()
    out = []
    for name in names:
        found = [p for p in all_proofs() if name in (p.block, f"{p.block}.{p.name}")]
        if not found:
            raise ValueError(f"no proof named {name!r}; blocks: {', '.join(blocks())}")
        out += [p for p in found if p not in out]
    return tuple(out)


def blocks():
    return sorted({p.block for p in proofs_of()})
