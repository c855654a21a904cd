"""Huang et al. 2025's protocol as their released code sets it: scales, grids, fallbacks, tables.

Source: github.com/lacoco-lab/length_generalization (commit b39b743 read for issue 47):
``algorithmic/language_modeling_train.py`` (sweep, generators, bins),
``algorithmic/run_multiple_seeds.py`` (selected configuration per cell ``task_arch``, fallback
learning rates, seeds), ``formal_lang_suite/experiments/<language>.yaml`` (per-language grid,
batch size, epochs), ``formal_lang_suite/configs/`` (optimizer) and
``formal_lang_suite/generated_ds/<dataset>/`` (their released training and test files).
:mod:`analysis.experiment.replication` runs cells with these settings; this module holds only the
settings and where they come from (split out of it to keep both under the module cap).

Where ours differs from their code it is said: :data:`NOT_THEIRS` (algorithmic tasks) and
:data:`FORMAL_NOT_THEIRS` (formal languages).
"""

from __future__ import annotations

from dataclasses import dataclass

from rasp.errors import RASPError
from tasks.huang import RELEASED, RELEASED_FORMAL

__all__ = ["ReplicationError", "HUANG_PES", "CODE_NOT_PAPER", "NOT_THEIRS", "THEIR_SELECTED",
           "THEIR_CODE", "FALLBACKS", "fallback_config", "SweepConfig", "Scale", "FULL",
           "SMALL", "SCALES", "FORMAL_NOT_THEIRS", "FORMAL_PROTOCOL", "FormalProtocol",
           "formal_language", "formal_scale", "scale_for", "replication_tasks", "RANGE_MIN",
           "their_range_min",
           "their_n_positions", "their_bins", "their_numbers", "FIT_EM", "their_fit_label"]

#: Their released code and the commit read.
THEIR_CODE = "github.com/lacoco-lab/length_generalization (commit b39b743)"

#: An ID exact match at or above this is a model that fits (their ``run_multiple_seeds.py``
#: ``threshold = 1.0``, line 102; the sweep's early stop at ID accuracy 1.0).
FIT_EM = 1.0

#: The two positional encodings of their experiment: learned APE (GPT-2's, with a random
#: position offset per training example) and NoPE.
HUANG_PES = ("ape_learned", "nope")

#: Where this implementation follows their code rather than the paper's text.
CODE_NOT_PAPER = (
    "training lengths 1-50 where the paper says 0-50: their datasets draw max(1, 0)..50 for "
    "binary majority, majority, copy and sort (algorithmic/language_modeling_train.py lines "
    "118, 156, 246, 280, 313), max(3, 0)..50 for interleave (line 193) and max(4, 0)..50 for "
    "addition (line 381); parity alone draws 0..50 (no max, lines 346, 352), and so does ours: "
    "its cells train from length 0 and test the bin 0-50 (BOS SEP e EOS is 1/51 of each)",
    "binary majority and interleave draw the count of zeros uniformly over 0..n without the "
    "tie (a tie is redrawn), parity the count of ones uniformly over 0..n, then shuffle (lines "
    "125-130, 210-215, 353-355): not iid bits",
    "interleave's length: a total t uniform in max(3, lo)..hi rounded to 3 round(t/3) and moved "
    "back into the range (lines 193, 200-205), so on 3..50 the length 3 weighs 2/48 and 48 "
    "weighs 4/48, in 51-100 the length 51 2/50, in 101-150 the length 150 2/50 (tasks/huang.py "
    "MajorityInterleaveTask.drawn_lengths), not uniform over the multiples of 3",
    "selection by the first out-of-distribution bin (51-100) among configurations at 100% in "
    "distribution, ties to the first in their sweep order (their sweep stops at the first "
    "configuration at 100% on both bins; the paper leaves ties open)",
    "exact match under teacher forcing over every answer position and EOS (their "
    "compute_metrics); for a greedy decoder it equals greedy decoding's exact match",
    "a seed fits when its ID exact match is 100% at an evaluation (every 3,000 steps) or at the "
    "last step; the sweep and the seeds stop a run at its first 100% evaluation",
    "learned APE with a random offset per example drawn uniformly in [0, n_positions - "
    "len(example)] (their generators; n_positions per task as their scripts set it)",
    "none fits: their 12-layer model (12 heads, d_model 768, 60,000 steps, 3,000 warmup, every "
    "seed counts) at the learning rate run_multiple_seeds.py's task_arch names for the cell "
    "(lines 52-69, 104: big 1e-4, bigsmalllr 3e-5; NoPE parity bigsmalllr), 1e-4 where it "
    "names none (the sweep's commented 12-layer configuration, language_modeling_train.py "
    "line 518)",
    "seeds 0, 1, 2, ... until five fit, at most 1,000 tried (run_multiple_seeds.py line 118: "
    "range(1000))",
)

