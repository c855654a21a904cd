"""Files: the one owner of reading a file the project did not write itself, and of writing one.

Reading (every reader of a run file, checkpoint, compiled or TransformerLens export, sweep or
example file, REPL file goes through :func:`read_bytes`):

* **Regular files only.** The path is opened with ``O_NONBLOCK`` (a named pipe never blocks)
  and ``fstat``-ed before a byte is read: a FIFO, a device (a link to ``/dev/zero``), a
  socket or a directory is refused, and so is any path under ``/proc``, ``/sys`` or ``/dev``
  (their "regular files" are process and device state).
* **A size cap per kind** (:data:`MAX_JSON_BYTES`, :data:`MAX_TEXT_BYTES`,
  :func:`max_weights_bytes`), checked on the size ``fstat`` reports and on what is read.
* **Checked structure.** :func:`read_json` refuses ``NaN``/``Infinity``/``1e400`` and deep
  nesting, and with a ``schema`` checks the document field by field (:func:`check_json`: the
  first bad field named in one line); :func:`read_safetensors` checks the header (dtypes floating point, offsets inside
  the file, shapes against the caller's) before any tensor is built; :func:`read_torch` refuses
  a compressed or oversized zip member before ``torch.load(weights_only=True)`` sees it.

Writing (:func:`atomic_write`, :func:`open_append`): a temporary file from ``tempfile.mkstemp``
(``O_EXCL``, a fresh name) in the target directory, written through its descriptor, fsynced and
moved into place with ``os.replace`` (the final name is replaced, never followed); an append
opens with ``O_NOFOLLOW``. Files get ``0o666 & ~umask`` (what ``open`` gives) unless the
caller names a mode (a token: ``0o600``).

Errors: :class:`FileReadError` (a :class:`~rasp.errors.RASPError`, one line); a missing file
stays ``FileNotFoundError`` so callers can say what is missing.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import tempfile
import pickle
import warnings
import zipfile

from rasp.errors import RASPError

__all__ = ["FileReadError", "MAX_JSON_BYTES", "MAX_TEXT_BYTES", "FLOAT_DTYPES", "max_weights_bytes",
           "read_bytes", "read_text", "read_json", "parse_json", "check_json", "read_safetensors", "read_torch",
           "atomic_write", "atomic_write_bytes", "open_append", "truncate_file", "file_mode"]

#: Largest JSON file read (run files, configs, model.json, tl_config.json, examples).
MAX_JSON_BYTES = 16 << 20
#: Largest text file read (a program, a REPL file, a sweep or examples file).
MAX_TEXT_BYTES = 16 << 20
#: Virtual file systems nothing is read from.
VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")
#: safetensors dtypes of weights (floating point only: int64 or complex weights are refused).
FLOAT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
#: Other safetensors dtypes (allowed only for the buffers a caller names, e.g. masks).
_OTHER_DTYPES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "I32": 4, "I64": 8}


class FileReadError(RASPError, ValueError):
    """A file that is not a regular file, too large, or not of the structure its kind needs.
    The message names the file and the reason, in one line."""


def max_weights_bytes() -> int:
    """Largest weights file: the model budget (``rasp_model.config.MAX_MODEL_BYTES`` of
    float32) stored as float64 (compiled models), plus a header."""
    # breaks an import cycle: rasp_model.config imports this module
    from rasp_model.config import MAX_MODEL_BYTES
    return 2 * MAX_MODEL_BYTES + (16 << 20)


def _virtual(path: str) -> str | None:
    real = os.path.realpath(path)
    for root in VIRTUAL_ROOTS:
        if real == root or real.startswith(root + "/"):
            return root
    return None


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n:,} bytes"


def read_bytes(path, what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in errors), at most
    ``max_bytes``. FileNotFoundError when missing; :class:`FileReadError` otherwise."""
    path = os.fspath(path)
    root = _virtual(path)
    if root is not None:
        raise FileReadError(f"{path}: not a regular file ({what} is never read from {root}/)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FileReadError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a named pipe" if stat.S_ISFIFO(st.st_mode) else
                    "a directory" if stat.S_ISDIR(st.st_mode) else
                    "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                    "not a regular file")
            raise FileReadError(f"{path}: {what} must be a regular file, this is {kind}")
        if st.st_size > max_bytes:
            raise FileReadError(f"{path}: {what} is larger than {_kib(max_bytes)} "
                                f"({st.st_size:,} bytes), the most allowed for it")
        chunks, n = [], 0
        while n <= max_bytes:
            b = os.read(fd, min(1 << 20, max_bytes + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > max_bytes:
            raise FileReadError(f"{path}: {what} is larger than {_kib(max_bytes)}, the most "
                                f"allowed for it")
        return b"".join(chunks)
    except OSError as e:
        raise FileReadError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_text(path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a NUL byte or other encoding refused)."""
    data = read_bytes(path, what, max_bytes)
    if b"\0" in data:
        raise FileReadError(f"{os.fspath(path)}: {what} is not text (binary content)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FileReadError(f"{os.fspath(path)}: {what} is not UTF-8 text") from None


def parse_json(text: str | bytes, where: str, what: str):
    """JSON text to a value: ``NaN``, ``Infinity`` and numbers that overflow (``1e400``)
    refused, deep nesting refused; :class:`FileReadError` naming ``where``."""
    def no_constants(name):
        raise ValueError(f"non-finite number {name}")

    def finite(s):
        x = float(s)
        if not math.isfinite(x):
            raise ValueError(f"non-finite number {s[:20]}")
        return x
    try:
        return json.loads(text, parse_constant=no_constants, parse_float=finite)
    except RecursionError:
        raise FileReadError(f"{where}: corrupt {what} (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise FileReadError(f"{where}: corrupt {what} ({str(e)[:200]})") from None


def read_json(path, what: str, max_bytes: int = MAX_JSON_BYTES, schema=None):
    """A JSON file through :func:`read_bytes` and :func:`parse_json`; with ``schema``, checked
    field by field (:func:`check_json`)."""
    doc = parse_json(read_bytes(path, what, max_bytes), os.fspath(path), what)
    if schema is not None:
        check_json(doc, schema, f"{os.fspath(path)}: {what}")
    return doc


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               type(None): "null", list: "a list", dict: "an object"}


def _describe(schema) -> str:
    if isinstance(schema, tuple):
        return " or ".join(dict.fromkeys(_describe(s) for s in schema))
    if isinstance(schema, list):
        return "a list" if len(schema) == 1 else f"a list of {len(schema)} items"
    if isinstance(schema, dict):
        return "an object"
    return _TYPE_NAMES.get(schema, getattr(schema, "__name__", str(schema)))


def _matches_type(value, t) -> bool:
    if t is float:        # an integer is a number; a bool is not; 10**400 does not fit a float
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        try:
            return math.isfinite(float(value))
        except OverflowError:
            return False
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, t)


def check_json(value, schema, where: str, field: str = "") -> None:
    """Check a parsed JSON ``value`` against ``schema``, raising :class:`FileReadError`
    ``"<where>: field <field> must be <kind>, got <value, truncated>"`` at the first bad field.

    ``schema`` is a type (``str``, ``int``, ``float``: any finite number, ``bool``,
    ``type(None)``, ``list``, ``dict``: anything of that type), a tuple of alternatives, a
    one-item list ``[S]`` (a list of ``S``), a longer list ``[S1, S2]`` (exactly those items),
    ``{str: S}`` (an object mapping names to ``S``) or ``{"key": S, ...}`` (an object whose
    keys are checked; a missing key is checked as null, so it is optional exactly when ``S``
    allows ``None``; other keys are ignored)."""
    def bad():
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise FileReadError(f"{where}: field {field or '(the document)'} must be "
                            f"{_describe(schema)}, got {shown}")
    if isinstance(schema, tuple):
        failed = []
        for alt in schema:
            try:
                check_json(value, alt, where, field)
                return
            except FileReadError as e:
                failed.append((alt, e))
        for alt, e in failed:      # a structure of the right kind: its own first bad field
            if isinstance(alt, (dict, list)) and isinstance(value, type(alt)):
                raise e
        bad()
    if isinstance(schema, list):
        if not isinstance(value, list) or (len(schema) > 1 and len(value) != len(schema)):
            bad()
        for i, v in enumerate(value):
            check_json(v, schema[0] if len(schema) == 1 else schema[i], where, f"{field}[{i}]")
        return
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            bad()
        if list(schema) == [str]:
            for k, v in value.items():
                check_json(v, schema[str], where, f"{field}.{k[:40]}" if field else k[:40])
            return
        for k, s in schema.items():
            check_json(value.get(k), s, where, f"{field}.{k}" if field else k)
        return
    if not _matches_type(value, schema):
        bad()


def read_safetensors(path, what: str, shapes: dict | None = None,
                     max_bytes: int | None = None, buffers: tuple[str, ...] = ()):
    """``(tensors, metadata)`` of a safetensors file, checked before any tensor is built:
    a regular file within ``max_bytes`` (:func:`max_weights_bytes`), a header of JSON objects,
    every tensor of a floating-point dtype, its data inside the file and of the size its shape
    says; with ``shapes`` (name -> shape) exactly those tensors of those shapes. Tensors whose
    names end with one of ``buffers`` (e.g. ``".mask"``) may also be boolean or integer.
    FileNotFoundError when missing; :class:`FileReadError` otherwise."""
    path = os.fspath(path)
    data = read_bytes(path, what, max_weights_bytes() if max_bytes is None else max_bytes)

    def bad(msg):
        raise FileReadError(f"{path}: {what}: {msg}")
    if len(data) < 8:
        bad("truncated (no safetensors header)")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8 or n > (100 << 20):
        bad("truncated or not a safetensors file (header length past the end)")
    header = parse_json(data[8:8 + n], path, what)
    if not isinstance(header, dict):
        bad("not a safetensors file (header not an object)")
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        bad("metadata must map names to strings")
    body = len(data) - 8 - n
    for name, h in header.items():
        sizes = {**FLOAT_DTYPES, **_OTHER_DTYPES} if buffers and name.endswith(buffers) \
            else FLOAT_DTYPES
        if not isinstance(h, dict) or h.get("dtype") not in sizes:
            dt = h.get("dtype") if isinstance(h, dict) else None
            bad(f"tensor {name[:60]!r} has dtype {str(dt)[:20]}; weights are floating point")
        shape, off = h.get("shape"), h.get("data_offsets")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(off, list) or len(off) != 2
                or not all(isinstance(o, int) for o in off)):
            bad(f"tensor {name[:60]!r}: bad shape or offsets")
        if not 0 <= off[0] <= off[1] <= body or off[1] - off[0] != math.prod(shape) * \
                sizes[h["dtype"]]:
            bad(f"tensor {name[:60]!r}: data outside the file or of another size than its "
                f"shape (truncated?)")
        if shapes is not None and tuple(shapes.get(name, ())) != tuple(shape):
            bad(f"tensor {name[:60]!r} of shape {shape} where {shapes.get(name)} is expected")
    if shapes is not None and set(shapes) != set(header):
        missing = sorted(set(shapes) - set(header))[:3]
        extra = sorted(set(header) - set(shapes))[:3]
        bad(f"other tensors than expected (missing {missing}, unexpected {extra})")
    # start-up: safetensors loads only when this runs
    from safetensors.torch import load
    try:
        tensors = load(data)
    except Exception as e:  # safetensors raises its own error types
        bad(f"not a readable safetensors file ({str(e)[:200]})")
    return tensors, dict(meta)


def read_torch(path, what: str, max_bytes: int):
    """``torch.load(weights_only=True)`` of a file through :func:`read_bytes` (a regular file
    within ``max_bytes``), its zip members first checked: stored uncompressed (a few MB of
    deflate would inflate to gigabytes) and within ``max_bytes`` in all."""
    # start-up: torch loads only when this runs
    import torch
    path = os.fspath(path)
    data = read_bytes(path, what, max_bytes)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise FileReadError(f"{path}: {what}: not a torch zip file") from None
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or \
            sum(i.file_size for i in infos) > max_bytes:
        raise FileReadError(f"{path}: {what}: compressed or oversized members; not written by "
                            f"rasp-lab")
    try:
        with warnings.catch_warnings():        # torch warns about foreign pickle protocols
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, EOFError, RuntimeError, ValueError, KeyError, TypeError,
            IndexError, AttributeError, OSError, MemoryError, RecursionError) as e:
        # the text of torch's unpickling errors suggests weights_only=False: never shown
        raise FileReadError(f"{path}: {what}: corrupt or not written by rasp-lab "
                            f"({type(e).__name__})") from None


# ------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------

def file_mode(mode: int | None = None) -> int:
    """The mode a written file gets: ``mode``, else ``0o666`` less the umask."""
    if mode is not None:
        return mode
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path, write, mode: int | None = None, suffix: str = ".tmp") -> None:
    """Write ``path`` atomically: ``write(f)`` fills a binary file object on a fresh
    ``mkstemp`` file in the same directory (created with ``O_EXCL``: a planted link is never
    followed), which is fsynced, given :func:`file_mode` and moved into place with
    ``os.replace``. The temporary file is removed on any failure."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), file_mode(mode))
        os.replace(tmp, path)
    except BaseException:      # any failure, Ctrl-C included: no temp file left, re-raise
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def atomic_write_bytes(path, data: bytes, mode: int | None = None) -> None:
    """:func:`atomic_write` of ``data``."""
    atomic_write(path, lambda f: f.write(data), mode)


def open_append(path, mode: int | None = None):
    """``path`` opened for appending text (created if missing), refusing a symbolic link
    (``O_NOFOLLOW``) or anything but a regular file: :class:`FileReadError`."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_NONBLOCK, file_mode(mode))
    except OSError as e:
        if os.path.islink(path):
            raise FileReadError(f"{path} is a symbolic link; refusing to write through it "
                                f"(remove it)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileReadError(f"{path} is not a regular file; refusing to write to it")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8")


def truncate_file(path, size: int) -> None:
    """Cut the regular file ``path`` to ``size`` bytes, refusing a symbolic link
    (``O_NOFOLLOW``) or anything but a regular file (:class:`FileReadError`)."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        if os.path.islink(path):
            raise FileReadError(f"{path} is a symbolic link; refusing to write through it "
                                f"(remove it)") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileReadError(f"{path} is not a regular file; refusing to write to it")
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
