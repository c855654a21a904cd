"""Tasks defined outside the catalogue: a task file of your own, or a regular expression.

Either becomes a real :class:`tasks.base.Task`, registered under its name, so every consumer
(``rasp score``, ``search``, ``verify``, ``train``, ``report``, ``validate-predictor``, the
Python API) uses it as it uses a catalogue task.

A task file (``load_task_file``)
--------------------------------
A Python file -- **your own code: loading it runs it** (:func:`importlib` imports it as a
module) -- that defines:

* ``NAME``: the task's name (letters, digits, ``_``; not a catalogue name): run directories
  are ``runs/<NAME>/...``;
* ``VOCAB``: the input tokens (strings or integers, distinct): content token ``VOCAB[i]`` has
  id and program value ``i``, the catalogue's rule (:mod:`tasks.base`);
* ``KIND``: ``"seq2seq"`` (``BOS x_1 .. x_n SEP answer EOS``: the answer tokens are written
  after the input, as the catalogue's algorithmic tasks), ``"membership"`` (``BOS w SEP ->
  yes|no EOS``, the catalogue's membership format) or ``"next_set"`` (Huang et al. 2025's
  next-character sets: ``BOS w_1 .. w_n``, one label per position);
* ``inputs(rng, n)``: a valid input of length ``n`` (a list of ``VOCAB`` tokens) drawn with the
  ``numpy.random.Generator`` ``rng``, or ``None`` where no input of that length exists (this
  must depend on ``n`` only);
* ``target(tokens)``: the answer for an input: ``seq2seq`` a list of answer tokens (``VOCAB``
  or ``OUTPUTS``; EOS is added), ``membership`` a bool, ``next_set`` one set per position of
  the allowed next tokens (``VOCAB`` tokens and/or ``"EOS"``);

and optionally ``LENGTHS`` (the training lengths, default ``range(1, 21)``: the protocol
tests up to twice the longest), ``OUTPUTS`` (``seq2seq``: answer tokens that are not input
tokens, values after ``VOCAB``'s) and ``LABELS`` (``next_set``: every set ``target`` may
write; default: the sets seen on a seeded sample of inputs at the training lengths).

The file is checked when it loads (every training length: ``inputs`` and ``target`` called and
their results checked); an error in the file, or raised by ``inputs``/``target`` later, is a
:class:`TaskFileError` whose one-line message starts with ``FILE:LINE``. Each call of the file's
code has a time limit (:data:`TASK_FILE_SECONDS`); one that runs longer than
:data:`PROGRESS_AFTER_S` shows progress (:mod:`rasp.repl.progress`: a bar on a terminal, a
line every ``$RASP_PROGRESS_EVERY`` seconds in a log) naming the file, the call and the limit.

A regular expression (``regex_task``)
-------------------------------------
A language over single-character symbols (``(aa)*``, ``1*``, ``[ab]*d[bc]*``) is turned into a
minimal automaton by ``interegular`` and then served by the code of Huang et al.'s languages
(:class:`tasks.huang.DFA`, :class:`tasks.huang.LanguageTask` for membership,
:class:`tasks.huang.NextSetTask` with a :class:`tasks.huang.NextSetFormat` for next-character
sets, ``verification_words`` for verification). Languages are tested as Huang et al. test
theirs: up to :data:`tasks.huang.TEST_MAX_LENGTH`.

:func:`tasks.catalogue.register_task` makes such a task findable by :func:`tasks.get_task`
under its name in this process; the grid's Ray workers are handed its source record
(:func:`task_source`, carried by the experiment's plan and the grid's runs) instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import json
import re
import reprlib
import signal
import threading
import sys
import time
import traceback
from pathlib import Path
from typing import Callable
import ast

import numpy as np
from rasp import limits
from rasp.errors import RASPError

from .base import Task, TaskInputError
from .huang import (DFA, TEST_MAX_LENGTH, LanguageTask, NextSetFormat, NextSetTask, _vocab,
                    next_set_labels)

__all__ = ["KINDS", "RUNS_CODE_WARNING", "TaskFileError", "FileTask", "load_task_file",
           "regex_task", "regex_dfa", "task_source", "run_task_source", "file_sha256",
           "DEFAULT_LENGTHS", "MAX_ITEMS"]

#: the task kinds a task file may declare (``KIND``)
KINDS = ("seq2seq", "membership", "next_set")
#: training lengths of a task file without ``LENGTHS`` (Kazemnejad et al.'s L = 20)
DEFAULT_LENGTHS = range(1, 21)
#: the warning every option that loads a task file gives (``--task-file``, ``--registered``)
RUNS_CODE_WARNING = ("Loading the file RUNS ITS PYTHON CODE (it is imported as a module): give "
                     "only your own or trusted files")
#: the most items read from any iterable of a task file (VOCAB, OUTPUTS, LENGTHS, LABELS, a
#: set, an answer): read lazily, one past the bound, so an infinite or huge one is refused
#: before it is materialised
MAX_ITEMS = 10_000
#: seconds one call of a task file's code may take (its import, ``inputs``, ``target``, reading
#: a result): ``$RASP_TASK_FILE_SECONDS``, default 60 (the main thread only: SIGALRM)
TASK_FILE_SECONDS = limits.positive_from_environment("RASP_TASK_FILE_SECONDS", 60.0, "seconds")
#: seconds a call of the task file's code runs before its progress shows
PROGRESS_AFTER_S = 2.0
#: the longest token name (VOCAB, OUTPUTS)
MAX_TOKEN_CHARS = 100
#: the longest regular expression, and the largest repetition count ``{m,n}`` in one (the
#: automaton has that many states; languages are tested up to TEST_MAX_LENGTH)
MAX_PATTERN_CHARS = 1000
MAX_REPEAT = 2 * TEST_MAX_LENGTH
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_SPECIAL_NAMES = {"BOS", "SEP", "EOS", "PAD"}


_MISSING = object()
#: callables whose ``__code__`` is read without running the user's code
_FUNCTION_TYPES = (type(lambda: 0),)


class TaskFileError(RASPError):
    """A task file (or regular expression) that cannot serve as a task: the message is one line
    and starts with ``FILE:LINE`` for a task file."""


def file_sha256(path) -> str:
    """The sha256 of a file's bytes (hex): what registered predictions record."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------