#: Where our runs of their algorithmic tasks differ from their code (the cell files and
#: docs/huang-replication.md list them).
NOT_THEIRS = (
    "interleave: their reported numbers are headed 'task: bin_majority_interleave_sep' "
    "(algorithmic/lm-out-new-multi-run/bin_majority_interleave-average.txt and "
    "-average-nope.txt, line 3), a _sep variant that is not in their released code: "
    "language_modeling_train.py's --task choices (line 501) and run_multiple_seeds.py's "
    "branches (line 144) know only bin_majority_interleave, whose generator "
    "(BinaryMajorityInterleaveDataset, lines 187-238) puts no separator between the three "
    "streams or the periods; their sweep's summaries (lm-out-new-bin_majority_interleave/"
    "summary*.txt) carry no task line. What _sep separates, and whether the selected "
    "2l4h256dsmalllr / big were chosen on it, is not knowable from their files; we run the "
    "released generator, so their interleave numbers are of a variant we cannot reproduce",
    "exact GELU (GPT-2: the tanh approximation); the random offsets of binary addition span our "
    "model's positions (fewer than their 2 x 150)",
)


#: The configuration their selection chose per cell (``run_multiple_seeds.py``, ``task_arch``;
#: ``big`` = their 12-layer fallback at lr 1e-4, ``bigsmalllr`` at 3e-5), for the comparison
#: with ours; never used to select a sweep configuration (only the fallback's learning rate,
#: :func:`fallback_config`).
THEIR_SELECTED = {
    "ape_learned": {"majority_binary": "1l1h16d", "majority": "1l2h256d",
                    "majority_interleave": "2l4h256dsmalllr", "copy_unique_150": "2l1h64d",
                    "copy_ab": "4l4h256d", "sort_150": "1l2h256dsmalllr",
                    "parity_bits": "4l2h256dsmalllr", "addition_binary": "big"},
    "nope": {"majority_binary": "1l1h16d", "majority": "1l1h64d", "majority_interleave": "big",
             "copy_unique_150": "4l4h256d", "copy_ab": "4l4h256d", "sort_150": "1l1h256d",
             "parity_bits": "bigsmalllr", "addition_binary": "big"},
}

class ReplicationError(RASPError, ValueError):
    """Bad replication input: a task outside Huang et al.'s algorithmic tasks, a PE they did not
    train, an unknown scale, a damaged cell file. The message says what to do."""


@dataclass(frozen=True)
class SweepConfig:
    """One configuration of their sweep: ``n_layers`` x ``n_heads`` x ``d_model`` x ``lr``
    (GPT-2: d_head = d_model / n_heads, MLP width 4 d_model)."""

    n_layers: int
    n_heads: int
    d_model: int
    lr: float

    @property
    def tag(self) -> str:
        """Their directory name: ``2l4h256d`` (lr 1e-3) or ``2l4h256dsmalllr`` (lr 1e-4);
        other learning rates as ``-lr<lr>``; their fallback ``big`` (12 layers, 12 heads, d_model
        768, lr 1e-4) and ``bigsmalllr`` (lr 3e-5) by their names."""
        if (self.n_layers, self.n_heads, self.d_model) == (12, 12, 768) and \
                self.lr in (1e-4, 3e-5):
            return "big" if self.lr == 1e-4 else "bigsmalllr"
        base = f"{self.n_layers}l{self.n_heads}h{self.d_model}d"
        if self.lr == 1e-3:
            return base
        return base + ("smalllr" if self.lr == 1e-4 else f"-lr{self.lr:g}")


