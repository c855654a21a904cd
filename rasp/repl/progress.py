"""Progress bars: the one place that decides whether a bar is drawn.

A bar is drawn when the caller asked for one (``--no-progress``, ``--json`` and ``-q`` ask for
none) and it has somewhere to go: the stream it writes to (standard error) is a terminal, or
the code runs in a Jupyter kernel (``tqdm.auto`` draws a widget there). Redirected to a file, a
pipe or a CI log, no bar is drawn, so logs are not flooded with carriage returns; instead long
work writes a **log line** every :data:`LOG_EVERY_S` seconds (``$RASP_PROGRESS_EVERY``
overrides it; ``0`` or ``off``: none), ``desc: k/N [elapsed<time left, rate, what]``, and a last
line when it ends. Work shorter than the interval writes nothing. The lines are **time-based**:
a thread of the bar writes one whenever the interval passed without one, also while the work
is blocked (a worker training, a search level, a call that reports no progress), so a log is
never silent for longer than the interval; ``what`` is the bar's postfix (what the work is
doing now, :meth:`set_postfix_str`). :func:`working` is such a bar around one blocking call
that has no progress of its own (``desc: working [elapsed]``).

Lives in ``rasp/`` (the lowest floor) so that every package can use it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref
from typing import Any, Iterable, Iterator, TextIO

__all__ = ["progress_bar", "shows_progress", "log_every", "LOG_EVERY_S", "working"]

#: Seconds between two log lines of long work when no bar can be drawn (module docstring).
LOG_EVERY_S = 30.0


def log_every() -> float | None:
    """Seconds between log lines: ``$RASP_PROGRESS_EVERY`` (a positive number; ``0``/``off``:
    no log lines) or :data:`LOG_EVERY_S`; None when log lines are off."""
    env = os.environ.get("RASP_PROGRESS_EVERY", "").strip().lower()
    if not env:
        return LOG_EVERY_S
    if env in ("0", "off", "no", "false"):
        return None
    try:
        v = float(env)
    except ValueError:
        return LOG_EVERY_S
    return v if v > 0 and v == v and v != float("inf") else None


def shows_progress(requested: bool = True, stream: TextIO | None = None) -> bool:
    """Whether a progress bar is drawn.

    Args:
        requested: the caller wants a bar (False: never).
        stream: where the bar would be written (default: ``sys.stderr`` as it is now).

    Returns:
        True when ``requested`` and ``stream`` is a terminal (``isatty()``) or the code runs in
        a Jupyter kernel; False otherwise (a closed or missing stream included).
    """
    if not requested:
        return False
    if _in_notebook():
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):       # no isatty, or a closed file
        return False


def progress_bar(iterable: Iterable | None = None, *, show: bool = True, **kwargs: Any):
    """A ``tqdm.auto`` bar (a widget in Jupyter) that draws only when :func:`shows_progress`.

    Args:
        iterable: what to iterate over (None: update the bar by hand, ``total=`` given).
        show: the caller wants a bar.
        **kwargs: tqdm's (``desc``, ``total``, ``unit``, ``leave``, ``file``...);
            ``disable`` is this function's to decide and may not be given.

    Returns:
        the tqdm object (a disabled one still iterates and accepts ``update``/``close``).
    """
    # start-up: tqdm loads only when this runs
    from tqdm.auto import tqdm
    if "disable" in kwargs:
        raise TypeError("progress_bar decides 'disable' itself; pass show=False for no bar")
    if shows_progress(show, kwargs.get("file")) or not show:
        return tqdm(iterable, disable=not show, **kwargs)
    every = log_every()
    stream = kwargs.pop("file", None) or sys.stderr
    if every is None or not _writable(stream):
        return tqdm(iterable, disable=True, **kwargs)
    return _log_lines_class()(iterable, file=stream, every=every, **kwargs)


@contextlib.contextmanager
def working(desc: str, *, show: bool = True, file: TextIO | None = None) -> Iterator[Any]:
    """Log lines around one blocking call that reports no progress itself (a program search,
    probing): without a terminal a line ``desc: working [elapsed]`` every :func:`log_every`
    seconds (none when the call is shorter); on a terminal nothing (a counter that never
    moves would say less than the caller's own line before the call).

    Args:
        desc: what the call is doing (``"[report] sort_unique / nope: searching"``).
        show: the caller wants progress (False: nothing is written).
        file: the stream (default: standard error).

    Yields:
        the bar (``set_postfix_str`` adds to the line what the call is doing now).
    """
    kwargs = {"file": file} if file is not None else {}
    show = show and not shows_progress(True, file)
    bar = progress_bar(show=show, total=None, desc=desc, leave=False, **kwargs)
    try:
        yield bar
    finally:
        bar.close()


def _writable(stream) -> bool:
    try:
        return stream is not None and not stream.closed and stream.writable()
    except (AttributeError, ValueError, OSError):
        return False


_LOG_CLASS = None


def _log_lines_class():
    """A tqdm that writes whole lines (no bar, no carriage return) at most every ``every``
    seconds, and a last line on close when it wrote any (built on first use: tqdm is imported
    only by code that shows progress)."""
    global _LOG_CLASS
    if _LOG_CLASS is not None:
        return _LOG_CLASS
    # start-up: tqdm loads only when this runs
    from tqdm.std import tqdm as std_tqdm

    class LogLines(std_tqdm):
        def __init__(self, *args, every: float, **kwargs):
            self._every, self._lines, self._last_t, self._last_n = every, 0, None, None
            self._line_lock, self._stop = threading.Lock(), threading.Event()
            kwargs.setdefault("bar_format", None)
            kwargs["mininterval"] = every
            kwargs.pop("dynamic_ncols", None)
            super().__init__(*args, **kwargs)
            # the heartbeat: a line whenever `every` seconds passed without one (time-based)
            # (it holds the bar weakly: a bar nobody closes is still collected, tqdm's __del__
            # closes it, and the thread ends)
            self._beat = threading.Thread(target=_heartbeat, daemon=True,
                                          args=(weakref.ref(self), self._stop),
                                          name=f"progress {self.desc}")
            self._beat.start()

        def _due(self) -> None:
            """Write a line when the interval passed since the start and the last line."""
            with self._line_lock:
                now = time.time()
                if self.disable or now - self.start_t < self._every or (
                        self._last_t is not None and now - self._last_t < self._every):
                    return
                self._line()

        def _line(self) -> None:
            d = self.format_dict
            if d.get("total"):
                fmt = "{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
            elif self.n:
                fmt = "{desc}: {n_fmt} [{elapsed}, {rate_fmt}{postfix}]"
            else:
                fmt = "{desc}: working [{elapsed}{postfix}]"        # nothing counted yet
            d["bar_format"] = fmt
            try:
                self.fp.write(self.format_meter(**d).lstrip(": ") + "\n")
                self.fp.flush()
            except (ValueError, OSError):        # the stream went away
                return
            self._lines += 1
            self._last_t, self._last_n = time.time(), self.n

        def clear(self, nolock=False):
            """Nothing to clear in a log (tqdm's ``write`` would write carriage returns)."""

        def display(self, msg=None, pos=None):
            if msg is None and getattr(self, "_beat", None) is not None:   # tqdm initialised
                self._due()
            return True

        def close(self):
            if self.disable:
                return
            self._stop.set()
            with self._line_lock:
                if self._lines and self._last_n != self.n:
                    self._line()                 # the last line: k/N and the total time
                self.disable = True
            if self._beat is not threading.current_thread():
                self._beat.join(timeout=1.0)
            self._decr_instances(self)

    _LOG_CLASS = LogLines
    return _LOG_CLASS


def _heartbeat(ref, stop: threading.Event) -> None:
    """The thread of a log-lines bar: a line whenever its interval passed without one, until
    the bar is closed (``stop``) or gone (``ref``, a weak reference, returns None)."""
    while True:
        bar = ref()
        if bar is None:
            return
        last = bar._last_t if bar._last_t is not None else bar.start_t
        wait = max(0.0, last + bar._every - time.time())
        del bar
        if stop.wait(min(wait, 1.0)):
            return
        bar = ref()
        if bar is None:
            return
        bar._due()
        del bar


def _in_notebook() -> bool:
    """Whether the code runs in a Jupyter (IPython) kernel."""
    if "ipykernel" not in sys.modules:
        return False
    # start-up: IPython loads only when this runs
    from IPython import get_ipython
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config
