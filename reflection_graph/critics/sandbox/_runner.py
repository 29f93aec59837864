"""The test runner that `CodeTestCritic` runs inside the sandbox (stdlib only, executed as a script).

    python -I -B _reflection_graph_runner.py SOLUTION TESTS SECRET_FD RESULT_FD

It imports the tests module (which imports the candidate's code), runs every top-level `test*` function in file
order and reports each result as one line on the result pipe `RESULT_FD`:

    <hex HMAC-SHA256 of the JSON> <JSON event with a sequence number "seq">

The HMAC key is a per-run secret that the parent writes into the pipe `SECRET_FD`. The runner reads it and closes
that pipe before anything of the candidate is imported, and keeps the result pipe out of child processes. So the
candidate cannot forge a verdict by printing marker lines, by writing to stdout or by exiting early: the parent
accepts only correctly signed events in sequence, and requires exactly one result per test function it found in
the tests file itself. (The candidate runs in this process, so code that deliberately searches this process's
memory for the signing object could still forge; the sandbox's isolation limits what such code can do otherwise.)

This file is copied into the sandbox; it must not import anything outside the standard library.
"""

import ast
import contextlib
import gc
import hashlib
import hmac
import inspect
import io
import json
import os
import reprlib
import sys
import traceback
import types

SOLUTION, TESTS = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True

_repr = reprlib.Repr()
_repr.maxstring = 160
_repr.maxother = 160
_repr.maxlong = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 12


def _open_channel():
    """Read the per-run secret and close its pipe; return the signed-event writer."""
    secret_fd, result_fd = int(sys.argv[3]), int(sys.argv[4])
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


def _show(value):
    try:
        return _repr.repr(value)
    except Exception:
        return "<unrepresentable " + type(value).__name__ + ">"


def _explain(text, parts):
    shown = ", ".join(src + " was " + _show(val) for src, val, literal in parts if not literal)
    return "assert " + text + " failed" + (" (" + shown + ")" if shown else "")


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


class _Rewrite(ast.NodeTransformer):
    def __init__(self, source):
        self.source = source

    def _segment(self, node):
        return ast.get_source_segment(self.source, node) or "<expr>"

    def visit_Assert(self, node):
        if node.msg is not None:
            return node
        text = self._segment(node.test)
        test = node.test
        pre = []
        parts = []

        def bind(name, expr):
            pre.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=expr))
            parts.append((self._segment(expr), name, isinstance(expr, ast.Constant)))
            return ast.Name(id=name, ctx=ast.Load())

        new_test: ast.expr
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
            left = bind("_rg_left", test.left)
            right = bind("_rg_right", test.comparators[0])
            new_test = ast.Compare(left=left, ops=test.ops, comparators=[right])
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            new_test = ast.UnaryOp(op=ast.Not(), operand=bind("_rg_value", test.operand))
        else:
            new_test = bind("_rg_value", test)
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
        msg = ast.Call(
            func=ast.Name(id="_rg_explain", ctx=ast.Load()), args=[ast.Constant(text), tuples], keywords=[]
        )
        nodes = [*pre, ast.Assert(test=new_test, msg=msg)]
        for new in nodes:
            ast.copy_location(new, node)
            ast.fix_missing_locations(new)
        return nodes


def _where(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    in_tests = [f for f in frames if os.path.basename(f.filename) == TESTS]
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
    return info


def _describe(exc):
    try:
        info = {"type": type(exc).__name__, "message": str(exc).replace(os.getcwd() + os.sep, "")[:600]}
        info.update(_where(exc))
    except MemoryError:
        info = {"type": "MemoryError", "message": ""}
    return info


def _free(exc):
    with contextlib.suppress(Exception):
        traceback.clear_frames(exc.__traceback__)
    exc.__traceback__ = None
    gc.collect()


def main():
    with open(SOLUTION, encoding="utf-8") as handle:
        solution_source = handle.read()
    try:
        compile(solution_source, SOLUTION, "exec")
    except (SyntaxError, ValueError) as exc:
        _emit(
            event="syntax_error",
            file=SOLUTION,
            line=getattr(exc, "lineno", None),
            message=getattr(exc, "msg", str(exc)),
            text=(getattr(exc, "text", "") or "").strip(),
        )
        return
    with open(TESTS, encoding="utf-8") as handle:
        tests_source = handle.read()
    tree = _Rewrite(tests_source).visit(ast.parse(tests_source, TESTS))
    code = compile(tree, TESTS, "exec")
    module_name = os.path.splitext(TESTS)[0]
    module = types.ModuleType(module_name)
    module.__file__ = os.path.join(os.getcwd(), TESTS)
    module.__dict__["_rg_explain"] = _explain
    sys.modules[module_name] = module
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            exec(code, module.__dict__)
    except BaseException as exc:
        info = _describe(exc)
        kind = "memory" if isinstance(exc, MemoryError) else "import"
        _free(exc)
        _emit(event="import_error", kind=kind, output=captured.getvalue()[-500:], **info)
        return
    tests = [
        (name, obj)
        for name, obj in list(module.__dict__.items())
        if name.startswith("test") and inspect.isfunction(obj) and obj.__module__ == module_name
    ]
    tests.sort(key=lambda item: item[1].__code__.co_firstlineno)
    _emit(event="collected", tests=[name for name, _ in tests])
    for name, func in tests:
        _emit(event="start", test=name)
        captured = io.StringIO()
        try:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                params = [
                    p
                    for p in inspect.signature(func).parameters.values()
                    if p.default is inspect.Parameter.empty
                    and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
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
        except BaseException as exc:
            info = _describe(exc)
            kind = "memory" if isinstance(exc, MemoryError) else "fail"
            _free(exc)
            _emit(event="fail", test=name, kind=kind, output=captured.getvalue()[-500:], **info)
        else:
            _emit(event="pass", test=name)
    _emit(event="done")


if __name__ == "__main__":
    _emit = _open_channel()
    main()
    # Do not wait for threads the code under test may have left running.
    os._exit(0)