@dataclass(frozen=True)
class Scale:
    """A cut of the protocol. ``full`` is theirs (:data:`FULL`); ``small`` fits 2 CPU cores
    (:data:`SMALL`).

    Attributes:
        train_lengths: ``(lo, hi)`` of the in-distribution bin (training draws
            ``max(1, lo)..hi``).
        bins: the evaluated length bins, the in-distribution one first.
        configs: the sweep, in their order.
        steps, fit_every, bin_samples, batch_size: per run (their 30,000 / 3,000 / 2,000 / 64).
        fitting: fitting seeds per cell (their ``num_run`` 5); ``max_seeds``: seeds tried at most
            (theirs: 1,000).
        fallback, fallback_steps, fallback_warmup: the model used when no configuration fits
            (their ``big``: 12 layers, 12 heads, d_model 768, lr 1e-4, 60,000 steps, 3,000
            warmup steps; every seed counts). None (the formal languages): the configuration
            with the best in-distribution exact match is selected, every seed counting.
        eval_stride, eval_samples: the per-length curve (``accuracy.json``) besides the bins.
        train_set, epochs: the formal languages' fixed training set read ``epochs`` times in
            order (``steps`` = ``epochs`` x its batches); 0: fresh examples every step.
        weight_decay: AdamW's (their algorithmic ``Trainer``: 0.01; formal: 0.1).
        sweep_stops: the sweep stops at the first configuration 100% on bins 0 and 1 (their
            algorithmic ``language_modeling_train.py``); the formal languages' W&B grid ran
            every configuration.
    """

    name: str
    train_lengths: tuple
    bins: tuple
    configs: tuple
    steps: int
    fit_every: int
    bin_samples: int
    batch_size: int = 64
    fitting: int = 5
    max_seeds: int = 50
    fallback: SweepConfig | None = None
    fallback_steps: int = 0
    fallback_warmup: int = 0
    eval_stride: int = 5
    eval_samples: int = 16
    comparable: bool = True
    train_set: int = 0
    epochs: int = 0
    weight_decay: float = 0.01
    sweep_stops: bool = True

    def describe(self) -> str:
        """One paragraph: what this scale trains and evaluates."""
        c = self.configs
        grid = (f"{len(c)} configurations (layers {sorted({x.n_layers for x in c})} x heads "
                f"{sorted({x.n_heads for x in c})} x d_model {sorted({x.d_model for x in c})} x "
                f"lr {sorted({x.lr for x in c})})")
        bins = ", ".join(f"{max(1, lo)}-{hi}" for lo, hi in self.bins)
        data = (f"a fixed training set of {self.train_set:,} strings read {self.epochs} times "
                f"({self.steps:,} steps of batch {self.batch_size})" if self.train_set else
                f"{self.steps:,} steps of batch {self.batch_size} with a fit check every "
                f"{self.fit_every:,}")
        text = (f"scale {self.name}: training lengths {max(1, self.train_lengths[0])}-"
                f"{self.train_lengths[1]}, bins {bins} ({self.bin_samples} examples each), "
                f"{grid}, {data}, the mean of the first {self.fitting} fitting seeds (at most "
                f"{self.max_seeds:,} tried)")
        if not self.comparable:
            text += "; a cut of their protocol: its numbers are not theirs to compare"
        return text


def _sweep(layers, heads, dims, lrs) -> tuple:
    return tuple(SweepConfig(l, h, d, lr) for l in layers for h in heads for d in dims
                 for lr in lrs)


