"""What the subcommands share: progress and status messages on stderr, and the
check that an output path may be written before any work starts."""

from __future__ import annotations

import os
import sys
import tempfile


def _say(args, message):
    """Progress and status messages: stderr, unless --quiet."""
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


class _ChunkProgress:
    """``done / total`` on stderr: one rewritten line on a terminal, a line per
    tenth of the work otherwise (a redirected log stays short)."""

    def __init__(self, args, label):
        self.args, self.label, self.shown = args, label, -1
        self.tty = sys.stderr.isatty()

    def __call__(self, done, total):
        if self.args.quiet:
            return
        tenth = 10 * done // max(total, 1)
        if self.tty:
            end = "\n" if done == total else ""
            print(f"\r{self.label}: {done}/{total} chunks ({done / total:.0%})", end=end,
                  file=sys.stderr, flush=True)
        elif tenth > self.shown:
            self.shown = tenth
            print(f"{self.label}: {done}/{total} chunks ({done / total:.0%})",
                  file=sys.stderr, flush=True)


def _check_writable_output(path, overwrite, *, option="--out", inputs=()):
    """The output may be written (:func:`dasketch.storage.outputs.check_output`: an
    existing one needs --overwrite and must be something dasketch wrote, and no
    input of the job is its own output); the nearest existing directory above it
    must accept a new file (tried, so that it also holds for root and read-only
    mounts)."""
    if str(path).startswith("memory://"):
        raise ValueError(f"{option}: {path!r} is an in-memory filesystem, which is gone "
                         "when this command exits; write to a path or a remote store")
    from dasketch.storage.outputs import check_output, local_file_path

    if local_file_path(path) is None:
        return
    check_output(path, overwrite, inputs=inputs, name=option, flag="--overwrite")
    parent = os.path.dirname(os.path.abspath(local_file_path(path)))
    while not os.path.exists(parent):  # missing directories are created when writing
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{option}: {parent!r} is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise PermissionError(f"{option}: cannot write in {parent!r} "
                              f"({exc.strerror or type(exc).__name__})") from None
