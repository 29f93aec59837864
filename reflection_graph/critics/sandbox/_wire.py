"""Plain data between the candidate's process and the process that checks it (stdlib only, copied into the sandbox).

The candidate's process (`_serve.py`) only computes what the tests ask for; the checking process (`_runner.py` in
its `outside` mode) never runs candidate code. What passes between them is one JSON object a line, and every value
in it is plain data in a tagged form that decodes to built-in types only, so nothing the candidate sends can run
code, compare equal to everything or change the checking process:

- `None`, `True`/`False`, `str` and finite `float` as themselves; `list` as a JSON array;
- `{"int": hex}`, `{"float": "nan" | "inf" | "-inf"}`, `{"complex": [re, im]}`, `{"bytes": hex}`,
  `{"bytearray": hex}`, `{"tuple": [...]}`, `{"set": [...]}`, `{"frozenset": [...]}`, `{"dict": [[k, v], ...]}`,
  `{"range": [start, stop, step]}`, `{"iter": [...]}` (a generator or iterator, consumed), `{"await": value}` (a
  coroutine, run to its result).

Subclasses of these types are sent as the base type (an `int` subclass whose `==` is always true arrives as its
integer value). Anything else cannot be checked outside the candidate's process and is refused with `Unencodable`.

`describe` and `where` turn an exception into the dict both sides report (type, message, file, line, source).
"""

import json
import os
import traceback

MAX_LINE = 64 * 1024 * 1024
"""The longest message line either process sends or reads: the one bound on a value's size, the same for a list,
a generator or any other value (a longer one is refused as too large, not as wrong; the memory and time limits of
the run bound the work of building it)."""

_TAGGED = (
    (bytearray, "bytearray", lambda v: bytes(v).hex()),
    (bytes, "bytes", lambda v: bytes(v).hex()),
    (complex, "complex", lambda v: [complex(v).real, complex(v).imag]),
    (range, "range", lambda v: [v.start, v.stop, v.step]),
)


class Unencodable(TypeError):
    """A value that is not plain data."""


def encode(value, depth=0):
    """`value` as JSON-ready tagged plain data; raises `Unencodable` for anything else."""
    if depth > 200:
        raise Unencodable("a value nested more than 200 levels deep")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        number = int.__index__(value)
        return number if -(2**53) < number < 2**53 else {"int": hex(number)}
    if isinstance(value, float):
        real = float.__float__(value)
        return real if real - real == 0 else {"float": repr(real)}
    if isinstance(value, str):
        return str.__str__(value)
    for kind, tag, convert in _TAGGED:
        if isinstance(value, kind):
            return {tag: convert(value)}
    if isinstance(value, (list, tuple, set, frozenset)):
        base = next(k for k in (list, tuple, frozenset, set) if isinstance(value, k))
        items = [encode(item, depth + 1) for item in value]
        return items if base is list else {base.__name__: items}
    if isinstance(value, dict):
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    return _encode_lazy(value, depth)


def _encode_lazy(value, depth):
    kind = type(value).__name__
    if kind == "coroutine":
        import asyncio  # only when needed: it takes longer to import than the rest together

        return {"await": encode(asyncio.run(value), depth + 1)}
    if hasattr(type(value), "__next__") and hasattr(type(value), "__iter__"):
        return {"iter": [encode(item, depth + 1) for item in value]}
    raise Unencodable(f"a {kind} object")


def decode(data):
    """The plain value that `encode` made; raises `ValueError` for anything that is not its output."""
    if data is None or isinstance(data, (bool, str, int, float)):
        return data
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("not an encoded value")
    ((tag, body),) = data.items()
    if tag == "int":
        return int(body, 16)
    if tag == "float":
        return float(body)
    if tag == "complex":
        return complex(float(body[0]), float(body[1]))
    if tag in ("bytes", "bytearray"):
        return (bytes if tag == "bytes" else bytearray).fromhex(body)
    if tag == "range":
        return range(*(int(n) for n in body))
    if tag in ("tuple", "set", "frozenset"):
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(item) for item in body)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in body}
    if tag == "iter":
        return iter([decode(item) for item in body])
    if tag == "await":
        return _finished(decode(body))
    raise ValueError("unknown tag " + repr(tag)[:40])


async def _finished(value):
    return value


class TooLarge(ValueError):
    """A message longer than `MAX_LINE`."""


def line_of(message):
    """`message` as one JSON line; raises `TooLarge` when it is longer than `MAX_LINE`."""
    line = json.dumps(message, allow_nan=False).encode("utf-8", "surrogatepass") + b"\n"
    if len(line) > MAX_LINE:
        raise TooLarge(
            f"a value of {len(line) // (1024 * 1024)} MiB as JSON (at most {MAX_LINE // (1024 * 1024)} MiB)"
        )
    return line


def send(fd, message):
    """Write one JSON message line to `fd` (raises `BrokenPipeError` when the reader is gone, `TooLarge` for a
    message longer than `MAX_LINE`)."""
    view = memoryview(message if isinstance(message, bytes) else line_of(message))
    while view:
        view = view[os.write(fd, view) :]


def receive(stream):
    """The next JSON message from a binary stream; None at its end; `ValueError` for a line that is not one."""
    line = stream.readline(MAX_LINE)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise ValueError("a message longer than the limit, or cut off")
    message = json.loads(line.decode("utf-8", "surrogatepass"))
    if not isinstance(message, dict):
        raise ValueError("a message that is not a JSON object")
    return message


def where(exc, tests_file):
    """Where `exc` happened: the last frame in `tests_file` (or the last frame), and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    in_tests = [f for f in frames if os.path.basename(f.filename) == tests_file]
    at = in_tests[-1] if in_tests else (frames[-1] if frames else None)
    last = frames[-1] if frames else None
    info: dict[str, object] = {}
    if at is not None:
        info["file"] = os.path.basename(at.filename)
        info["line"] = at.lineno
        info["source"] = (at.line or "").strip()
    if last is not None and last is not at:
        info["raised_at"] = os.path.basename(last.filename) + ":" + str(last.lineno)
        info["raised_source"] = (last.line or "").strip()
    info.update(getattr(exc, "_rg_raised", None) or {})
    return info


def describe(exc, tests_file):
    """The report of an exception: type, message (run-dir paths removed) and where."""
    try:
        info = {"type": type(exc).__name__, "message": str(exc).replace(os.getcwd() + os.sep, "")[:600]}
        info.update(where(exc, tests_file))
    except MemoryError:
        info = {"type": "MemoryError", "message": ""}
    return info
