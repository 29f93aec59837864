"""What a failing test reports (stdlib only, copied into the sandbox next to `_runner.py`).

`Rewrite` rewrites each `assert` of the tests so that its operands are kept in variables: when the assert fails,
`explain_failure` (bound in the tests' module as `_rg_explain`) makes its message (the values involved, or the
test's own message) and attaches what it compared (`compare`): the source of the value under test (the call), its
repr and the expected side's repr, each at most `SHOWN_CHARS` long and shown under a short alarm (the candidate's
objects may override `__repr__`: one that raises, never returns or returns megabytes gives a bounded placeholder).
The values are the ones the assert itself computed; nothing is evaluated again. For an exception raised below a
statement of the tests, `compare_of` names the call on that statement and the literal (or plain name, read from the
frame, never computed) it expected.
"""

import ast
import builtins
import json
import os
import reprlib
import signal
import sys
import types

_repr = reprlib.Repr()
_repr.maxstring = 160
_repr.maxother = 160
_repr.maxlong = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 12


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
        if value is _MISSING or issubclass(type(value), tuple(HIDDEN_TYPES)):
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


def explain_failure(text, parts, static, *message):
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


STATEMENTS: "dict[int, dict]" = {}
"""Line -> what the statement on that line of the tests file calls (`Rewrite.statements`), to name the call that
raised."""


def _failing_frame(exc, tests_file):
    """The innermost frame of the tests file in `exc`'s traceback, its line, and whether the error came from deeper."""
    found, tb, deeper = None, exc.__traceback__, False
    while tb is not None:
        if os.path.basename(tb.tb_frame.f_code.co_filename) == tests_file:
            found, deeper = tb, False
        else:
            deeper = found is not None or deeper
        tb = tb.tb_next
    return (found.tb_frame, found.tb_lineno, deeper) if found is not None else (None, None, False)


def compare_of(exc, tests_file):
    """What the failing check compared (`_compare`), or None: from a rewritten assert, or for an exception raised
    below a statement of the tests file, the call on that statement and the literal (or plain name) it expects."""
    try:
        message = exc.args[0] if isinstance(exc, AssertionError) and exc.args else None
        if type(message) is _Explained:
            return getattr(message, "compare", None)
        frame, line, deeper = _failing_frame(exc, tests_file)
        static = STATEMENTS.get(line)
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


HIDDEN_TYPES = [types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type]
"""Values a failure never shows (`name = value`): modules, functions, classes; the runner adds its proxies."""


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


class Rewrite(ast.NodeTransformer):
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
