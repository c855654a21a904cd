"""Vocabularies and the :class:`Task` base class of the task catalogue.

Token ids and program values
----------------------------
Every task has a :class:`Vocab`: token ids ``0 .. len(vocab) - 1``, each with a readable name
(``tokens[id]``) and the **value a RASP program sees** for it (``values[id]``). The rule is the
same for every task, so programs and compiled models can rely on it:

* content tokens are small non-negative integers and their id *equals* their value: digit ``7``
  has id 7 and value 7, symbol ``3`` of an ordered alphabet has id 3 and value 3, index-hint
  ``h5`` has a value above all content values (``hint_base + 5``);
* the special tokens are negative values placed after the content ids:
  ``BOS = -1``, ``SEP = -2``, ``EOS = -3``, ``PAD = -4``, ``+ = -5`` (addition only).

All values stay inside the int8 range ``[-128, 127]`` of RASP-L (Zhou et al. 2023, rule 2), so
part-A programs read their input with ``tokens = tokens_int;``.

Part-B sequence programs (the original RASP classics over strings such as ``"hello"``) use
string values: each content token's value is its name; BOS is stripped by
:meth:`Task.program_tokens` because those programs are bidirectional per-position functions of
the input alone (the compiler adds its own BOS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from rasp.errors import RASPError
import rasp

__all__ = ["BOS", "SEP", "EOS", "PAD", "PLUS", "SPECIAL_VALUES", "Vocab", "Task", "Regime",
           "UnknownTaskError", "TaskInputError", "PROGRAMS_DIR", "inputs_targets",
           "next_token_examples"]

#: The program value of each special token (see the module docstring).
BOS, SEP, EOS, PAD, PLUS = -1, -2, -3, -4, -5
SPECIAL_VALUES = {"BOS": BOS, "SEP": SEP, "EOS": EOS, "PAD": PAD, "+": PLUS}

#: Folder of the reference programs (``tasks/programs/<task>.rasp``).
PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"


class UnknownTaskError(RASPError, KeyError):
    """Raised by :func:`tasks.get_task` for an unknown name; the message lists known tasks."""

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return str(self.args[0]) if self.args else "unknown task"


class TaskInputError(RASPError, ValueError):
    """A prompt (token ids) that is not well formed for a task."""


class Vocab:
    """A task vocabulary: id -> name (``tokens``) and id -> program value (``values``).

    Args:
        tokens: the token names, index = id.
        values: the value a RASP program sees for each id (ints for part A, strings for
            part B); defaults to the names.
        specials: names of the special tokens present (subset of BOS, SEP, EOS, PAD, +).
        n_content: the content alphabet's size where the vocabulary knows it (ids and values
            ``0..n_content-1``: :func:`numeric_vocab`), else None.

    Attributes ``bos``, ``sep``, ``eos``, ``pad`` hold ids (``sep`` is ``None`` where the format
    has no SEP, e.g. Zhou's count).
    """

    def __init__(self, tokens: Sequence[str], values: Sequence[Any] | None = None,
                 n_content: int | None = None):
        self.tokens: list[str] = list(tokens)
        self.n_content = n_content
        self.values: list[Any] = list(values) if values is not None else list(self.tokens)
        if len(self.values) != len(self.tokens):
            raise ValueError("tokens and values must have the same length")
        self._id = {name: i for i, name in enumerate(self.tokens)}
        if len(self._id) != len(self.tokens):
            raise ValueError("duplicate token names in a vocabulary")
        self._by_value = {}
        for i, v in enumerate(self.values):
            key = _value_key(v)
            if key in self._by_value:
                raise ValueError(f"two tokens share the program value {v!r}")
            self._by_value[key] = i
        self.bos = self._id.get("BOS")
        self.sep = self._id.get("SEP")
        self.eos = self._id.get("EOS")
        self.pad = self._id.get("PAD")

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, name: str) -> bool:
        return name in self._id

    def id(self, name: str) -> int:
        """The id of token ``name``; ``KeyError`` with the name if unknown."""
        try:
            return self._id[name]
        except KeyError:
            raise KeyError(f"token {name!r} is not in the vocabulary") from None

    def encode(self, names: Iterable[str]) -> list[int]:
        """Token names -> ids. Raises ``KeyError`` naming an unknown token."""
        return [self.id(n) for n in names]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids -> token names. Raises :class:`TaskInputError` for an out-of-range id."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.tokens):
                raise TaskInputError(f"token id {i} is out of range 0..{len(self.tokens) - 1}")
            out.append(self.tokens[i])
        return out

    def id_of_value(self, value: Any) -> int:
        """The id whose program value is ``value`` (ints, bools, numpy scalars, strings).

        Raises ``ValueError`` naming the value when no token has it.
        """
        key = _value_key(value)
        try:
            return self._by_value[key]
        except KeyError:
            raise ValueError(f"program output {value!r} is not a token of this vocabulary"
                             ) from None

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "values": self.values, "bos": self.bos, "sep": self.sep,
                "eos": self.eos, "pad": self.pad}

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens)"


def _value_key(v: Any):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return ("n", int(v))
    if isinstance(v, float) and v.is_integer():
        return ("n", int(v))
    if isinstance(v, int):
        return ("n", v)
    return (type(v).__name__, v)


def inputs_targets(task, prompt: Sequence[int], answer: Sequence[int]
                   ) -> tuple[list[int], list[int], int]:
    """What a decoder is trained on for one example of ``task``: ``(inputs, targets, first)``.

    ``inputs`` are the model's input ids ``[seq]``, ``targets`` the id it must predict at each
    input position ``[seq]``, and ``first`` the first position whose target is trained and
    scored (the positions before it are context only). By ``task.kind``:

    * ``"next_token"``: ``inputs = (prompt + answer)[:-1]``, ``targets = (prompt +
      answer)[1:]``, ``first = len(prompt) - 1`` (the answer tokens, EOS included);
    * ``"next_set"``: ``inputs = prompt`` (``BOS w_1 .. w_n``), ``targets = [PAD] + answer``
      (the label of ``w_i`` at ``w_i``'s position), ``first = 1``.

    Raises ``ValueError`` for a part-B task (no training format) or a next-set answer whose
    length is not the prompt's number of symbols.
    """
    prompt, answer = [int(t) for t in prompt], [int(t) for t in answer]
    if task.kind == "next_set":
        if len(answer) != len(prompt) - 1:
            raise ValueError(f"{task.name}: one label per string position: {len(prompt) - 1} "
                             f"expected, got {len(answer)}")
        return prompt, [task.vocab.pad] + answer, 1
    if task.kind != "next_token":
        raise ValueError(f"{task.name}: a {task.kind} task has no training format")
    seq = prompt + answer
    return seq[:-1], seq[1:], len(prompt) - 1


def next_token_examples(task, prompt: Sequence[int], answer: Sequence[int]
                        ) -> list[tuple[list[int], list[int]]]:
    """One example of ``task`` as next-token ``(prompt, answer)`` pairs, the form the program
    searches work on: a next-token example is itself; a next-set example (``BOS w_1 .. w_n``
    with one label per string position) is one pair per position, ``(BOS w_1 .. w_i,
    [label_i])`` — the label a causal program writes at ``w_i``'s position depends only on
    that prefix, so a causal program is right on the whole string iff it is right at the
    last position of every prefix.

    Raises ``ValueError`` for a part-B task (no next-token form)."""
    prompt, answer = [int(t) for t in prompt], [int(t) for t in answer]
    if task.kind == "next_set":
        return [(prompt[:i + 1], [answer[i - 1]]) for i in range(1, len(prompt))]
    if task.kind != "next_token":
        raise ValueError(f"{task.name}: a {task.kind} task has no next-token form")
    return [(prompt, answer)]


def numeric_vocab(n_content: int, names: Sequence[str] | None = None, hints: int = 0,
                  specials: Sequence[str] = ("BOS", "SEP", "EOS", "PAD")) -> Vocab:
    """A part-A vocabulary: content tokens 0..n_content-1 (id = value), then ``hints`` index-hint
    tokens ``h0..`` (values ``n_content + k``), then the special tokens (negative values)."""
    names = list(names) if names is not None else [str(i) for i in range(n_content)]
    values: list[Any] = list(range(n_content))
    names += [f"h{k}" for k in range(hints)]
    values += [n_content + k for k in range(hints)]
    for s in specials:
        names.append(s)
        values.append(SPECIAL_VALUES[s])
    return Vocab(names, values, n_content=n_content)


@dataclass(frozen=True)
class Regime:
    """Where a paper says its theory's prediction for a task applies: to models trained on
    lengths up to at least ``train_max_len`` (the paper's own training length; its theories are
    limits, "sufficiently long training lengths"). A prediction checked on runs trained on
    shorter lengths is outside the regime
    (:func:`analysis.evidence.claims.prediction_claim`: inconclusive, never contradicted).

    Attributes:
        train_max_len: the shortest maximum training length (in the task's ``length`` units)
            the paper states its outcome for.
        source: the paper and the place it says so.
    """

    train_max_len: int
    source: str

    def covers(self, trained_max_len: int | None) -> bool:
        """Whether runs trained on lengths up to ``trained_max_len`` are inside the regime
        (None: unknown -> False)."""
        return trained_max_len is not None and int(trained_max_len) >= self.train_max_len

    def to_dict(self) -> dict:
        return {"train_max_len": self.train_max_len, "source": self.source}


@dataclass(eq=False, repr=False)
class Task:
    """A task of the catalogue. Subclasses implement :meth:`_generate` and
    :meth:`_solve`.

    Attributes:
        name: registry key (``tasks.get_task(name)``).
        description: one line, prompt -> answer.
        source: the paper(s) the task comes from.
        vocab: the :class:`Vocab`.
        min_length / max_length: the lengths the generator can produce (``max_length`` None =
            unbounded); see :meth:`length_ok`.
        length_definition: what ``length`` counts, in words.
        reference_file / reference_name: the reference program (``tasks/programs/*.rasp``) and
            the name of the s-op to evaluate in its environment.
        causal: whether the reference is a RASP-L next-token program (causal mode).
        valid_raspl: whether the reference is meant to be valid RASP-L (``False`` for the
            *natural* programs of tasks without a known RASP-L program).
        kind: ``"next_token"`` (part A: ``BOS prompt SEP answer EOS``), ``"sequence"``
            (part B: one output value per input position) or ``"next_set"`` (Huang et al.'s
            formal languages: prompt ``BOS w_1 .. w_n``, answer one label token per string
            position, the set of characters allowed after ``w_1 .. w_i``; ``tasks/huang.py``).
        paper: what the papers report: ``{"zhou": ..., "kazemnejad": ..., "sources": {...}}``.
        default_train_max_len: train lengths 1..L (Kazemnejad et al.: L = 20, 8 for math).
        test_max_length: the longest length the task's own protocol tests (None: twice the
            training length, our protocol; a regular-expression task: Huang et al.'s 150),
            read by :func:`analysis.prediction.verify.protocol_max_length`.
        regime: the training length from which the task's paper states its outcome
            (:class:`Regime`; None: the paper states none, and checks are read at any
            training length).
    """

    name: str
    description: str
    source: str
    vocab: Vocab
    min_length: int = 1
    max_length: int | None = None
    length_definition: str = "number of input tokens"
    reference_file: str | None = None
    reference_name: str | None = None
    causal: bool = True
    valid_raspl: bool = True
    kind: str = "next_token"
    paper: dict = field(default_factory=dict)
    default_train_max_len: int = 20
    example_length: int = 4
    test_max_length: int | None = None
    regime: Regime | None = None

    def __post_init__(self) -> None:
        if self.regime is None:
            self.regime = self._paper_regime()

    def _paper_regime(self) -> Regime | None:
        """The regime a task family's paper states for all its tasks (None here; Huang et
        al.'s tasks: :data:`tasks.huang.HUANG_REGIME`)."""
        return None

    # ---------------------------------------------------------------------------------------
    # lengths
    # ---------------------------------------------------------------------------------------
    def length_ok(self, n: int) -> bool:
        """Whether the generator can produce an example of length ``n``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            return False
        return n >= self.min_length and (self.max_length is None or n <= self.max_length)

    def check_length(self, n: int) -> None:
        """Raise a clear ``ValueError`` when :meth:`length_ok` is false."""
        if not self.length_ok(n):
            hi = "unbounded" if self.max_length is None else str(self.max_length)
            raise ValueError(f"task {self.name!r} cannot produce length {n!r}: lengths are "
                             f"{self.min_length}..{hi} ({self.length_definition})")

    def lengths(self, upto: int) -> list[int]:
        """All valid lengths from ``min_length`` up to ``upto`` (inclusive)."""
        return [n for n in range(self.min_length, upto + 1) if self.length_ok(n)]

    def drawn_lengths(self, lo: int, hi: int) -> list[int]:
        """The lengths a draw over the range ``lo..hi`` picks from uniformly, a length listed
        k times weighing k (the trainer's training lengths, the length bins of
        :func:`analysis.training.evaluation.bin_set`): every length of the range the task
        accepts (:meth:`length_ok`), once. A task whose source draws lengths otherwise
        overrides it (:class:`tasks.huang.MajorityInterleaveTask`: Huang et al.'s rounding)."""
        return _accepted_lengths(self, lo, hi)

    # ---------------------------------------------------------------------------------------
    # examples
    # ---------------------------------------------------------------------------------------
    def sample(self, length: int, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """A random example of the given length.

        Returns ``(prompt, answer)`` as token ids. Part A: the prompt starts with BOS (and ends
        with SEP where the format has one), the answer ends with EOS. Part B (``kind ==
        "sequence"``): the prompt is ``BOS x_1 .. x_n`` and the answer is the list of the ``n``
        expected per-position output *values* (ints, floats, bools or strings), no EOS.

        Raises ``ValueError`` for a length the task cannot produce.
        """
        self.check_length(length)
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator (np.random.default_rng(seed))")
        prompt = [int(t) for t in self._generate(int(length), rng)]
        return prompt, self.ground_truth(prompt)

    def verification_prompts(self, length: int) -> list[list[int]]:
        """Prompts of this length that verification checks besides its random samples: the
        task's hard cases, where a sampler rarely goes (a language's every DFA state and
        transition, its counting adversaries: :meth:`tasks.huang.LanguageTask.verification_prompts`).
        None by default (an empty list)."""
        return []

    def ground_truth(self, prompt: Sequence[int]) -> list:
        """The answer for a prompt, computed in plain Python independently of any program.

        Raises :class:`TaskInputError` for a malformed prompt.
        """
        prompt = [int(t) for t in prompt]
        self.vocab.decode(prompt)  # range check
        if not prompt or prompt[0] != self.vocab.bos:
            raise TaskInputError(f"{self.name}: a prompt starts with BOS")
        return self._solve(prompt)

    def format_example(self, prompt: Sequence[int], answer: Sequence[Any]) -> str:
        """A readable one-line rendering, e.g. ``BOS 3 5 -> 3 4 5 EOS``."""
        if self.kind == "sequence":
            return " ".join(self.vocab.decode(prompt)) + " -> " + \
                " ".join(str(a) for a in answer)
        return " ".join(self.vocab.decode(prompt)) + " -> " + " ".join(self.vocab.decode(answer))

    def example(self, seed: int = 0, length: int | None = None) -> str:
        """A formatted example (for docs and the CLI)."""
        n = length if length is not None else self.example_length
        p, a = self.sample(n, np.random.default_rng(seed))
        return self.format_example(p, a)

    # ---------------------------------------------------------------------------------------
    # what a RASP program sees
    # ---------------------------------------------------------------------------------------
    def program_tokens(self, ids: Sequence[int]) -> list:
        """The token values a RASP program sees for a prefix of token ids.

        Part A: ``[vocab.values[i] for i in ids]`` (BOS included, as -1). Part B: the leading
        BOS is dropped and the rest mapped to values.
        """
        ids = [int(i) for i in ids]
        self.vocab.decode(ids)
        if self.kind == "sequence" and ids and ids[0] == self.vocab.bos:
            ids = ids[1:]
        return [self.vocab.values[i] for i in ids]

    def program_output_to_id(self, value: Any) -> int:
        """The token id of a program's output value (part A). ``ValueError`` if none."""
        return self.vocab.id_of_value(value)

    def program_vocab(self, max_len: int) -> set:
        """Every program value that can occur in a sequence (prompt and answer) of a task
        example of length <= ``max_len``: the finite input vocabulary for the compiler."""
        raise NotImplementedError

    def sequence_length(self, length: int) -> int:
        """Total number of tokens (prompt + answer) of an example of this length."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------
    # reference program
    # ---------------------------------------------------------------------------------------
    @property
    def reference_path(self) -> Path | None:
        """Absolute path of the reference program (``tasks/programs/<file>``)."""
        return PROGRAMS_DIR / self.reference_file if self.reference_file else None

    def reference_source(self) -> str:
        """The text of the reference program."""
        if self.reference_path is None:
            raise ValueError(f"task {self.name!r} has no reference program")
        return self.reference_path.read_text()

    def load_reference(self):
        """Run the reference file with the parser and return the s-op ``reference_name``.

        Raises :class:`rasp.ir.RASPError` subclasses for a program error.
        """
        env = rasp.run_file(str(self.reference_path), causal=self.causal)
        try:
            return env[self.reference_name]
        except KeyError:
            raise ValueError(f"{self.reference_file} defines no s-op {self.reference_name!r}"
                             ) from None

    # ---------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"<Task {self.name}: {self.description}>"

    def to_dict(self) -> dict:
        """A JSON-able summary (for the CLI, docs and run directories)."""
        return {"name": self.name, "description": self.description, "source": self.source,
                "kind": self.kind, "vocab_size": len(self.vocab), "tokens": self.vocab.tokens,
                "min_length": self.min_length, "max_length": self.max_length,
                "length_definition": self.length_definition,
                "reference_file": self.reference_file, "reference_name": self.reference_name,
                "causal": self.causal, "valid_raspl": self.valid_raspl, "paper": self.paper,
                "default_train_max_len": self.default_train_max_len}

    # subclasses -----------------------------------------------------------------------------
    def _generate(self, length: int, rng: np.random.Generator) -> list[int]:
        raise NotImplementedError

    def _solve(self, prompt: list[int]) -> list:
        raise NotImplementedError


def _accepted_lengths(task, lo: int, hi: int) -> list[int]:
    return [n for n in range(max(0, int(lo)), int(hi) + 1) if task.length_ok(n)]


def drawn_lengths(task, lo: int, hi: int) -> list[int]:
    """``task.drawn_lengths(lo, hi)`` (:meth:`Task.drawn_lengths`); for a task object without
    that method (the trainer takes any object with ``length_ok`` and ``sample``), every length
    of ``lo..hi`` it accepts, once."""
    own = getattr(task, "drawn_lengths", None)
    return own(lo, hi) if callable(own) else _accepted_lengths(task, lo, hi)
