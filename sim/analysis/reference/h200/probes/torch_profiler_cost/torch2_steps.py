"""The torch2 programs' step functions, from streams_torch.py (the program of the bundled torch2
traces, run unchanged: its definitions executed with its own `record` replaced, so that the
steps are exactly the traced ones)."""
import pathlib
import sys


def steps_of(prog):
    """{variant: step function} of streams_torch.py's program ``prog``."""
    src = (pathlib.Path(__file__).parent / ".." / ".." / "torch2" / "streams_torch.py").read_text()
    src = src[:src.index("t0 = time.time()\ntry:")]      # the definitions, not the run
    steps = {}
    ns = {"__name__": "streams_torch", "__file__": "streams_torch.py"}
    argv, sys.argv = sys.argv, ["streams_torch.py", "/tmp", prog]
    try:
        exec(compile(src, "streams_torch.py", "exec"), ns)
        ns["record"] = lambda variant, fn, graph=False: steps.__setitem__(variant, fn)
        ns["prog_" + prog]()
    finally:
        sys.argv = argv
    return steps
