"""The test runner that `CodeTestCritic` runs in the sandbox (stdlib only, executed as a script).

    python -I -B _reflection_graph_runner.py CONFIG SECRET_FD RESULT_FD [REQUESTS_FD ANSWERS_FD]

CONFIG is JSON: `{"mode": "outside" | "in-process", "solution": "solution.py", "tests": "test_solution.py",
"entry_point": name or null, "bind": [names]}`. It runs the tests module's top-level `test*` functions in file order
(or, with no test function and an entry point, `check(<entry point>)`, HumanEval's form) and reports each result as
one line on the result pipe RESULT_FD (`_channel.py`):

    <hex HMAC-SHA256 of the JSON> <JSON event with a sequence number "seq">

The HMAC key is a per-run secret that the parent writes into the pipe SECRET_FD; the runner reads it and closes that
pipe first, and keeps the result pipe out of child processes. The parent accepts only correctly signed events in
sequence and requires exactly one result per test function it found in the tests file itself.

- Mode `outside` (the default for assert-style tests): the candidate's code is not in this process at all. It runs
  in another sandbox (`_serve.py`); each function the tests import from the solution (and each name in `bind`) is a
  proxy here that sends the call's arguments as plain data on REQUESTS_FD and reads the returned value (or the
  exception) from ANSWERS_FD (`_wire.py`). The tests, their expected values and the comparisons stay here, where
  the candidate cannot reach: it can only answer calls, so it cannot pass a test without returning the right value.
- Mode `in-process` (tests that need the candidate's objects themselves): the tests import the candidate's module
  into this process. Printing, exiting early or writing to other descriptors cannot forge a verdict, but code that
  searches this process's memory for the signer can: the critique says `verdict_source="in-process"`.

A failing test's event carries, besides its message, what it compared (`compare`: the call, the value it returned
and the one expected, or the call that raised), made by `_explain.py`.

This file is copied into the sandbox; it must not import anything outside the standard library (and `_wire.py`,
`_explain.py`, `_channel.py`).
"""

import ast
import builtins
import contextlib
import gc
import inspect
import io
import json
import os
import sys
import types

sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True

import _reflection_graph_channel as channel  # noqa: E402  (copied next to this file)
import _reflection_graph_explain as explain  # noqa: E402  (copied next to this file)
import _reflection_graph_wire as wire  # noqa: E402  (copied next to this file)

CONFIG = json.loads(sys.argv[1])
SOLUTION, TESTS = CONFIG["solution"], CONFIG["tests"]
MODULE = os.path.splitext(SOLUTION)[0]


class CandidateGone(BaseException):
    """The candidate's process ended (or broke the protocol): no further call can be answered."""


