"""rasp-lab's task catalogue.

Part A (:data:`GENERALIZATION_TASKS`): the length-generalization tasks of Zhou et al. 2023 and
Kazemnejad et al. 2023 in next-token format ``BOS prompt SEP answer EOS``, each with a seeded
generator, a plain-Python ground truth and a reference RASP program (a causal RASP-L next-token
program where one is known, else the natural program). Part B (:data:`SEQUENCE_PROGRAMS`): the
RASP classics (per-position programs). See ``docs/tasks.md``. Your own tasks (a task file, a
regular expression): :mod:`tasks.custom`.

Quick use::

    import numpy as np, tasks
    t = tasks.get_task("sort_unique")
    prompt, answer = t.sample(5, np.random.default_rng(0))
    sop = t.load_reference()
    assert tasks.decode_with_program(t, sop, prompt, 20) == answer
"""

from .base import (BOS, EOS, PAD, PLUS, SEP, SPECIAL_VALUES, Task, TaskInputError,
                   UnknownTaskError, Vocab, inputs_targets, next_token_examples)
from .catalogue import (GENERALIZATION_TASKS, HUANG_TASKS, SEQUENCE_PROGRAMS, TASKS, get_task,
                        list_tasks, register_task)
from .custom import TaskFileError, load_task_file, regex_task
from .decode import (decode_batch, decode_with_program, evaluate_sequence_program,
                     is_prefix_causal, verify_program, LengthResult, VerifyResult)

__all__ = ["Task", "Vocab", "TaskInputError", "UnknownTaskError", "TASKS", "get_task",
           "list_tasks", "GENERALIZATION_TASKS", "SEQUENCE_PROGRAMS", "HUANG_TASKS",
           "decode_with_program", "decode_batch", "verify_program", "VerifyResult",
           "LengthResult", "evaluate_sequence_program",
           "is_prefix_causal", "BOS", "SEP", "EOS", "PAD", "PLUS", "SPECIAL_VALUES",
           "inputs_targets", "next_token_examples", "TaskFileError", "load_task_file",
           "regex_task", "register_task"]
