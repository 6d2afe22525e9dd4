"""Every RTL block documents its parameters and every port (numpydoc ``Parameters`` and
``Attributes``, as amaranth.lib documents its own), says its timing, and every rtl module
lists what it exports in ``__all__``."""

import importlib
import inspect

import pytest
from amaranth.hdl import Fragment
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out

from gpufe.rtl import layouts
from gpufe.rtl.config import SMALL, bits_for

MODULES = ["arbiter", "bits", "command_processor", "doorbell", "fetcher", "fifo_sram",
           "frontend", "graph_walker", "stream_mux", "syncpoint"]

# (module, class, constructor arguments)
BLOCKS = [
    ("arbiter", "PriorityRoundRobin", {"n": 5, "levels": 3}),
    ("stream_mux", "StreamMux", {"layout": 12}),
    ("doorbell", "DoorbellRegisterFile", {"cfg": SMALL}),
    ("fetcher", "DmaFetcher", {"cfg": SMALL}),
    ("fifo_sram", "PartitionedFifo", {"cfg": SMALL}),
    ("command_processor", "CommandProcessor", {"cfg": SMALL}),
    ("syncpoint", "SyncpointUnit", {"cfg": SMALL}),
    ("graph_walker", "GraphWalker", {"cfg": SMALL}),
    ("frontend", "FrontEnd", {"cfg": SMALL}),
]


def numpydoc_section(doc, title):
    """{name: type} of the entries of a numpydoc section (``a, b : type`` gives both)."""
    lines = inspect.cleandoc(doc).splitlines()
    heads = {i: line.strip() for i, line in enumerate(lines[:-1])
             if lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"}}
    start = next((i for i, head in heads.items() if head == title), None)
    assert start is not None, f"no {title} section"
    entries = {}
    for i in range(start + 2, len(lines)):
        if i in heads:
            break
        if lines[i] and not lines[i][0].isspace():
            names, _, kind = lines[i].partition(" : ")
            for name in names.split(","):
                entries[name.strip()] = kind.strip()
    return entries


def namespace(module, args):
    """What the types in a block's docstring may name."""
    return {"In": In, "Out": Out, "stream": stream, "data": data, "bits_for": bits_for,
            **vars(layouts), **vars(module), **args}


@pytest.mark.parametrize("module_name, cls_name, args", BLOCKS, ids=[b[1] for b in BLOCKS])
def test_block_documents_parameters_every_port_and_timing(module_name, cls_name, args):
    module = importlib.import_module(f"gpufe.rtl.{module_name}")
    cls = getattr(module, cls_name)
    doc = cls.__dict__.get("__doc__") or ""
    assert "Timing:" in doc
    params = numpydoc_section(doc, "Parameters")
    assert list(params) == list(inspect.signature(cls.__init__).parameters)[1:]
    attributes = numpydoc_section(doc, "Attributes")

    dut = cls(**args)
    Fragment.get(dut, None)                 # it elaborates (and is not left unused)
    members = dut.signature.members
    assert set(members) - set(attributes) == set(), "ports without documentation"
    for name, kind in attributes.items():
        assert hasattr(dut, name), f"{name} is documented but is not there"
        if name not in members:
            continue
        flow = members[name].flow
        assert kind.startswith(f"{flow.name}("), f"{name}: documented {kind}, is {flow.name}"
        if kind.endswith("(stream.Signature(data.StructLayout))"):
            # a type too long for one line: the fields are in the description
            payload = members[name].signature.members["payload"].shape
            assert isinstance(payload, data.StructLayout), f"{name}: documented {kind}"
            continue
        documented = eval(kind, namespace(module, args))
        assert documented == members[name], f"{name}: documented {kind}, is {members[name]}"


@pytest.mark.parametrize("module_name", MODULES)
def test_module_exports_what_it_defines(module_name):
    module = importlib.import_module(f"gpufe.rtl.{module_name}")
    exported = module.__all__
    assert len(set(exported)) == len(exported)
    for name in exported:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            assert obj.__dict__.get("__doc__"), f"{name} has no docstring of its own"
        elif inspect.isfunction(obj):
            assert obj.__doc__, f"{name} has no docstring"
    defined = {name for name, obj in vars(module).items()
               if (inspect.isclass(obj) or inspect.isfunction(obj))
               and obj.__module__ == module.__name__ and not name.startswith("_")}
    assert defined <= set(exported), f"defined, not exported: {defined - set(exported)}"
