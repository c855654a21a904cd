"""The REPL front end of the language: the original RASP's line reader, the statement
interpreter (parse trees -> values and IR), its built-in functions, the session, the
interactive loop, and how values are shown (text, pictures, progress bars).

It stands on the language core (``rasp.ir``, ``rasp.parser``, ``rasp.interpreter``, ...) and
the analyses (``rasp.analyses``: the REPL's ``measure`` and RASP-L check); nothing below it
imports it. Modules: ``reader``, ``runtime``, ``builtins``, ``session``, ``repl``,
``original``, ``display``, ``draw``, ``progress``.
"""