#: Their protocol (``language_modeling_train.py``: ``configs``, lengths, bins, 2,000 test
#: examples, 30,000 steps, evaluation every 3,000; ``run_multiple_seeds.py``: 5 fitting seeds
#: of at most 1,000 tried, the fallback ``big``; :func:`fallback_config` picks its lr per cell).
FULL = Scale("full", (0, 50), ((0, 50), (51, 100), (101, 150)),
             _sweep((1, 2, 4), (1, 2, 4), (16, 64, 256), (1e-3, 1e-4)),
             steps=30_000, fit_every=3_000, bin_samples=2_000, max_seeds=1_000,
             fallback=SweepConfig(12, 12, 768, 1e-4), fallback_steps=60_000,
             fallback_warmup=3_000)

#: The cut for 2 CPU cores (module docstring); not comparable with their numbers.
SMALL = Scale("small", (0, 10), ((0, 10), (11, 20), (21, 30)),
              _sweep((1, 2), (1, 2), (64,), (1e-3,)),
              steps=3_000, fit_every=500, bin_samples=200, max_seeds=10,
              fallback=SweepConfig(2, 4, 128, 1e-3), fallback_steps=3_000, fallback_warmup=0,
              eval_stride=2, eval_samples=16, comparable=False)

SCALES = {"full": FULL, "small": SMALL}

#: Their two fallback models (``run_multiple_seeds.py`` lines 103-110): 12 layers, 12 heads,
#: d_model 768, 60,000 steps with 3,000 warmup steps, every seed counting; lr 1e-4 (``big``)
#: or 3e-5 (``bigsmalllr``).
FALLBACKS = {"big": SweepConfig(12, 12, 768, 1e-4), "bigsmalllr": SweepConfig(12, 12, 768, 3e-5)}


def fallback_config(task: str, pe: str, scale: Scale) -> SweepConfig | None:
    """The model a cell trains when no configuration of the sweep fits.

    At their scale (``scale.fallback`` is ``big``): the fallback their ``task_arch``
    (``run_multiple_seeds.py`` lines 52-69) names for the cell (``bigsmalllr`` for NoPE parity,
    ``big`` for APE addition, NoPE interleave and addition), and ``big`` where it names a
    sweep configuration (their sweep fitted there; ``big``'s lr 1e-4 is the one of the 12-layer
    configuration commented out in their sweep, ``language_modeling_train.py`` line 518).
    Other scales: ``scale.fallback``."""
    if scale.fallback != FALLBACKS["big"]:
        return scale.fallback
    return FALLBACKS.get(THEIR_SELECTED.get(pe, {}).get(task, ""), FALLBACKS["big"])

#: Where our runs of their formal languages (``formal_lang_suite``) differ from their code.
FORMAL_NOT_THEIRS = (
    "their code has no selection script and logs one unseeded run per configuration to W&B; "
    "we select as for their algorithmic tasks (best bin-1 exact match among the configurations "
    "at 100% on bin 0, ties to sweep order; none at 100%: the best bin 0, every seed counting) "
    "and report the mean of the first five fitting seeds",
    "training strings drawn by our generator (uniform length over their training lengths, "
    "uniform among the members of that length), as many as their released train_src.txt "
    "holds (40 to 10,000), where they read that file (their generators' length "
    "distribution)",
    "test bins of 2,000 strings (drawn with replacement: lengths uniform in the bin's range, "
    "uniform among the members of each length) for every language; theirs "
    "(generated_ds/<dataset>/val_src_bin*.txt) hold 7 to 10,000 (FormalProtocol.bin_sizes): at "
    "most test_size strings (configs/dataset/<lang>.yaml: 10 for (aa)*, 25 for Tomita 2, (aaaa)*, "
    "(abab)* and Dyck-1 depth 2, 50 for Tomita 1, 10,000 for Tomita 6, 2,000 for the others), "
    "distinct where the generator is asked for unique strings (dataloader_utils.py lines 17, 32, "
    "40, 46, 61, 69; star-free lines 84-86, 102 as the config's unique), so a bin of a language with few members per length is small. Not matched: both "
    "estimate the same exact match over the bin's strings, and their smallest bins measure "
    "little (9 of 9 right: a Wilson 95% interval of 0.70 to 1, so a model right on all of them "
    "is not told from one right on 70% of the bin's strings); our runs also take one sample "
    "count for every bin (TrainConfig.bin_samples) where theirs differ per bin (Tomita 1: 44 / "
    "29 / 32)",
    "loss and exact match over the string positions; their loss also trains the EOS and "
    "padding positions (copies of the input token) and their exact match counts them",
    "AdamW weight decay on the weight matrices only (theirs: every parameter)",
    "the bins are their released files' measured length ranges (tasks/huang.py "
    "RELEASED_FORMAL), the numbers their plotted ones (visualise/data_local.py): which epoch "
    "and which run they plot is not in their code; ours are at the end of training",
)


