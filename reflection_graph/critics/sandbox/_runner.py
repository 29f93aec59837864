"""The test runner that `CodeTestCritic` runs in the sandbox (stdlib only, executed as a script).

    python -I -B _reflection_graph_runner.py CONFIG SECRET_FD RESULT_FD [REQUESTS_FD ANSWERS_FD]

CONFIG is JSON: `{"mode": "outside" | "in-process", "solution": "solution.py", "tests": "test_solution.py",
"entry_point": name or null, "bind": [names]}`. It runs the tests module's top-level `test*` functions in file order
(or, with no test function and an entry point, `check(<entry point>)`, HumanEval's form) and reports each result as
one line on the result pipe RESULT_FD:

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

A failing `assert` reports, besides its message, what it compared (`compare`): the source of the value under test
(the call), its repr and the expected side's repr, each at most `SHOWN_CHARS` long and computed under a short alarm
(the candidate's objects may override `__repr__`). The values are the ones the assert itself computed (the rewrite
keeps them); nothing is evaluated again. For an exception raised below a statement of the tests, `compare` names the
call on that statement and the literal (or plain name) it expected.

This file is copied into the sandbox; it must not import anything outside the standard library (and `_wire.py`).
"""

import ast
import builtins
import contextlib
import gc
import hashlib
import hmac
import inspect
import io
import json
import os
import reprlib
import signal
import sys
import types

sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True

import _reflection_graph_wire as wire  # noqa: E402  (copied next to this file)

CONFIG = json.loads(sys.argv[1])
SOLUTION, TESTS = CONFIG["solution"], CONFIG["tests"]
MODULE = os.path.splitext(SOLUTION)[0]

_repr = reprlib.Repr()
_repr.maxstring = 160
_repr.maxother = 160
_repr.maxlong = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 12


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


def _open_channel():
    """Read the per-run secret and close its pipe; return the signed-event writer."""
    secret_fd, result_fd = int(sys.argv[2]), int(sys.argv[3])
    chunks = []
    while True:
        data = os.read(secret_fd, 4096)
        if not data:
            break
        chunks.append(data)
    os.close(secret_fd)
    os.set_inheritable(result_fd, False)
    signer = hmac.new(b"".join(chunks), digestmod=hashlib.sha256)
    del chunks
    counter = [0]

    def emit(**event):
        body = json.dumps({"seq": counter[0], **event}, default=str).encode("utf-8", "replace")
        counter[0] += 1
        tag = signer.copy()
        tag.update(body)
        line = tag.hexdigest().encode("ascii") + b" " + body + b"\n"
        while line:
            line = line[os.write(result_fd, line) :]

    return emit


SHOWN_CHARS = 200
"""The longest repr a failure shows of one value."""
REPR_SECONDS = 0.25
"""How long showing one value may take (a repr that takes longer is named as such, not waited for)."""


class _SlowRepr(BaseException):
    """Raised by the alarm in a repr that took longer than `REPR_SECONDS`."""


def _on_alarm(signum, frame):
    raise _SlowRepr


def _type_name(value):
    return type.__dict__["__name__"].__get__(type(value))


def _cut(text, limit=SHOWN_CHARS):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _timed_repr(value):
    """`value`'s short repr, stopped by an alarm after `REPR_SECONDS` (hostile code may override `__repr__`)."""
    try:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
    except (ValueError, OSError, TypeError):
        return _repr.repr(value)  # not the main thread: no alarm; the run's own time limit still holds
    pending = signal.setitimer(signal.ITIMER_REAL, REPR_SECONDS)[0]
    try:
        return _repr.repr(value)
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)
            if pending:
                signal.setitimer(signal.ITIMER_REAL, pending)


def _show(value):
    """`value`'s repr in at most `SHOWN_CHARS` characters; never raises, never waits long for a hostile repr."""
    try:
        text = _timed_repr(value)
        return _cut(text if type(text) is str else "<unrepresentable " + _type_name(value) + ">")
    except _SlowRepr:
        return "<a " + _type_name(value) + " whose repr took too long>"
    except BaseException:
        return "<unrepresentable " + _type_name(value) + ">"


def _explain(text, parts):
    shown = ", ".join(src + " was " + _show(val) for src, val, literal in parts if not literal)
    return "assert " + text + " failed" + (" (" + shown + ")" if shown else "")