# task files
# ------------------------------------------------------------------------------------------
_SHOW = reprlib.Repr()
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlist, _SHOW.maxset = 60, 60, 8, 8


def _show(x) -> str:
    """A value of the user's code for a message: its repr, truncated (``reprlib``), on one
    line; never the user's exception (a ``__repr__`` that raises)."""
    try:
        text = _SHOW.repr(x)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - the user's __repr__
        return f"<a {type(x).__name__[:40]} whose repr raised>"
    return " ".join(text.split())[:120]


def _one_line(e: BaseException) -> str:
    try:
        text = str(e)[:400]
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - the user's __str__
        text = "<its message raised>"
    text = " ".join(text.split())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class _TooSlow(BaseException):
    """A call of the task file's code ran past :data:`TASK_FILE_SECONDS`."""


def _too_slow(what: str) -> str:
    return (f"{what} took more than {TASK_FILE_SECONDS:g} s (RASP_TASK_FILE_SECONDS sets the "
            f"limit)")


@contextlib.contextmanager
def _time_limit(desc: str = "task file"):
    """Raise :class:`_TooSlow` in the user's code after :data:`TASK_FILE_SECONDS` (and every
    second after, should the code catch it); past :data:`PROGRESS_AFTER_S`, progress named
    ``desc`` (the one progress helper, :func:`rasp.repl.progress.progress_bar`: its heartbeat
    writes a log line every interval, the timer redraws a terminal's bar every second). Only
    in the main thread and when no other timer is pending (a caller's own alarm is never
    replaced)."""
    if (threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "setitimer")
            or signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)):
        yield
        return
    start = time.monotonic()
    bar = None

    def on_alarm(signum, frame):
        nonlocal bar
        if time.monotonic() - start >= TASK_FILE_SECONDS - 0.01:
            raise _TooSlow()
        if bar is None:
            from rasp.repl.progress import progress_bar
            bar = progress_bar(total=None, desc=desc, leave=False)
            bar.set_postfix_str(f"the limit: {TASK_FILE_SECONDS:g} s", refresh=False)
        bar.refresh()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, min(PROGRESS_AFTER_S, TASK_FILE_SECONDS),
                     min(1.0, TASK_FILE_SECONDS))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if bar is not None:
            bar.close()


