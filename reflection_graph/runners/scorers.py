"""External scorers for `reflection_graph.runners.eval`: the ground truth a loop is measured against, never its critic.

A scorer turns `(record, candidate)` into a number in [0, 1]. `make_scorer` builds one from a name:

| name | score | the record needs |
| --- | --- | --- |
| `exact` | 1 when the candidate (stripped) equals a reference | `reference`: a string or a list of strings |
| `contains` | 1 when a reference appears in it as whole words, ignoring case and runs of spaces | `reference` |
| `regex` | 1 when a reference pattern matches (`re.search`) | `reference`: pattern(s) |
| `json-schema` | 1 when the candidate is JSON valid against the schema | `schema` (or an object `reference`) |
| `tests` | the fraction of the record's tests that pass, run in the sandbox | `tests`: Python test source (*) |
| `judge:<model>` | a separate judge model's 0-10 score / 10, with a rubric | optional `reference` |
| `module:function` | your `function(record, candidate)` (sync or async) | whatever it reads |

(*) The tests import from `solution` (`from solution import add`); with an `entry_point` field (HumanEval style)
that import is added when the tests have none.

A record that cannot be scored (a missing field, a scorer that raises, a value outside [0, 1]) raises
`ScorerError` with a message that says what to fix; `eval` turns it into that record's error row.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critics.rules import JSONSchemaCritic
from reflection_graph.models import at_temperature_zero, resolve_model

__all__ = ["SCORER_NAMES", "Scorer", "ScorerError", "make_scorer"]

SCORER_NAMES = ("exact", "contains", "regex", "json-schema", "tests", "judge:<model>", "module:function")
_HELP = "use exact, contains, regex, json-schema, tests, judge:<model spec> or module:function"

JUDGE_RUBRIC = (
    "You are grading an answer for correctness only. Score 10 when the answer fully and correctly does the task, "
    "0 when it is wrong, off-topic or empty, and in between for partly correct answers. When a reference answer "
    "is given in the context, an answer that agrees with the reference is correct and one that contradicts it is "
    "wrong; wording and length do not matter."
)

ScoreFn = Callable[[dict[str, Any], str], Awaitable[Any]]


class ScorerError(ValueError):
    """A record could not be scored; the message says why and what to fix."""


@dataclass(frozen=True)
class Scorer:
    """A named external scorer.

    Attributes:
        spec: the name it was built from (`contains`, `judge:embedded`, `my_mod:score`, ...).
        pass_mark: a score at or above it counts as a pass.
        needs: the record field it cannot work without, or None.
        cache: True when scores may be reused across runs (deterministic in the record and the candidate, and
            costly: `tests`, `judge`).
    """

    spec: str
    pass_mark: float
    fn: ScoreFn
    needs: str | None = None
    cache: bool = False

    def check(self, record: Mapping[str, Any]) -> None:
        """Raise `ScorerError` when the record lacks what this scorer needs (checked before the graph runs)."""
        if self.needs == "schema":
            if record.get("schema") is None and not isinstance(record.get("reference"), (dict, bool)):
                raise ScorerError(
                    f"scorer {self.spec!r}: record has no `schema` (a JSON Schema object); add one"
                )
            return
        if self.needs and (record.get(self.needs) is None or record.get(self.needs) in ("", [])):
            raise ScorerError(
                f"scorer {self.spec!r}: record has no `{self.needs}`; add it or pick another scorer"
            )

    async def ascore(self, record: Mapping[str, Any], candidate: str) -> float:
        """Score one candidate; always a float in [0, 1], else `ScorerError`."""
        self.check(record)
        try:
            value = await self.fn(dict(record), candidate)
        except ScorerError:
            raise
        except Exception as exc:
            raise ScorerError(f"scorer {self.spec!r} raised {type(exc).__name__}: {exc}") from exc
        return _checked_value(self.spec, value)


def _checked_value(spec: str, value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, (int, float)):
        raise ScorerError(
            f"scorer {spec!r} returned {type(value).__name__} {value!r}, expected a number in [0, 1]"
        )
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ScorerError(f"scorer {spec!r} returned {value!r}, outside [0, 1]")
    return number


def _references(record: Mapping[str, Any]) -> list[str]:
    ref = record.get("reference")
    refs: list[Any] = ref if isinstance(ref, list) else [ref]
    if not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        raise ScorerError(f"`reference` must be a non-empty string or a list of them, got {ref!r}")
    return [str(r) for r in refs]


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


async def _exact(record: dict[str, Any], candidate: str) -> float:
    return float(any(candidate.strip() == r.strip() for r in _references(record)))


def _whole(reference: str) -> re.Pattern[str]:
    """The normalised reference, not glued to a letter or digit on either side ("4" is not in "14")."""
    ref = _norm(reference)
    head = r"(?<!\w)" if ref[:1].isalnum() else ""
    tail = r"(?!\w)" if ref[-1:].isalnum() else ""
    return re.compile(head + re.escape(ref) + tail)


async def _contains(record: dict[str, Any], candidate: str) -> float:
    text = _norm(candidate)
    return float(any(_whole(r).search(text) for r in _references(record)))


async def _regex(record: dict[str, Any], candidate: str) -> float:
    for pattern in _references(record):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ScorerError(f"`reference` {pattern!r} is not a valid regular expression: {exc}") from None
        if compiled.search(candidate):
            return 1.0
    return 0.0


async def _json_schema(record: dict[str, Any], candidate: str) -> float:

    schema: Any = record.get("schema")
    if schema is None:
        schema = record.get("reference")
    try:
        critic = JSONSchemaCritic(schema)
    except ValueError as exc:
        raise ScorerError(f"`schema`: {exc}") from None
    result = critic.critique(CritiqueRequest(task=str(record.get("task", "")), candidate=candidate))
    return 1.0 if result.is_acceptable else 0.0


async def _tests(record: dict[str, Any], candidate: str) -> float:

    tests = record.get("tests")
    if not isinstance(tests, str):
        raise ScorerError(f"`tests` must be Python test source (a string), got {type(tests).__name__}")
    entrypoint = str(record.get("entrypoint") or "solution.py")
    module = entrypoint.removesuffix(".py")
    name = record.get("entry_point")
    if (
        isinstance(name, str)
        and name.isidentifier()
        and not re.search(rf"\b(from|import)\s+{module}\b", tests)
    ):
        tests = f"from {module} import {name}\n\n{tests}"  # HumanEval-style tests call the function bare
    try:
        critic = CodeTestCritic(tests, entrypoint=entrypoint)
    except ValueError as exc:
        raise ScorerError(f"`tests`: {exc}") from None
    result = await critic.acritique(CritiqueRequest(task=str(record.get("task", "")), candidate=candidate))
    return result.score / 10.0


def _judge(model_spec: str) -> ScoreFn:

    if not model_spec.strip():
        raise ValueError(
            "scorer 'judge:' needs a model spec, e.g. judge:embedded or judge:openai:gpt-4o-mini"
        )
    judge = LLMCritic(
        at_temperature_zero(resolve_model(model_spec.strip(), role="critic")),
        guidelines=JUDGE_RUBRIC,
        on_parse_error="raise",
        name="judge",
    )

    async def score(record: dict[str, Any], candidate: str) -> float:
        context = record.get("context")
        parts = [f"Reference answer: {record['reference']}"] if record.get("reference") else []
        if context:
            parts.append(str(context))
        request = CritiqueRequest(
            task=str(record.get("task", "")), candidate=candidate, context="\n".join(parts) or None
        )
        result = await judge.acritique(request)
        return min(max(result.score / 10.0, 0.0), 1.0)

    return score


def _user_function(spec: str) -> ScoreFn:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"unknown scorer {spec!r}: {_HELP}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"scorer {spec!r}: cannot import module {module_name!r} ({exc})") from None
    fn: Any = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        raise ValueError(f"scorer {spec!r}: {module_name} has no function {attr!r}")
    return _as_async(fn)


def _as_async(fn: Callable[[dict[str, Any], str], Any]) -> ScoreFn:
    async def score(record: dict[str, Any], candidate: str) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(record, candidate)
        value = await asyncio.to_thread(fn, record, candidate)
        return await value if inspect.isawaitable(value) else value

    return score


_BUILTIN: dict[str, tuple[ScoreFn, str | None, bool]] = {
    "exact": (_exact, "reference", False),
    "contains": (_contains, "reference", False),
    "regex": (_regex, "reference", False),
    "json-schema": (_json_schema, "schema", False),
    "tests": (_tests, "tests", True),
}


def make_scorer(
    scorer: str | Callable[[dict[str, Any], str], Any], *, pass_mark: float | None = None
) -> Scorer:
    """Build a scorer from its name, or wrap your own function.

    Args:
        scorer: a name from the table in the module docstring, or a callable `fn(record, candidate) -> float`.
        pass_mark: a score at or above it passes; default 1.0 for the all-or-nothing scorers and `tests`
            (every test passes), 0.7 for `judge:`, 0.5 for your own function.

    Returns:
        The `Scorer`.

    Raises:
        ValueError: an unknown name, a module or function that cannot be imported, a judge model that cannot be
            resolved, or a pass mark outside [0, 1].
    """
    if pass_mark is not None and not (isinstance(pass_mark, (int, float)) and 0.0 <= pass_mark <= 1.0):
        raise ValueError(f"pass_mark must be a number in [0, 1], got {pass_mark!r}")
    if callable(scorer):
        name = getattr(scorer, "__qualname__", None) or type(scorer).__name__
        return Scorer(spec=name, pass_mark=0.5 if pass_mark is None else pass_mark, fn=_as_async(scorer))
    if not isinstance(scorer, str) or not scorer.strip():
        raise ValueError(f"scorer must be a name or a function, got {scorer!r}; {_HELP}")
    spec = scorer.strip()
    if spec in _BUILTIN:
        fn, needs, cache = _BUILTIN[spec]
        return Scorer(
            spec=spec, pass_mark=1.0 if pass_mark is None else pass_mark, fn=fn, needs=needs, cache=cache
        )
    if spec.startswith("judge:"):
        return Scorer(
            spec=spec, pass_mark=0.7 if pass_mark is None else pass_mark, fn=_judge(spec[6:]), cache=True
        )
    if ":" not in spec:
        raise ValueError(f"unknown scorer {spec!r}: {_HELP}")
    return Scorer(spec=spec, pass_mark=0.5 if pass_mark is None else pass_mark, fn=_user_function(spec))
