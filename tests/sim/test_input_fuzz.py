"""A small seeded run of bench/input_fuzz.py: mutated workloads, traces and parameter files
through the gpufe command give a success or a one-line error naming the file, never a
traceback or a hang."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import input_fuzz                                        # noqa: E402


def test_sixty_mutated_inputs_give_no_traceback_and_no_hang(tmp_path):
    res = input_fuzz.run_fuzz(inputs=60, seed=14, timeout=60, jobs=2, out=tmp_path, log=None)
    c = res["counts"]
    report = input_fuzz.format_report(res, 14, 2)
    assert c["traceback"] == 0 and c["hang"] == 0 and c["unclear"] == 0, report
    assert c["success"] > 0 and c["clear"] > 0, report
    assert res["runs"] >= 60
