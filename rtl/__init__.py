"""The front end's Amaranth components, one block per module (:mod:`gpufe.rtl.frontend` puts
them together)."""

import pathlib

#: The text of every module of this package, read when the package is imported: the compiled
#: backend's cache key must describe the design this process elaborates, not files edited on
#: disk since (a calibration runs for minutes).
SOURCES = tuple(f.read_text() for f in sorted(pathlib.Path(__file__).parent.glob("*.py")))
