"""Progress bars: the one place that decides whether a bar is drawn.

A bar is drawn when the caller asked for one (``--no-progress``, ``--json`` and ``-q`` ask for
none) and it has somewhere to go: the stream it writes to (standard error) is a terminal, or
the code runs in a Jupyter kernel (``tqdm.auto`` draws a widget there). Redirected to a file, a
pipe or a CI log, no bar is drawn, so logs are not flooded with carriage returns.

Lives in ``rasp/`` (the lowest floor) so that every package can use it.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, TextIO

__all__ = ["progress_bar", "shows_progress"]


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
    from tqdm.auto import tqdm
    if "disable" in kwargs:
        raise TypeError("progress_bar decides 'disable' itself; pass show=False for no bar")
    return tqdm(iterable, disable=not shows_progress(show, kwargs.get("file")), **kwargs)


def _in_notebook() -> bool:
    """Whether the code runs in a Jupyter (IPython) kernel."""
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config
