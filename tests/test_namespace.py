"""Everything installs under one import namespace, ``gpufe``: nothing is imported as a bare
``rtl``, ``sim`` or ``constraints`` (generic names that would collide in site-packages), and
every subpackage on disk is one the wheel installs."""

import ast
import importlib
import pathlib
import pkgutil
import sys
import tomllib

import gpufe.constraints
import gpufe.rtl
import gpufe.sim

ROOT = pathlib.Path(__file__).resolve().parents[1]
BARE = ("rtl", "sim", "constraints")


def _all_modules():
    for pkg in (gpufe.rtl, gpufe.sim, gpufe.constraints):
        yield pkg.__name__
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            yield m.name


def test_every_module_imports_without_a_bare_top_level_package():
    names = list(_all_modules())
    assert len(names) > 40
    for name in names:
        importlib.import_module(name)
    bare = sorted(k for k in sys.modules if k.split(".")[0] in BARE)
    assert bare == []


def test_no_source_imports_a_bare_package():
    offenders = []
    for folder in ("rtl", "sim", "constraints", "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {m}"
                              for m in mods if m.split(".")[0] in BARE]
    assert offenders == []


def test_every_subpackage_on_disk_is_installed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    on_disk = set()
    for dotted, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            on_disk.add(".".join((dotted,) + rel))
    assert on_disk == set(config["packages"])


def test_the_command_says_its_version(capsys):
    from gpufe.sim.cli import main, version
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    out = capsys.readouterr().out
    assert out.strip() == f"gpufe {version()}"
    assert version()[0].isdigit()
