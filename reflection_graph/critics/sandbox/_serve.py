"""The candidate's side of a test run checked outside its process (stdlib only, copied into the sandbox).

    python -I -B _reflection_graph_serve.py SOLUTION REQUESTS_FD ANSWERS_FD

Imports the candidate's module and then answers calls, one JSON line each way (see `_wire.py`):

- first it sends `{"syntax_error": {...}}`, `{"import_error": {...}}` or `{"ready": {"names": [...]}}` (the names
  the module defines);
- then, for each `{"call": name, "args": [...], "kwargs": {...}}` read from REQUESTS_FD, it calls the function and
  sends `{"value": v, "args": [...]}` (the arguments as they are after the call, for functions that change them in
  place) or `{"raised": {"type": ..., "message": ..., "raised_at": ..., "raised_source": ...}}`.

It never sees the tests or the values they expect, holds no secret and has no way to report a verdict: whatever
this process does, the other side only receives values to check. It exits at the end of REQUESTS_FD.
"""

import contextlib
import io
import os
import sys
import types

sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True

import _reflection_graph_wire as wire  # noqa: E402  (copied next to this file)

SOLUTION, REQUESTS, ANSWERS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def _raised(exc):
    info = wire.describe(exc, SOLUTION)
    info.pop("file", None)
    line, source = info.pop("line", None), info.pop("source", "")
    if line is not None and "raised_at" not in info:
        info["raised_at"], info["raised_source"] = SOLUTION + ":" + str(line), source
    return {"raised": info}


def _load():
    """Import the candidate's module; the first message for the checking process."""
    with open(SOLUTION, encoding="utf-8") as handle:
        source = handle.read()
    try:
        code = compile(source, SOLUTION, "exec")
    except (SyntaxError, ValueError) as exc:
        text = (getattr(exc, "text", "") or "").strip()
        error = {"line": getattr(exc, "lineno", None), "message": getattr(exc, "msg", str(exc)), "text": text}
        return None, {"syntax_error": error}
    name = os.path.splitext(SOLUTION)[0]
    module = types.ModuleType(name)
    module.__file__ = os.path.join(os.getcwd(), SOLUTION)
    sys.modules[name] = module
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            exec(code, module.__dict__)
    except BaseException as exc:
        info = wire.describe(exc, SOLUTION)
        info["kind"] = "memory" if isinstance(exc, MemoryError) else "import"
        info["output"] = captured.getvalue()[-500:]
        return None, {"import_error": info}
    names = [n for n in vars(module) if not (n.startswith("__") and n.endswith("__"))]
    return module, {"ready": {"names": names}}


def _answer(module, request):
    """The answer line to one call request."""
    try:
        func = getattr(module, str(request["call"]))
        args = wire.decode(request.get("args", []))
        kwargs = wire.decode(request.get("kwargs", {"dict": []}))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            value = func(*args, **kwargs)
            return wire.line_of({"value": wire.encode(value), "args": wire.encode(args)})
    except wire.Unencodable as exc:
        answer = {"raised": {"type": "TypeError", "message": f"returned {exc}, which is not plain data"}}
    except wire.TooLarge as exc:
        answer = {
            "raised": {"type": "ValueError", "message": f"returned {exc}, more than the sandbox carries"}
        }
    except BaseException as exc:
        answer = _raised(exc)
    return wire.line_of(answer)


def main():
    module, hello = _load()
    wire.send(ANSWERS, hello)
    if module is None:
        return
    requests = os.fdopen(REQUESTS, "rb")
    while True:
        request = wire.receive(requests)
        if request is None:
            return
        wire.send(ANSWERS, _answer(module, request))


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        pass
    # Do not wait for threads the candidate's code may have left running.
    os._exit(0)
