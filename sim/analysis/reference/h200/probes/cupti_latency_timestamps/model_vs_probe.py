"""The model against this folder's traces: the median gap between consecutive kernels of a
stream and the median kernel, model vs measured, with and without latency timestamps.

    python model_vs_probe.py [NAME=VALUE ...]      (parameters to override, as --set)

Each trace's program is rebuilt from its header and run profiled (``--profiler cupti``),
with ``cupti_latency_timestamps`` 0 for the ``nolat`` variants (``calibrate.PROBES``).
"""

import sys

from gpufe.sim.analysis.calibrate import PROBES, probe_metrics
from gpufe.sim.params import load, apply_settings


def main(argv):
    params = apply_settings(load("h200"), argv)
    print(f"{'trace':28s} {'gap: model':>11s} {'measured':>9s} {'error':>7s}   "
          f"{'kernel: model':>13s} {'measured':>9s}")
    for name in PROBES:
        if not name.startswith("cupti_latency_timestamps/"):
            continue
        ref, mod = probe_metrics(name), probe_metrics(name, params)
        g, gm = mod["median_gap_us"], ref["median_gap_us"]
        print(f"{name.split('/')[1]:28s} {g:11.3f} {gm:9.3f} {100 * (g - gm) / gm:+6.1f}%   "
              f"{mod['median_kernel_us']:13.3f} {ref['median_kernel_us']:9.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