class _Link:
    """The pipes to the candidate's process: one request, one answer."""

    def __init__(self, requests_fd, answers_fd):
        self.requests = requests_fd
        self.answers = os.fdopen(answers_fd, "rb")
        self.gone = None

    def receive(self):
        try:
            message = wire.receive(self.answers)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            self.gone = "its process sent a message that is not valid (" + str(exc)[:100] + ")"
            raise CandidateGone(self.gone) from None
        if message is None:
            self.gone = "its process ended"
            raise CandidateGone(self.gone)
        return message

    def call(self, name, args, kwargs):
        if self.gone:
            raise CandidateGone(self.gone)
        try:
            request = wire.line_of(
                {"call": name, "args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)}
            )
        except (wire.Unencodable, wire.TooLarge) as exc:
            raise TypeError(
                name + "() was called with " + str(exc) + ", which cannot be sent to the candidate's process"
            ) from None
        try:
            wire.send(self.requests, request)
        except OSError:
            self.gone = "its process ended"
            raise CandidateGone(self.gone) from None
        answer = self.receive()
        try:
            if "raised" in answer:
                error = _rebuilt(dict(answer["raised"]))
            else:
                value = wire.decode(answer["value"])
                _update_in_place(args, wire.decode(answer.get("args", [])))
        except (KeyError, TypeError, ValueError, RecursionError, AttributeError) as exc:
            self.gone = "its process sent an answer that is not valid (" + type(exc).__name__ + ")"
            raise CandidateGone(self.gone) from None
        if "raised" in answer:
            raise error
        return value


def _rebuilt(raised):
    """The candidate's exception as one of this process's own: a built-in type by name, or a plain Exception."""
    name = str(raised.get("type", "Exception"))[:80]
    kind: type = getattr(builtins, name, None) if name.isidentifier() else None  # type: ignore[assignment]
    if not (isinstance(kind, type) and issubclass(kind, BaseException)) or kind in (
        KeyboardInterrupt,
        GeneratorExit,
    ):
        kind = type(name if name.isidentifier() else "Exception", (Exception,), {})
    message = str(raised.get("message", ""))[:600]
    try:
        exc: BaseException = kind(message) if message else kind()
    except Exception:
        exc = BaseException.__new__(kind)
        exc.args = (message,)  # type: ignore[assignment]
    where = {k: str(raised[k])[:300] for k in ("raised_at", "raised_source") if k in raised}
    exc._rg_raised = where  # type: ignore[attr-defined]
    return exc


def _update_in_place(args, after):
    """Apply what the candidate's function did to its arguments (lists, dicts, sets, bytearrays) to ours."""
    if not isinstance(after, list) or len(after) != len(args):
        return
    for mine, theirs in zip(args, after, strict=True):
        if type(mine) is type(theirs) and isinstance(mine, (list, bytearray)):
            mine[:] = theirs
        elif type(mine) is type(theirs) and isinstance(mine, (dict, set)):
            mine.clear()
            mine.update(theirs)


class _Proxy:
    """Stands for one of the candidate's functions: calling it asks the candidate's process."""

    def __init__(self, link, name):
        self._link, self._name = link, name

    def __call__(self, *args, **kwargs):
        return self._link.call(self._name, args, kwargs)

    def __repr__(self):
        return "<function " + self._name + ">"


explain.HIDDEN_TYPES.append(
    _Proxy
)  # a failure names the values a test reads, never the candidate's functions


def _load_outside(link, emit):
    """The candidate's module as proxies, once its process says it imported cleanly; None after reporting why not."""
    hello = link.receive()
    if "syntax_error" in hello:
        error = hello["syntax_error"]
        emit(event="syntax_error", file=SOLUTION, **{k: error.get(k) for k in ("line", "message", "text")})
        return None
    if "import_error" in hello:
        error = {str(k): str(v)[:600] for k, v in hello["import_error"].items() if k in _ERROR_KEYS}
        error["kind"] = "memory" if error.get("kind") == "memory" else "import"
        emit(event="import_error", **error)
        return None
    names = (hello.get("ready") or {}).get("names") if isinstance(hello.get("ready"), dict) else None
    if not isinstance(names, list):
        link.gone = "its process sent a first message that is not valid"
        raise CandidateGone(link.gone)
    module = types.ModuleType(MODULE)
    for name in names:
        setattr(module, str(name), _Proxy(link, str(name)))
    return module


_ERROR_KEYS = ("type", "message", "kind", "output", "file", "line", "source", "raised_at", "raised_source")


def _load_in_process(emit):
    """The candidate's module imported here; None after reporting a syntax or import error."""
    with open(SOLUTION, encoding="utf-8") as handle:
        source = handle.read()
    try:
        compile(source, SOLUTION, "exec")
    except (SyntaxError, ValueError) as exc:
        text = (getattr(exc, "text", "") or "").strip()
        emit(
            event="syntax_error",
            file=SOLUTION,
            line=getattr(exc, "lineno", None),
            message=getattr(exc, "msg", str(exc)),
            text=text,
        )
        return None
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            return __import__(MODULE)
    except BaseException as exc:
        _report_import_error(exc, captured, emit)
        return None


def _report_import_error(exc, captured, emit):
    info = wire.describe(exc, TESTS)
    kind = "memory" if isinstance(exc, MemoryError) else "import"
    _free(exc)
    emit(event="import_error", kind=kind, output=captured.getvalue()[-500:], **info)


def _free(exc):
    with contextlib.suppress(Exception):
        import traceback

        traceback.clear_frames(exc.__traceback__)
    exc.__traceback__ = None
    gc.collect()


def _tests_module(solution, emit):
    """Run the tests file (asserts rewritten to show their values) with the candidate's names bound; None on error."""
    with open(TESTS, encoding="utf-8") as handle:
        tests_source = handle.read()
    rewrite = explain.Rewrite(tests_source)
    tree = ast.parse(tests_source, TESTS)
    rewrite.record_calls(tree)
    tree = rewrite.visit(tree)
    explain.STATEMENTS.update(rewrite.statements)
    name = os.path.splitext(TESTS)[0]
    module = types.ModuleType(name)
    module.__file__ = os.path.join(os.getcwd(), TESTS)
    module.__dict__["_rg_explain"] = explain.explain_failure
    for bound in CONFIG.get("bind", []):
        if hasattr(solution, bound):
            module.__dict__[bound] = getattr(solution, bound)
    sys.modules[name] = module
    sys.modules[MODULE] = solution
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            exec(compile(tree, TESTS, "exec"), module.__dict__)
    except BaseException as exc:
        if isinstance(exc, CandidateGone):
            raise
        _report_import_error(exc, captured, emit)
        return None
    return module


def _collect(module, solution):
    """The tests to run, in file order: `test*` functions, or `check(<entry point>)`."""
    name = module.__name__
    tests: list[tuple[str, object]] = [
        (key, obj)
        for key, obj in list(module.__dict__.items())
        if key.startswith("test") and inspect.isfunction(obj) and obj.__module__ == name
    ]
    tests.sort(key=lambda item: item[1].__code__.co_firstlineno)  # type: ignore[attr-defined]
    entry = CONFIG.get("entry_point")
    check = module.__dict__.get("check")
    if not tests and entry and inspect.isfunction(check):

        def run_check():
            if not hasattr(solution, entry):
                raise NameError("the code defines no function named " + repr(entry))
            return check(getattr(solution, entry))

        tests = [("check", run_check)]
    return tests


def _run_one(name, func, emit):
    emit(event="start", test=name)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            params = [
                p
                for p in inspect.signature(func).parameters.values()
                if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            ]
            if params:
                raise TypeError(
                    "test functions must take no arguments (pytest fixtures are not available here); "
                    "it takes " + ", ".join(p.name for p in params)
                )
            result = func()
            if inspect.iscoroutine(result):
                import asyncio  # only when needed: it takes longer to import than the rest together

                asyncio.run(result)
    except CandidateGone as exc:
        emit(event="candidate_gone", test=name, why=str(exc))
        return False
    except BaseException as exc:
        info = wire.describe(exc, TESTS)
        kind = "memory" if isinstance(exc, MemoryError) else "fail"
        compare = None if kind == "memory" else explain.compare_of(exc, TESTS)
        if compare:
            info["compare"] = compare
        _free(exc)
        emit(event="fail", test=name, kind=kind, output=captured.getvalue()[-500:], **info)
    else:
        emit(event="pass", test=name)
    return True


def main(emit):
    link = None
    if CONFIG["mode"] == "outside":
        link = _Link(int(sys.argv[4]), int(sys.argv[5]))
        try:
            solution = _load_outside(link, emit)
        except CandidateGone as exc:
            emit(event="candidate_gone", test=None, why=str(exc))
            return
        except (AttributeError, TypeError, ValueError):
            emit(event="candidate_gone", test=None, why="its process sent a first message that is not valid")
            return
    else:
        solution = _load_in_process(emit)
    if solution is None:
        return
    try:
        module = _tests_module(solution, emit)
    except CandidateGone as exc:
        emit(event="candidate_gone", test=None, why=str(exc))
        return
    if module is None:
        return
    tests = _collect(module, solution)
    emit(event="collected", tests=[name for name, _ in tests])
    for name, func in tests:
        if not _run_one(name, func, emit) or (link is not None and link.gone):
            return
    emit(event="done")


if __name__ == "__main__":
    main(channel.open_channel(int(sys.argv[2]), int(sys.argv[3])))
    # Do not wait for threads the code under test may have left running.
    os._exit(0)