def formal_language(task: str) -> str | None:
    """The language of a ``<language>_nextchar`` task with their plotted numbers
    (:data:`tasks.huang.RELEASED_FORMAL`), else None."""
    lang = task[:-len("_nextchar")] if task.endswith("_nextchar") else None
    return lang if lang in RELEASED_FORMAL else None


def _ranges(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.strip().split("-")) for part in text.split("/")]


@dataclass(frozen=True)
class FormalProtocol:
    """One language's settings in their ``formal_lang_suite``: the W&B grid of
    ``experiments/<experiment>`` (``model.num_layers`` x ``model.num_heads`` x
    ``model.d_model``, ``dataset.batch_size``, ``train.epochs``) and the size of their released
    training set ``generated_ds/<dataset>/train_src.txt`` (strings, counted) with their test
    bins' sizes (``val_src_bin{0,1,2}.txt``)."""

    experiment: str
    dataset: str
    layers: tuple
    heads: tuple
    d_models: tuple
    batch_size: int
    epochs: int
    train_set: int
    bin_sizes: tuple


_G = ((1, 2, 4), (1, 2, 4), (32, 64))
_G6 = ((1, 2, 4, 6), (1, 2, 4), (32, 64))
_G32 = ((1, 2, 4), (1, 2, 4), (32,))

#: Per language (our name): their ``formal_lang_suite/experiments/<file>.yaml`` and released
#: ``generated_ds/<dataset>/`` files, read at commit b39b743 (tests/test_replication.py checks
#: the values against the files' contents copied there). Learning rate 1e-5 and weight decay
#: 0.1 for all (``configs/optimizer/adamw.yaml``; no experiment overrides them).
FORMAL_PROTOCOL = {
    "tomita1": FormalProtocol("tomita-1.yaml", "Tomita-1", *_G32, 16, 100, 1_000, (44, 29, 32)),
    "tomita2": FormalProtocol("tomita-2.yaml", "Tomita-2", *_G6, 16, 100, 1_000, (21, 17, 18)),
    "tomita3": FormalProtocol("tomita-3.yaml", "Tomita-3", *_G6, 16, 100, 10_000,
                              (1637, 1806, 1820)),
    "tomita4": FormalProtocol("tomita-4.yaml", "Tomita-4", *_G6, 16, 100, 10_000,
                              (1925, 2000, 2000)),
    "tomita5": FormalProtocol("tomita-5.yaml", "Tomita-5", *_G6, 16, 150, 10_000,
                              (1817, 2000, 2000)),
    "tomita6": FormalProtocol("tomita-6.yaml", "Tomita-6", *_G6, 16, 100, 10_000,
                              (8664, 10000, 10000)),
    "tomita7": FormalProtocol("tomita-7.yaml", "Tomita-7", *_G6, 16, 100, 10_000,
                              (1822, 1882, 1863)),
    "dyck1_depth2": FormalProtocol("d-2.yaml", "D-2", *_G, 16, 100, 200, (25, 25, 25)),
    "dyck1_depth3": FormalProtocol("d-3.yaml", "D-3", *_G, 16, 100, 10_000, (742, 2000, 2000)),
    "dyck1_depth4": FormalProtocol("d-4.yaml", "D-4", *_G, 16, 100, 10_000, (2000, 2000, 2000)),
    "dyck1_depth12": FormalProtocol("d-12.yaml", "D-12", *_G, 16, 100, 10_000,
                                    (2000, 2000, 2000)),
    "aa_star": FormalProtocol("aastar.yaml", "AAStar", *_G32, 16, 100, 40, (7, 9, 10)),
    "aaaa_star": FormalProtocol("aaaastar.yaml", "AAAAStar", *_G6, 16, 100, 125, (20, 18, 16)),
    "abab_star": FormalProtocol("ababstar.yaml", "ABABStar", (4, 6), (2, 4), (32, 64), 4, 150,
                                125, (22, 17, 17)),
    "a_to_e_blocks": FormalProtocol("aastarbbstarccstarddstareestar.yaml",
                                    "AAStarBBStarCCStarDDStarEEStar", *_G, 16, 100, 10_000,
                                    (2000, 2000, 2000)),
    "ab_d_bc": FormalProtocol("abstar_d_bcstar.yaml", "ABStar_D_BCStar", *_G32, 16, 100, 10_000,
                              (2000, 2000, 2000)),
    "ends_02": FormalProtocol("012_star_0_2_star.yaml", "012Star_0_2Star", *_G, 16, 100, 10_000,
                              (2000, 2000, 2000)),
}