def _items(value, what: str, bad: Callable[[str], TaskFileError], bound: int = MAX_ITEMS
           ) -> list:
    """At most ``bound`` items of the user's iterable ``value`` (one past the bound is read:
    an infinite or huge one is refused before it is materialised); its ``__iter__`` /
    ``__next__`` guarded (any exception: ``bad``'s one line)."""
    try:
        with _time_limit(f"task file: iterating {what}"):
            out = list(itertools.islice(iter(value), bound + 1))
    except KeyboardInterrupt:
        raise
    except _TooSlow:
        raise bad(_too_slow(f"iterating {what}")) from None
    except TypeError:
        raise bad(f"{what} must be a list, got {_show(value)}") from None
    except BaseException as e:  # noqa: BLE001 - the user's __iter__ / __next__
        raise bad(f"iterating {what} raised {_one_line(e)}") from None
    if len(out) > bound:
        raise bad(f"{what} has more than {bound:,} items")
    return out


def _where(path: str, e: BaseException | None = None, fn: Callable | None = None,
           line: int | None = None) -> str:
    """``FILE:LINE``: the deepest frame of ``e``'s traceback in the task file, else ``fn``'s
    first line, else ``line`` (else 1)."""
    resolved = str(Path(path).resolve())
    if e is not None:
        for fr in reversed(traceback.extract_tb(e.__traceback__)):
            if str(Path(fr.filename).resolve()) == resolved:
                return f"{path}:{fr.lineno}"
    code = getattr(fn, "__code__", None) if isinstance(fn, _FUNCTION_TYPES) else None
    if code is not None:
        return f"{path}:{code.co_firstlineno}"
    return f"{path}:{line or 1}"


def _assign_lines(source: str) -> dict:
    """Top-level name -> the line that assigns or defines it (for messages)."""
    out = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return out
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name):
                    out[t.id] = node.lineno
    return out


