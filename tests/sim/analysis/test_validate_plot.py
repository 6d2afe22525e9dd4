"""The `gpufe validate --plot` figure: log axes, every point above the +-25% band."""

import numpy as np
import pytest

from gpufe.sim.analysis.validate import figure, plot


def row(metric, measured, model):
    return {"scenario": "s", "metric": metric, "measured": measured, "model": model,
            "rel_error": (model - measured) / measured if measured else 1.0}


#: microseconds to tens of milliseconds, one point outside the band, one that cannot be shown
ROWS = [row("launch_api_us", 5.65, 5.5), row("median_gap_us", 2.4, 2.37),
        row("gpu_span_us", 12_000.0, 11_500.0), row("wall_per_rep_us", 51_000.0, 52_000.0),
        row("submitted_to_start_us", 0.6, 0.9), row("max_concurrent", 8, 8),
        row("launches_blocked", 0, 0)]


@pytest.fixture()
def fig():
    import matplotlib.pyplot as plt
    f = figure(ROWS)
    yield f
    plt.close(f)


def _band_and_points(ax):
    band = [c for c in ax.collections if c.get_label() == "model within 25%"]
    points = [c for c in ax.collections if c.get_label() != "model within 25%"]
    return band, points


def test_axes_are_log_and_hold_every_point(fig):
    ax, = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    _, points = _band_and_points(ax)
    xy = np.concatenate([c.get_offsets() for c in points])
    shown = [(r["measured"], r["model"]) for r in ROWS if r["measured"] > 0]
    assert sorted(map(tuple, xy.tolist())) == sorted(shown)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert x0 < xy[:, 0].min() and xy[:, 0].max() < x1
    assert y0 < xy[:, 1].min() and xy[:, 1].max() < y1
    # microseconds and tens of milliseconds on the same axes: four decades and more
    assert x1 / x0 > 1e4
    assert "1 with a zero value not shown" in ax.get_title()


def test_the_band_is_beneath_the_points(fig):
    ax, = fig.axes
    band, points = _band_and_points(ax)
    assert len(band) == 1 and len(points) == len({r["metric"] for r in ROWS
                                                 if r["measured"] > 0})
    diagonal, = ax.lines
    assert band[0].get_zorder() < diagonal.get_zorder() < min(p.get_zorder() for p in points)
    # the band is model = measured * (0.75 .. 1.25)
    verts = band[0].get_paths()[0].vertices
    ratios = verts[:, 1] / verts[:, 0]
    assert ratios.min() == pytest.approx(0.75) and ratios.max() == pytest.approx(1.25)


def test_plot_writes_a_png(tmp_path):
    p = tmp_path / "val.png"
    plot(ROWS, p)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rows_without_a_positive_value_give_an_empty_figure():
    import matplotlib.pyplot as plt
    f = figure([row("launches_blocked", 0, 0)])
    ax, = f.axes
    assert ax.get_xscale() == "log" and not _band_and_points(ax)[1]
    plt.close(f)