class _Explained(str):
    """An assertion's message that also carries what the failing comparison compared (`compare`)."""

    compare: "dict | None" = None


def _user_message(message):
    try:
        text = str(message)
        return text if type(text) is str else _show(message)
    except BaseException:
        return _show(message)


def _name_values(names, frame):
    """`name = value` for the plain values among `names` in `frame` (read, never computed), at most four."""
    shown = []
    for name in names:
        value = _frame_value(frame, name)
        if value is _MISSING or issubclass(type(value), _NOT_SHOWN):
            continue
        shown.append(name + " = " + _show(value))
        if len(shown) == 4:
            break
    return shown


_MISSING = object()


def _frame_value(frame, name):
    """The value `name` has in `frame`: a dictionary lookup in its locals, globals or builtins, never a call."""
    for space in (frame.f_locals, frame.f_globals, vars(builtins)):
        try:
            if name in space:
                return space[name]
        except BaseException:
            return _MISSING
    return _MISSING


def _compare(static, actual, expected, frame):
    """What a failing check compared, as plain strings for the event: the call, its value and the expected one."""
    detail = {"call": static["source"], "returned": static["returned"], "op": static["op"]}
    textual = static["repr_of"]
    if actual is not _MISSING:
        detail["actual"] = _cut(actual) if textual and type(actual) is str else _show(actual)
    if expected is not _MISSING:
        detail["expected"] = _cut(expected) if textual and type(expected) is str else _show(expected)
    names = _name_values(static["names"], frame) if frame is not None else []
    if names:
        detail["with"] = names
    return detail


def _explain_failure(text, parts, static, *message):
    """The message of a failing rewritten assert: its values, or the test's own message; with `compare` attached."""
    explained = _Explained(_user_message(message[0]) if message else _explain(text, parts))
    try:
        static = json.loads(static)
        expected = parts[static["expected"]][1] if static["expected"] is not None else _MISSING
        explained.compare = _compare(static, parts[static["actual"]][1], expected, sys._getframe(1))
    except _SlowRepr:
        pass
    except Exception:
        pass
    return explained


_STATEMENTS: "dict[int, dict]" = {}
"""Line -> what the statement on that line of the tests file calls (`_statics`), to name the call that raised."""


def _failing_frame(exc):
    """The innermost frame of the tests file in `exc`'s traceback, its line, and whether the error came from deeper."""
    found, tb, deeper = None, exc.__traceback__, False
    while tb is not None:
        if os.path.basename(tb.tb_frame.f_code.co_filename) == TESTS:
            found, deeper = tb, False
        else:
            deeper = found is not None or deeper
        tb = tb.tb_next
    return (found.tb_frame, found.tb_lineno, deeper) if found is not None else (None, None, False)


def _compare_of(exc):
    """What the failing check compared (`_compare`), or None: from a rewritten assert, or for an exception raised
    below a statement of the tests file, the call on that statement and the literal (or plain name) it expects."""
    try:
        message = exc.args[0] if isinstance(exc, AssertionError) and exc.args else None
        if type(message) is _Explained:
            return getattr(message, "compare", None)
        frame, line, deeper = _failing_frame(exc)
        static = _STATEMENTS.get(line)
        if static is None or (isinstance(exc, AssertionError) and not deeper):
            return None
        expected = _MISSING
        if static.get("expected_literal") is not None:
            expected = ast.literal_eval(static["expected_literal"])
        elif static.get("expected_name") is not None:
            expected = _frame_value(frame, static["expected_name"])
        detail = _compare(static, _MISSING, expected, frame)
        detail["raised"] = True
        return detail
    except _SlowRepr:
        return None
    except Exception:
        return None


_NOT_SHOWN = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, _Proxy)


_OPS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}


_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "in": "contains", "not in": "not contains"}
"""A comparison read from its right side (`3 in f()`: `f()` contains 3)."""


def _calls(node):
    return any(isinstance(inner, ast.Call) for inner in ast.walk(node))


def _is_literal(node):
    if node is None:
        return False
    try:
        ast.literal_eval(node)
    except Exception:
        return False
    return True


def _on_left(left, right):
    """Whether the value under test is the left side: the side that calls something, else the one not literal."""
    if _calls(left) != _calls(right):
        return _calls(left)
    if _is_literal(left) != _is_literal(right):
        return not _is_literal(left)
    return True