def _import_file(path: str):
    """Import the task file as a module (running its code). TaskFileError on any error."""
    p = Path(path)
    if not p.is_file():
        raise TaskFileError(f"{path}: no such task file")
    name = "rasp_task_file_" + hashlib.sha256(str(p.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise TaskFileError(f"{path}: not a Python file (a task file ends in .py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _time_limit(f"{path}: loading the task file"):
            spec.loader.exec_module(module)
    except _TooSlow:
        sys.modules.pop(name, None)
        raise TaskFileError(f"{path}:1: {_too_slow('loading the task file')}") from None
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise TaskFileError(f"{path}:{e.lineno or 1}: syntax error: {_show(e.msg)[1:-1]}") \
            from None
    except KeyboardInterrupt:
        sys.modules.pop(name, None)
        raise
    except BaseException as e:  # noqa: BLE001 - the user's code: any error (SystemExit too)
        sys.modules.pop(name, None)
        raise TaskFileError(f"{_where(path, e)}: loading the task file raised "
                            f"{_one_line(e)}") from None
    return module


class FileTask(Task):
    """A task defined by a task file (module docstring). Built by :func:`load_task_file`."""

    def __init__(self, *a, path: str, user_kind: str, user_vocab: list, outputs: list,
                 inputs_fn: Callable, target_fn: Callable, labels: list | None = None,
                 sha256: str = "", **kw):
        super().__init__(*a, **kw)
        self.path = path
        self.user_kind = user_kind
        self.user_vocab = list(user_vocab)
        self.outputs = list(outputs)
        self._inputs_fn = inputs_fn
        self._target_fn = target_fn
        self.sha256 = sha256
        self.k = len(self.user_vocab)
        self._index = {_key(t): i for i, t in enumerate(self.user_vocab)}
        self._out_index = {_key(t): self.k + i for i, t in enumerate(self.outputs)}
        self._label_ids = {} if labels is None else {
            lab: self.vocab.id(_label_name(lab, self.user_vocab)) for lab in labels}
        self._has_input: dict[int, bool] = {}

    # the user's functions, wrapped: any error is one TaskFileError line naming FILE:LINE
    def _call(self, fn, what: str, *args):
        try:
            with _time_limit(f"{self.path}: {what}"):
                return fn(*args)
        except KeyboardInterrupt:
            raise
        except _TooSlow:
            raise TaskFileError(f"{_where(self.path, fn=fn)}: {_too_slow(what)}") from None
        except BaseException as e:  # noqa: BLE001 - the user's code (SystemExit, GeneratorExit)
            raise TaskFileError(f"{_where(self.path, e, fn)}: {what} raised "
                                f"{_one_line(e)}") from None

    def _bad(self, fn, msg: str) -> TaskFileError:
        return TaskFileError(f"{_where(self.path, fn=fn)}: {msg}")

    def user_inputs(self, rng, n: int):
        """``inputs(rng, n)`` checked: a list of ``n`` content ids, or None."""
        got = self._call(self._inputs_fn, f"inputs(rng, {n})", rng, n)
        if got is None:
            return None
        toks = _items(got, f"the result of inputs(rng, {n})",
                      lambda m: self._bad(self._inputs_fn, m + " (a list of VOCAB tokens)"),
                      bound=n)
        if len(toks) != n:
            raise self._bad(self._inputs_fn, f"inputs(rng, {n}) returned {len(toks)} tokens, "
                                             f"not {n}")
        ids = []
        for t in toks:
            i = self._index.get(_key(t))
            if i is None:
                raise self._bad(self._inputs_fn, f"inputs(rng, {n}) returned the token "
                                                 f"{_show(t)}, which is not in VOCAB "
                                                 f"{_show(self.user_vocab)}")
            ids.append(i)
        return ids

    def user_target(self, ids: list[int]):
        """``target(tokens)`` of content ids, checked, as answer ids (seq2seq: with EOS;
        membership: ``[no|yes, EOS]``; next_set: one label id per position)."""
        toks = [self.user_vocab[i] for i in ids]
        what = f"target({_show(toks)})" if len(toks) <= 8 else f"target(<{len(toks)} tokens>)"
        got = self._call(self._target_fn, what, toks)
        if self.user_kind == "membership":
            if not isinstance(got, (bool, np.bool_)):
                raise self._bad(self._target_fn, f"{what} returned {_show(got)}: a membership "
                                                 "task's target is True or False")
            return [self.k + int(bool(got)), self.vocab.eos]      # no = k, yes = k + 1
        items = _items(got, f"the result of {what}", lambda m: self._bad(self._target_fn, m),
                       bound=MAX_ITEMS if self.user_kind == "seq2seq" else len(ids))
        if self.user_kind == "seq2seq":
            out = []
            for t in items:
                i = self._index.get(_key(t), self._out_index.get(_key(t)))
                if i is None:
                    raise self._bad(self._target_fn, f"{what} returned the token {_show(t)}, which "
                                                     "is in neither VOCAB nor OUTPUTS")
                out.append(i)
            return out + [self.vocab.eos]
        if len(items) != len(ids):
            raise self._bad(self._target_fn, f"{what} returned {len(items)} sets: a next_set "
                                             f"target has one per position ({len(ids)})")
        out = []
        for s in items:
            lab = self._label(s, what)
            if lab not in self._label_ids:
                raise self._bad(self._target_fn, f"{what} wrote the set "
                                                 f"{_label_name(lab, self.user_vocab)}, not "
                                                 "among the labels: list it in LABELS")
            out.append(self._label_ids[lab])
        return out

    def _label(self, s, what) -> frozenset:
        members = _items(s, f"a set written by {what}", lambda m: self._bad(self._target_fn, m))
        lab = set()
        for t in members:
            if type(t) is str and t == "EOS":
                lab.add(-1)
            elif _key(t) in self._index:
                lab.add(self._index[_key(t)])
            else:
                raise self._bad(self._target_fn, f"{what} wrote {_show(t)} in a set: neither a "
                                                 "VOCAB token nor 'EOS'")
        return frozenset(lab)

    # Task ------------------------------------------------------------------------------
    def length_ok(self, n) -> bool:
        if not super().length_ok(n):
            return False
        n = int(n)
        if n not in self._has_input:
            self._has_input[n] = self.user_inputs(np.random.default_rng(n), n) is not None
        return self._has_input[n]

    def _generate(self, n, rng):
        ids = self.user_inputs(rng, n)
        if ids is None:
            raise self._bad(self._inputs_fn, f"inputs(rng, {n}) returned None at a length "
                                             "where it gave an input before (None must depend "
                                             "on n only)")
        frame = [self.vocab.bos] + ids
        return frame if self.kind == "next_set" else frame + [self.vocab.sep]

    def _content(self, prompt: list[int]) -> list[int]:
        body = prompt[1:] if self.kind == "next_set" else prompt[1:-1]
        if self.kind != "next_set" and (len(prompt) < 2 or prompt[-1] != self.vocab.sep):
            raise TaskInputError(f"{self.name}: a prompt is BOS ... SEP")
        if any(not 0 <= i < self.k for i in body):
            raise TaskInputError(f"{self.name}: a prompt's tokens are {self.user_vocab}")
        return body

    def _solve(self, prompt):
        return self.user_target(self._content(prompt))

    def program_vocab(self, max_len):
        return {v for v in self.vocab.values if v != self.vocab.values[self.vocab.pad]}

    def sequence_length(self, length):
        rng = np.random.default_rng(0)
        return max(len(p) + len(a) for p, a in (self.sample(length, rng) for _ in range(4)))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "task_file": self.path, "sha256": self.sha256}


def _key(t):
    """A token's lookup key; None for anything but a string, an integer or a bool (an
    unhashable list or an object whose ``__hash__``/``__eq__`` is the user's is never
    hashed: it is not a token)."""
    if isinstance(t, np.generic) and type(t.item()) in (str, int, bool, float):
        t = t.item()
    if type(t) not in (str, int, bool):
        return None
    return (type(t).__name__ if type(t) is not bool else "int", t)


def _label_name(lab: frozenset, vocab: list) -> str:
    """``{a,EOS}``: the set's VOCAB tokens in VOCAB order, then EOS (as Huang et al.'s
    components, :func:`tasks.huang.next_set_label`)."""
    parts = [str(vocab[i]) for i in sorted(x for x in lab if x >= 0)]
    return "{" + ",".join(parts + (["EOS"] if -1 in lab else [])) + "}"


def load_task_file(path) -> FileTask:
    """Load a task file (module docstring) -- running its Python code -- and check it.

    Args:
        path: the ``.py`` file.

    Returns:
        a :class:`FileTask` (not registered: :func:`tasks.catalogue.register_task`).

    Raises:
        TaskFileError: a missing file, a syntax error, an error while loading, a missing or
            bad ``NAME``/``VOCAB``/``KIND``/``inputs``/``target``/``LENGTHS``, or ``inputs`` /
            ``target`` raising or answering out of their contract at a training length; the
            message is one line starting with ``FILE:LINE``.
    """
    path = str(path)
    module = _import_file(path)
    source = Path(path).read_text(errors="replace")
    lines = _assign_lines(source)
    sha = file_sha256(path)

    def bad(attr, msg):
        return TaskFileError(f"{path}:{lines.get(attr, 1)}: {msg}")

    def get(attr, default=_MISSING):
        """The module's ``attr`` (a module ``__getattr__`` is the user's code: guarded)."""
        try:
            return getattr(module, attr)
        except KeyboardInterrupt:
            raise
        except AttributeError:
            return default
        except BaseException as e:  # noqa: BLE001 - the user's module __getattr__
            raise bad(attr, f"reading {attr} raised {_one_line(e)}") from None

    contract = ("a task file defines NAME, VOCAB, KIND, inputs(rng, n) and target(tokens) "
                "(`rasp score --help`)")
    attrs = {attr: get(attr) for attr in ("NAME", "VOCAB", "KIND", "inputs", "target")}
    for attr, value in attrs.items():
        if value is _MISSING:
            raise bad(attr, f"the task file defines no {attr}: {contract}")
    name, kind = attrs["NAME"], attrs["KIND"]
    if type(name) is not str or not _NAME_RE.match(name):
        raise bad("NAME", f"NAME must be a name of letters, digits and _ starting with a "
                          f"letter (it names run directories), got {_show(name)}")
    if type(kind) is not str or kind not in KINDS:
        raise bad("KIND", f"KIND must be one of {', '.join(map(repr, KINDS))}, got "
                          f"{_show(kind)}")
    vocab = _token_list(attrs["VOCAB"], "VOCAB", bad)
    outputs = _token_list(get("OUTPUTS", []), "OUTPUTS", bad, empty_ok=True)
    if outputs and kind != "seq2seq":
        raise bad("OUTPUTS", "OUTPUTS is for KIND 'seq2seq' (answer tokens beyond VOCAB)")
    names = [str(t) for t in vocab + outputs]
    if len(set(names)) != len(names) or _SPECIAL_NAMES & set(names) or \
            (kind == "membership" and {"no", "yes"} & set(names)):
        raise bad("VOCAB", f"token names must be distinct and not {sorted(_SPECIAL_NAMES)}"
                           + (" or no/yes (the labels)" if kind == "membership" else ""))
    for attr in ("inputs", "target"):
        if not callable(attrs[attr]):
            raise bad(attr, f"{attr} must be a function")
    raw = _items(get("LENGTHS", DEFAULT_LENGTHS), "LENGTHS", lambda m: bad("LENGTHS", m))
    ints = [n.item() if isinstance(n, np.integer) else n for n in raw]
    if any(type(n) is not int for n in ints):
        bad_n = next(n for n in ints if type(n) is not int)
        raise bad("LENGTHS", f"LENGTHS must be lengths (integers), got {_show(bad_n)} in it")
    lengths = sorted(set(ints))
    if not lengths or lengths[0] < 1 or lengths[-1] > 1000:
        raise bad("LENGTHS", "LENGTHS must be lengths between 1 and 1000")
    labels = None
    if kind == "next_set":
        labels = _labels(get("LABELS"), attrs["inputs"], attrs["target"], vocab, lengths, path,
                         bad)
    extra = {"seq2seq": [str(t) for t in outputs], "membership": ["no", "yes"],
             "next_set": sorted(_label_name(lab, vocab) for lab in (labels or []))}[kind]
    specials = ("BOS", "EOS", "PAD") if kind == "next_set" else ("BOS", "SEP", "EOS", "PAD")
    task = FileTask(
        name=name, description=f"your task ({kind}) from {path}", source=f"task file {path} "
        f"(sha256 {sha[:12]})", vocab=_vocab([str(t) for t in vocab], extra, specials=specials),
        min_length=lengths[0], length_definition="input tokens",
        kind="next_set" if kind == "next_set" else "next_token",
        default_train_max_len=lengths[-1], example_length=min(max(4, lengths[0]), lengths[-1]),
        path=path, user_kind=kind, user_vocab=vocab, outputs=outputs,
        inputs_fn=attrs["inputs"], target_fn=attrs["target"], labels=labels, sha256=sha)
    task.spec = {"task_file": str(Path(path).resolve()), "name": name}
    _check_lengths(task, lengths)
    return task


def _token_list(value, attr, bad, empty_ok=False) -> list:
    out = [v.item() if isinstance(v, np.generic) else v
           for v in _items(value, attr, lambda m: bad(attr, m))]
    if not out and not empty_ok:
        raise bad(attr, f"{attr} must list at least one token")
    wrong = [v for v in out if type(v) not in (str, int)]
    if wrong:
        raise bad(attr, f"{attr}'s tokens are strings or integers, got {_show(wrong[0])}")
    if any(type(v) is str and len(v) > MAX_TOKEN_CHARS for v in out):
        raise bad(attr, f"{attr}'s tokens are names of at most {MAX_TOKEN_CHARS} characters")
    return out


def _labels(labels, inputs_fn, target_fn, vocab, lengths, path, bad) -> list[frozenset]:
    """The next-set labels: ``LABELS`` (``labels``, unless missing), else those ``target``
    writes on a seeded sample."""
    probe = FileTask(name="probe", description="", source="", vocab=_vocab([str(t) for t in
                     vocab]), path=path, user_kind="next_set", user_vocab=vocab, outputs=[],
                     inputs_fn=inputs_fn, target_fn=target_fn)
    if labels is not _MISSING:
        sets = _items(labels, "LABELS", lambda m: bad("LABELS", m))
        return sorted({probe._label(s, "LABELS") for s in sets},
                      key=lambda lab: _label_name(lab, vocab))
    seen = set()
    for n in lengths:
        for s in range(3):
            ids = probe.user_inputs(np.random.default_rng([n, s]), n)
            if ids is None:
                break
            toks = [vocab[i] for i in ids]
            what = f"target({_show(toks)})"
            got = probe._call(target_fn, what, toks)
            sets = _items(got, f"the result of {what}", lambda m: probe._bad(target_fn, m),
                          bound=n)
            seen.update(probe._label(x, what) for x in sets)
    if not seen:
        raise bad("inputs", "inputs(rng, n) gave no input at any of the LENGTHS")
    return sorted(seen, key=lambda lab: _label_name(lab, vocab))


def _check_lengths(task: FileTask, lengths: list[int]) -> None:
    """Every training length: 2 seeded examples through ``inputs`` and ``target``."""
    ok = [n for n in lengths if task.length_ok(n)]
    if not ok:
        raise task._bad(task._inputs_fn, "inputs(rng, n) returned None at every one of the "
                                         f"LENGTHS {lengths[0]}..{lengths[-1]}")
    for n in ok:
        for s in range(2):
            task.sample(n, np.random.default_rng([n, s]))


# ------------------------------------------------------------------------------------------
# regular expressions
# ------------------------------------------------------------------------------------------
def regex_dfa(pattern: str, alphabet: list[str] | None = None) -> tuple[list[str], DFA]:
    """``(alphabet, DFA)`` of a regular expression over single-character symbols: the minimal
    automaton (``interegular``), states renumbered with the start state 0, symbols in
    ``alphabet`` order (default: the expression's symbols, sorted).

    Raises:
        TaskFileError: a pattern ``interegular`` cannot parse, a symbol of the expression not
            in ``alphabet``, an alphabet entry that is not one character, or an empty language.
    """
    # start-up: interegular loads only when this runs
    import interegular
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        raise TaskFileError(f"regular expression {_show(pattern)}: at most "
                            f"{MAX_PATTERN_CHARS} characters")
    counts = [int(v) for pair in re.findall(r"\{\s*(\d{1,12})?\s*(?:,\s*(\d{1,12})?\s*)?\}",
                                            pattern) for v in pair if v]
    if any(c > MAX_REPEAT for c in counts) or re.search(r"\{\s*\d{13}", pattern):
        raise TaskFileError(f"regular expression {_show(pattern)}: a repetition count above "
                            f"{MAX_REPEAT} (languages are tested at lengths up to "
                            f"{TEST_MAX_LENGTH}; the automaton would have as many states)")
    try:
        fsm = interegular.parse_pattern(pattern).to_fsm().reduce()
    except Exception as e:  # noqa: BLE001 - interegular's parse errors have several types
        raise TaskFileError(f"regular expression {pattern!r}: {_one_line(e)}") from None
    own = sorted(s for s in fsm.alphabet if isinstance(s, str))
    alpha = list(own) if alphabet is None else list(alphabet)
    if not alpha or any(not isinstance(s, str) or len(s) != 1 for s in alpha) \
            or len(set(alpha)) != len(alpha):
        raise TaskFileError(f"regular expression {pattern!r}: the alphabet is distinct single "
                            f"characters, got {alpha!r}")
    missing = [s for s in own if s not in alpha]
    if missing:
        raise TaskFileError(f"regular expression {pattern!r} uses {missing[0]!r}, which is not "
                            f"in the alphabet {''.join(alpha)!r}")
    states = [fsm.initial] + sorted(q for q in fsm.states if q != fsm.initial)
    number = {q: i for i, q in enumerate(states)}
    delta = []
    for q in states:
        row = fsm.map.get(q, {})
        delta.append([number.get(row.get(fsm.alphabet[s])) if fsm.alphabet[s] in row else None
                      for s in alpha])
    dfa = DFA(len(alpha), delta, {number[q] for q in fsm.finals})
    shortest = _shortest_member(dfa, len(states))
    if shortest is None:
        raise TaskFileError(f"regular expression {_show(pattern)}: the language has no "
                            "non-empty string")
    if shortest > TEST_MAX_LENGTH:
        raise TaskFileError(f"regular expression {_show(pattern)}: its shortest non-empty "
                            f"string has length {shortest:,}; languages are trained and tested "
                            f"at lengths up to {TEST_MAX_LENGTH}")
    return alpha, dfa


def _shortest_member(dfa: DFA, n_states: int) -> int | None:
    """The length of the shortest non-empty string of ``dfa``'s language (a breadth-first
    walk over the sets of states reachable in n steps, no recursion: ``a{1000}`` is a
    thousand states), or None for none (one exists within ``n_states`` steps if any does)."""
    frontier = {0}
    for n in range(1, n_states + 2):
        frontier = {r for q in frontier for r in dfa.delta[q] if r is not None}
        if not frontier:
            return None
        if frontier & set(dfa.accept):
            return n
    return None


def regex_task(pattern: str, format: str = "membership", alphabet: list[str] | None = None,
               name: str | None = None, components: list[str] | None = None) -> Task:
    """A task for the language of ``pattern`` (module docstring), built like the catalogue's
    languages: ``format="membership"`` a :class:`tasks.huang.LanguageTask` (``BOS w SEP ->
    yes|no EOS``), ``"next_set"`` a :class:`tasks.huang.NextSetTask` whose label at each
    position is the set of ``components`` (default: every symbol and ``EOS``) allowed next.

    Args:
        pattern: the regular expression (``interegular``'s syntax: Python's, without
            back-references).
        alphabet: the symbols, in value order (default: the expression's, sorted).
        name: the task name (default ``regex_<8 hex digits of the pattern's hash>``).

    Raises:
        TaskFileError: a bad pattern, alphabet, name, format or component.
    """
    if format not in ("membership", "next_set"):
        raise TaskFileError(f"a regular expression's format is 'membership' or 'next_set', "
                            f"got {format!r}")
    alpha, dfa = regex_dfa(pattern, alphabet)
    spec = {"regex": pattern, "format": format, "alphabet": "".join(alpha),
            "components": None if components is None else list(components)}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    name = name or f"regex_{digest[:8]}"
    if not _NAME_RE.match(name):
        raise TaskFileError(f"task name must be letters, digits and _ starting with a letter, "
                            f"got {name!r}")
    spec["name"] = name
    desc = f"the language of /{pattern}/ over {{{','.join(alpha)}}}"
    common = dict(name=name, source=f"regular expression {pattern!r}", dfa=dfa,
                  length_definition="length of w (only lengths at which the language has a "
                                    "member)" if format == "next_set" else "length of w",
                  test_max_length=TEST_MAX_LENGTH)
    example = next((n for n in range(6, 64) if dfa.count(0, n, True)), 6)
    if format == "membership":
        task = LanguageTask(description=f"membership in {desc}: BOS w SEP -> yes|no EOS",
                            vocab=_vocab(alpha, ["no", "yes"]), example_length=6, **common)
    else:
        comps = tuple(alpha) + ("EOS",) if components is None else tuple(components)
        bad = [c for c in comps if c != "EOS" and c not in alpha]
        if bad or not comps or len(set(comps)) != len(comps):
            raise TaskFileError(f"next-set components are distinct symbols of the alphabet "
                                f"{''.join(alpha)!r} and/or EOS, got {list(comps)!r}")
        fmt = NextSetFormat(comps, f"regular expression {pattern!r}")
        labels = next_set_labels(dfa, fmt, alpha)
        task = NextSetTask(description=f"next-character sets of {desc}: BOS w -> one set per "
                                       f"position ({', '.join(comps)})",
                           vocab=_vocab(alpha, labels, specials=("BOS", "EOS", "PAD")),
                           format=fmt, example_length=example, **common)
    task.spec = spec
    task.sha256 = None
    return task


def run_task_source(task: Task) -> dict | None:
    """What defines a task outside the catalogue, as its training runs record it
    (``RunSpec.task_source``): a task file's name and sha256 (not its path: a moved file is
    the same task), a regular expression's specification; None for a catalogue task."""
    src = task_source(task)
    if "catalogue" in src:
        return None
    return {k: v for k, v in src.items() if k != "task_file"}


def task_source(task: Task) -> dict:
    """Where a task comes from, as registered predictions record it: ``{"catalogue": name}``,
    ``{"task_file": absolute path, "name": ..., "sha256": ...}`` or ``{"regex": ...,
    "format": ..., "alphabet": ..., "components": ..., "name": ...}``."""
    spec = getattr(task, "spec", None)
    if spec is None:
        return {"catalogue": task.name}
    if "task_file" in spec:
        return {**spec, "sha256": task.sha256}
    return dict(spec)
