"""Another commit of this repository, importable as ``gpufe`` ahead of this checkout's
install: for benchmarks that compare this checkout with it in one run."""

import contextlib
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def other_commit(rev):
    """Yields a folder to put first on ``PYTHONPATH``: commit ``rev`` checked out in a
    temporary git worktree (removed at the end), its folders under the one import namespace,
    ``gpufe``."""
    with tempfile.TemporaryDirectory(prefix="gpufe-vs-") as tmp:
        tree = pathlib.Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(tree),
                        rev], check=True, capture_output=True)
        try:
            pkg = pathlib.Path(tmp) / "pkg" / "gpufe"
            pkg.mkdir(parents=True)
            for d in ("rtl", "sim", "constraints"):
                (pkg / d).symlink_to(tree / d)
            yield str(pkg.parent)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True)