class _Rewrite(ast.NodeTransformer):
    """Rewrites each `assert` of the tests so that a failure shows its values, and records, line by line, what
    each statement calls (`statements`), to name the call when one raises."""

    def __init__(self, source):
        self.source = source
        self.statements = {}

    def _segment(self, node):
        return ast.get_source_segment(self.source, node) or "<expr>"

    def _static(self, actual, op, expected=None):
        """What a failure of a check on `actual` says: its source (inside `repr(...)`), whether it is a call, the
        names its arguments read, and the expected side when it is a literal or a plain name."""
        repr_of = (
            isinstance(actual, ast.Call)
            and isinstance(actual.func, ast.Name)
            and actual.func.id == "repr"
            and len(actual.args) == 1
            and not actual.keywords
        )
        shown = actual.args[0] if repr_of else actual
        called = {id(call.func) for call in ast.walk(shown) if isinstance(call, ast.Call)}
        names = [
            node.id
            for node in ast.walk(shown)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in called
        ]
        if isinstance(shown, ast.Name):
            names = []  # the value itself is shown
        return {
            "source": self._segment(shown),
            "returned": isinstance(shown, ast.Call),
            "repr_of": repr_of,
            "op": op,
            "names": list(dict.fromkeys(names)),
            "expected_literal": self._segment(expected) if _is_literal(expected) else None,
            "expected_name": expected.id if isinstance(expected, ast.Name) else None,
        }

    def record_calls(self, tree):
        """Record the call each plain statement of `tree` makes (`x = f(1)`, `f(1)`, `return f(1)`)."""
        for node in ast.walk(tree):
            if isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
                if isinstance(node.value, ast.Call):
                    self.statements.setdefault(node.lineno, self._static(node.value, None))

    def visit_Assert(self, node):
        text = self._segment(node.test)
        test = node.test
        pre = []
        parts = []

        def bind(name, expr):
            pre.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=expr))
            parts.append((self._segment(expr), name, isinstance(expr, ast.Constant)))
            return ast.Name(id=name, ctx=ast.Load())

        new_test: ast.expr
        where: tuple[int, int | None]
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
            op, right_side = _OPS[type(test.ops[0])], test.comparators[0]
            if _on_left(test.left, right_side):
                static, where = self._static(test.left, op, right_side), (0, 1)
            else:
                static, where = self._static(right_side, _MIRRORED.get(op, op), test.left), (1, 0)
            left = bind("_rg_left", test.left)
            right = bind("_rg_right", right_side)
            new_test = ast.Compare(left=left, ops=test.ops, comparators=[right])
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            static, where = self._static(test.operand, "false"), (0, None)
            new_test = ast.UnaryOp(op=ast.Not(), operand=bind("_rg_value", test.operand))
        else:
            static, where = self._static(test, "true"), (0, None)
            new_test = bind("_rg_value", test)
        self.statements.setdefault(node.lineno, static)
        static = dict(static, actual=where[0], expected=where[1])
        tuples = ast.List(
            elts=[
                ast.Tuple(
                    elts=[ast.Constant(src), ast.Name(id=name, ctx=ast.Load()), ast.Constant(literal)],
                    ctx=ast.Load(),
                )
                for src, name, literal in parts
            ],
            ctx=ast.Load(),
        )
        args = [ast.Constant(text), tuples, ast.Constant(json.dumps(static))]
        msg = ast.Call(
            func=ast.Name(id="_rg_explain", ctx=ast.Load()),
            args=args if node.msg is None else [*args, node.msg],
            keywords=[],
        )
        nodes = [*pre, ast.Assert(test=new_test, msg=msg)]
        for new in nodes:
            ast.copy_location(new, node)
            ast.fix_missing_locations(new)
        return nodes


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
    rewrite = _Rewrite(tests_source)
    tree = ast.parse(tests_source, TESTS)
    rewrite.record_calls(tree)
    tree = rewrite.visit(tree)
    _STATEMENTS.update(rewrite.statements)
    name = os.path.splitext(TESTS)[0]
    module = types.ModuleType(name)
    module.__file__ = os.path.join(os.getcwd(), TESTS)
    module.__dict__["_rg_explain"] = _explain_failure
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
        compare = None if kind == "memory" else _compare_of(exc)
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
    main(_open_channel())
    # Do not wait for threads the code under test may have left running.
    os._exit(0)
