"""Cross-validation (``gpufe validate --cv``): each family refitted without a size, and that
size predicted."""

import pytest

from gpufe.sim.analysis import calibrate as cal
from gpufe.sim.analysis import crossval as cv
from gpufe.sim.analysis.scenarios import scenario_names


def test_every_family_has_scenarios_at_every_size_and_its_fit_scenarios_exist():
    names = set(scenario_names())
    for fam in cv.FAMILIES:
        assert list(fam.sizes) == sorted(fam.sizes) and len(fam.sizes) >= 3, fam.name
        for size in fam.sizes:
            assert fam.scenarios(size), (fam.name, size)
        # no scenario is scored at two sizes (n10 is not n100's prefix)
        seen = [n for s in fam.sizes for n in fam.scenarios(s)]
        assert len(seen) == len(set(seen)) and set(seen) <= names, fam.name


def test_expand_spells_out_a_sizes_scenarios():
    assert cv._expand("a_ns5_g{0,1}") == ["a_ns5_g0", "a_ns5_g1"]
    assert cv._expand("x{1,2}_y{a,b}") == ["x1_ya", "x1_yb", "x2_ya", "x2_yb"]
    assert cv._expand("plain") == ["plain"]


@pytest.mark.parametrize("name", ["gupdate", "threads", "graph_nodes"])
def test_a_refit_reads_nothing_of_the_size_it_leaves_out(monkeypatch, name, params):
    fam = cv.family(name)
    read = []
    trace = cal._trace
    monkeypatch.setattr(cal, "_trace", lambda n: read.append(n) or trace(n))
    kept = fam.sizes[:-1]
    refit = fam.refit(params, kept, "compiled")
    assert set(refit) <= set(fam.parameters) and read
    left = fam.sizes[-1]
    assert not [n for n in read if any(f"{c}{left}_" in n + "_" for c in "nTs")], read
    # and the fit moves with what it is given: without the largest size it differs
    assert refit != fam.refit(params, fam.sizes, "compiled")


def test_cv_rows_predict_the_left_out_sizes_with_the_refitted_parameters(params):
    rows = cv.cv_rows(params, [cv.family("graph_nodes")])
    assert {r["scenario"] for r in rows} == {"nocupti_graph_nodes1000",
                                             "nocupti_graph_nodes10"}
    big = [r for r in rows if r["cv"] == "largest"]
    assert big and all(r["fitted_on"] == [10, 100] and r["family"] == "graph_nodes"
                       for r in big)
    assert big[0]["refit"]["graph_launch_per_node_ns"] != params.graph_launch_per_node_ns
    assert all(isinstance(r["rel_error"], float) for r in rows)


def test_an_unknown_family_is_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="gupdate"):
        cv.family("nope")


def test_a_series_refit_fits_on_the_kept_sizes_scenarios(monkeypatch, params):
    seen = []

    def fake_fit(p, name, series, metric, guesses, backend="compiled"):
        seen.append((name, series, metric))
        return guesses[0], 1.0, 1.0
    monkeypatch.setattr(cal, "fit_simulated", fake_fit)
    out = cv.family("pdl").refit(params, (2000, 5000), "compiled")
    assert out == {"pdl_flush_ns": params.pdl_flush_ns}
    assert seen == [("pdl_flush_ns", ("nocupti_pdl_stamp_p1_t1_ns2000_g0",
                                      "nocupti_pdl_stamp_p1_t1_ns2000_g1",
                                      "nocupti_pdl_stamp_p1_t1_ns5000_g0",
                                      "nocupti_pdl_stamp_p1_t1_ns5000_g1"),
                     "pdl_dep_latency_us")]
    names = set(scenario_names())
    for fam in cv.FAMILIES:
        seen.clear()
        fam.refit(params, fam.sizes, "compiled") if fam.refit.__name__ == "refit" else None
        assert all(set(s) <= names for _, s, _ in seen), fam.name


#: family -> (greatest median |error|, most rows above 25%) of its cross-validated rows, both
#: sides: the figures when the bound was set (issue 42), with a margin for noise-free drift.
#: gupdate: n = 3,000 and n = 10 predicted from the others (the graph pool's cache knee and
#: the host calls at 10 nodes); body: the smallest body predicted from 2 and 4 kernels
#: (the longest first: CI's workers take the classes in this order)
CV_BOUNDS = {"body": (0.08, 40), "threads": (0.12, 12), "gupdate": (0.14, 14),
             "pdl": (0.03, 10), "hyperq": (0.02, 0), "actgap": (0.03, 0),
             "graph_nodes": (0.10, 0)}


class _FamilyCV:
    """``gpufe validate --cv`` for one family (a class each, so that CI's workers share the
    families out: loadscope keeps a class on one worker)."""
    family = None

    @pytest.mark.slow
    def test_predicts_its_left_out_sizes_within_its_bounds(self, params):
        """Every left-out size predicted (both sides), the rows' median and count above 25%
        within the family's bound."""
        from gpufe.sim.analysis.validate import error_summary
        fam = cv.family(self.family)
        rows = cv.cv_rows(params, [fam])
        assert {r["cv"] for r in rows} == {"largest", "smallest"}
        predicted = {r["scenario"] for r in rows}
        assert predicted == set(fam.scenarios(fam.sizes[0]) + fam.scenarios(fam.sizes[-1]))
        s = error_summary(rows)
        median, above = CV_BOUNDS[self.family]
        assert s["median_abs_rel_error"] <= median, s
        assert s["over_25pct"] <= above, s


# TestGraphNodesCV, TestGupdateCV, ...: one class a family
for _name in CV_BOUNDS:
    _cls = "Test" + "".join(w.capitalize() for w in _name.split("_")) + "CV"
    globals()[_cls] = type(_cls, (_FamilyCV,), {"family": _name})


def test_every_family_has_a_bound_and_a_class_in_ci():
    assert set(CV_BOUNDS) == {f.name for f in cv.FAMILIES}
    assert {c.family for c in _FamilyCV.__subclasses__()} == set(CV_BOUNDS)
