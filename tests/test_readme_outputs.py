"""Every file the README's commands write is ignored by git (.gitignore), so that trying them
leaves the working tree clean."""

import pathlib
import re
import shlex
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).parents[1]
#: options that name a file (or, for --out of synth and the benches, a folder) to write
OUTPUT_OPTIONS = ("--perfetto", "--timeline", "--vcd", "--json", "--plot", "--out")
#: (subcommand, option) pairs where the option is a flag that writes nothing (run --json
#: prints the summary on stdout)
FLAGS = {("run", "--json")}
#: what the commands write when the option is not given (their defaults in sim/cli.py and
#: bench/)
DEFAULTS = {("demo", "--vcd"): "gpufe_demo.vcd", ("calibrate", "--out"): "h200.json",
            ("bench/ordering_fuzz.py", "--out"): "out/ordering_fuzz",
            ("bench/input_fuzz.py", "--out"): "build/input_fuzz",
            ("bench/synth_table.py", "--out"): "build/synth_table"}


def readme_commands():
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(("gpufe ", "python bench/", "pip install")):
                for command in line.split("&&"):
                    yield shlex.split(command)


def written(words):
    """The paths a command writes into the working folder."""
    out = []
    sub = words[1] if len(words) > 1 else ""
    for opt in OUTPUT_OPTIONS:
        if (sub, opt) in FLAGS:
            continue
        if opt in words:
            path = words[words.index(opt) + 1]
        elif (sub, opt) in DEFAULTS:
            path = DEFAULTS[sub, opt]
        else:
            continue
        if re.fullmatch(r"[A-Z]", path):
            continue                    # a placeholder: the reader's own folder
        out.append(path)
        if sub == "calibrate" and opt == "--out":
            p = pathlib.Path(path)
            out.append(str(p.with_name(f"{p.stem}_residuals.json")))
        if opt == "--out" and not pathlib.Path(path).suffix:
            out.append(f"{path}/summary.json")          # a folder: what goes in it
    return out


def test_the_readme_has_commands_that_write_files():
    paths = [p for words in readme_commands() for p in written(words)]
    assert {"hyperq.json", "xstream.jsonl", "events.vcd", "gpufe_demo.vcd", "val.json",
            "val.png", "my_h200.json", "my_h200_residuals.json"} <= set(paths)


@pytest.mark.skipif(not (ROOT / ".git").exists() or not shutil.which("git"),
                    reason="not a git checkout")
def test_what_the_readme_commands_write_is_ignored_by_git():
    paths = sorted({p for words in readme_commands() for p in written(words)})
    res = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT,
                         input="\n".join(paths) + "\n", capture_output=True, text=True)
    ignored = set(res.stdout.split())
    assert [p for p in paths if p not in ignored] == []
