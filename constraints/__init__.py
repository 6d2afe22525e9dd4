"""FPGA boards and the synthesis top level (see ``constraints/README.md``)."""