def formal_scale(task: str, name: str = "full") -> Scale:
    """Their formal-language protocol for one ``<language>_nextchar`` task
    (``formal_lang_suite/train_with_ce.py``, ``configs/``, ``experiments/<language>.yaml``):
    the language's W&B grid, batch size, epochs and training-set size
    (:data:`FORMAL_PROTOCOL`; e.g. Tomita 4: layers {1, 2, 4, 6} x heads {1, 2, 4} x d_model
    {32, 64}, 10,000 strings at batch 16 for 100 epochs = 62,500 steps; (abab)*: layers
    {4, 6} x heads {2, 4}, 125 strings at batch 4 for 150 epochs) at AdamW lr 1e-5, weight
    decay 0.1, constant rate, no gradient clipping; the lengths of their released files
    (train, bin 0 = the in-distribution bin, bins 1 and 2); 2,000 test strings per bin (their
    files hold 7 to 10,000: :attr:`FormalProtocol.bin_sizes`). ``name`` ``"small"``: lengths
    1-20, bins 1-20 / 21-30 / 31-40, layers {1, 2} x heads {1, 2} x d_model 32, lr 1e-3 (1e-5
    learns nothing in its 1,250 steps), 1,000 strings for 20 epochs, 200 examples per bin;
    not theirs to compare.

    Raises:
        ReplicationError: not one of their formal languages, or an unknown scale.
    """
    lang = formal_language(task)
    if lang is None:
        raise ReplicationError(f"{task!r} is not one of Huang et al.'s formal languages: "
                               f"{', '.join(n + '_nextchar' for n in RELEASED_FORMAL)}")
    if name == "full":
        train, *bins = _ranges(RELEASED_FORMAL[lang][3])
        fp = FORMAL_PROTOCOL[lang]
        n, batch, epochs = fp.train_set, fp.batch_size, fp.epochs
        return Scale("full", train, tuple(bins),
                     _sweep(fp.layers, fp.heads, fp.d_models, (1e-5,)),
                     steps=epochs * -(-n // batch), fit_every=0, bin_samples=2_000,
                     batch_size=batch, max_seeds=50, train_set=n, epochs=epochs,
                     weight_decay=0.1, sweep_stops=False, eval_stride=10)
    if name == "small":
        n, batch, epochs = 1_000, 16, 20
        return Scale("small", (1, 20), ((1, 20), (21, 30), (31, 40)),
                     _sweep((1, 2), (1, 2), (32,), (1e-3,)), steps=epochs * -(-n // batch),
                     fit_every=0, bin_samples=200, batch_size=batch, max_seeds=10, train_set=n,
                     epochs=epochs, weight_decay=0.1, sweep_stops=False, eval_stride=2,
                     comparable=False)
    raise ReplicationError(f"unknown scale {name!r}: full or small")


def scale_for(task: str, name: str) -> Scale:
    """The protocol of a task at scale ``name`` (``full`` / ``small``): :data:`FULL` /
    :data:`SMALL` for their algorithmic tasks, :func:`formal_scale` for their formal
    languages.

    Raises:
        ReplicationError: an unknown scale or task.
    """
    if formal_language(task) is not None:
        return formal_scale(task, name)
    if name not in SCALES:
        raise ReplicationError(f"unknown scale {name!r}: {' or '.join(SCALES)}")
    return SCALES[name]


def replication_tasks() -> dict:
    """Their tasks with released numbers (catalogue name -> their name): the algorithmic ones
    (:data:`tasks.huang.RELEASED`) and the formal languages in their next-character-set
    format (:data:`tasks.huang.RELEASED_FORMAL`, ``<language>_nextchar``)."""
    out = {name: run for name, (run, _, _) in RELEASED.items()}
    out.update({f"{lang}_nextchar": key for lang, (key, *_rest) in RELEASED_FORMAL.items()})
    return out


def their_n_positions(task: str, max_test: int) -> int:
    """``n_positions`` of their GPT-2 for a task (``run_multiple_seeds.py``), which bounds the
    random offsets: ``offset ~ U[0, n_positions - len(example)]``.

    Raises:
        ReplicationError: a task they did not run.
    """
    table = {"majority_binary": max_test + 4, "majority": max_test + 4,
             "parity_bits": max_test + 4, "majority_interleave": max_test + 6,
             "copy_unique_150": 2 * max_test + 3, "copy_ab": 2 * max_test + 3,
             "sort_150": 2 * max_test + 3, "addition_binary": 2 * max_test}
    if task not in table:
        raise ReplicationError(f"{task!r} is not one of Huang et al.'s algorithmic tasks: "
                               f"{', '.join(sorted(table))}")
    return table[task]

#: The shortest length of their algorithmic datasets where it is not ``max(1, lo)``
#: (``algorithmic/language_modeling_train.py``): parity none (line 346: 0..50), interleave
#: ``max(3, lo)`` (line 193). Addition's ``max(4, lo)`` (line 381) is the task's own shortest
#: length (``min_length`` 4): its setting stays ``max(1, lo)``, the lengths drawn the same.
RANGE_MIN = {"parity_bits": 0, "majority_interleave": 3}


def their_range_min(task: str, lo: int) -> int:
    """The shortest length a run of ``task`` draws on a range from ``lo``, as their dataset
    sets it (the run's ``train_min_len``, the in-distribution bin's shown start):
    ``max(1, lo)``, parity ``lo`` itself (0), interleave ``max(3, lo)`` (:data:`RANGE_MIN`).
    A run trained with another value is stale for the replication
    (:meth:`analysis.experiment.plan.PlannedRun.stale`)."""
    return max(RANGE_MIN.get(task, 1), int(lo))


def their_bins(task: str) -> list[str]:
    """The length ranges of their bins (ID first) that :func:`their_numbers` are on."""
    lang = formal_language(task)
    if lang is None:
        return [f"{their_range_min(task, 0)}-50", "51-100", "101-150"]
    return [f"{a}-{b}" for a, b in _ranges(RELEASED_FORMAL[lang][3])[1:]]


def their_numbers(task: str, pe: str) -> list[float] | None:
    """Their released mean exact match per bin (ID, 51-100, 101-150) for a cell
    (:data:`tasks.huang.RELEASED`), or None."""
    lang = formal_language(task)
    if lang is not None:
        _, ape, nope, _ = RELEASED_FORMAL[lang]
        return [x / 100.0 for x in (ape if pe == "ape_learned" else nope)]
    if task not in RELEASED:
        return None
    _, ape, nope = RELEASED[task]
    return list(ape if pe == "ape_learned" else nope)


def their_fit_label(theirs) -> str | None:
    """``their model did not fit (ID x)`` when their in-distribution mean ``theirs[0]`` is
    below :data:`FIT_EM` (their fallback counts seeds at any ID accuracy; their plotted formal
    runs are single runs), else None: the label :func:`analysis.experiment.replication.agreement`
    gives before ``agrees`` / ``disagrees``."""
    if not theirs or theirs[0] is None or theirs[0] >= FIT_EM:
        return None
    return f"their model did not fit (ID {theirs[0]:.3f})"
