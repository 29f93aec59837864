"""Rule critics: deterministic checks that need no model (JSON schema, length bounds, required terms).

All of them share one verdict rule, so their scores are comparable:

- each finding has a severity; each comes with a suggestion that says how to fix it;
- score = 10 - 1 per `minor` - 3 per `major` - 10 per `critical` finding, floored at 0 (10 with no findings);
- accepted when there is no `major` or `critical` finding.

They are cheap and synchronous, so `acritique` runs them inline instead of in a worker thread. Combine them with an
LLM critic through `CompositeCritic`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from reflection_graph._text import extract_json_text, first_json_value
from reflection_graph.critics.base import CritiqueRequest, InlineCritic
from reflection_graph.critique import Critique, Finding, Severity
from reflection_graph.settings import frozen, thawed

__all__ = ["JSONSchemaCritic", "LengthCritic", "RequiredTermsCritic", "RuleCritic", "extract_json_text"]

_PENALTY: dict[str, float] = {"none": 0.0, "minor": 1.0, "major": 3.0, "critical": 10.0}


class RuleCritic(InlineCritic):
    """Base for deterministic critics: subclasses implement `check(text)` and get the shared verdict rule."""

    name = "rule"
    ok_feedback = "All checks passed."

    def check(self, text: str) -> list[tuple[Finding, str]]:
        """Return `(finding, suggestion)` pairs for the candidate text (empty when it passes)."""
        raise NotImplementedError

    def _finding(self, message: str, severity: Severity) -> Finding:
        return Finding(message=message, severity=severity, source=self.name)

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Check the candidate and turn the findings into a `Critique` (see the module docstring for the rule)."""
        results = self.check(request.candidate)
        findings = [finding for finding, _ in results]
        suggestions = list(dict.fromkeys(suggestion for _, suggestion in results if suggestion))
        score = max(0.0, 10.0 - sum(_PENALTY[f.severity] for f in findings))
        accepted = not any(f.severity in ("major", "critical") for f in findings)
        if not findings:
            feedback = self.ok_feedback
        else:
            count = len(findings)
            feedback = f"{count} problem{'s' if count != 1 else ''}: " + "; ".join(
                f.message for f in findings
            )
        return Critique(
            issues=[f.message for f in findings],
            suggestions=suggestions,
            is_acceptable=accepted,
            score=score,
            feedback=feedback,
            findings=findings,
            checks_passed=int(accepted),  # one rule check: it passes or it fails
            checks_total=1,
        )


def _schema_suggestion(error: ValidationError, path: str) -> str:
    kind = error.validator
    value = error.validator_value
    if kind == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        name = missing[0] if missing else "the missing property"
        return f"Add the required property {name!r} at {path}."
    if kind == "type":
        wanted = " or ".join(value) if isinstance(value, list) else str(value)
        return f"Make {path} a JSON {wanted}."
    if kind == "enum":
        return f"Set {path} to one of {json.dumps(value)}."
    if kind == "const":
        return f"Set {path} to {json.dumps(value)}."
    if kind == "additionalProperties":
        return f"Remove the properties at {path} that the schema does not allow."
    if kind in ("minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "pattern", "format"):
        return f"Change {path} so that it satisfies {kind} = {json.dumps(value, default=str)}."
    return f"Change {path} so that it satisfies the schema's {kind!r} rule."


class JSONSchemaCritic(RuleCritic):
    """The candidate must be JSON (one enclosing code fence is allowed) that validates against `schema`.

    Findings: not JSON at all -> `critical`; JSON wrapped in other prose -> `major` (the JSON inside is still
    validated); each schema violation -> `major`, at its JSON path (`$.items[2].name`), with a suggestion
    naming the fix (the missing property, the expected type, the allowed values, ...).

    Args:
        schema: a JSON Schema (a dict, or a JSON string), or a pydantic model class whose JSON schema is used.
            It is checked against its metaschema now, and copied: a later edit of the dict given (a nested
            `required` list too) changes nothing; `critic.schema` holds it read-only (`settings.FrozenDict`).
        max_errors: report at most this many schema violations.
        name: the critic's name.

    Raises:
        ValueError: the schema is not a valid JSON Schema (the message carries the metaschema error).

    Example:
        >>> critic = JSONSchemaCritic({"type": "object", "required": ["name"]})
        >>> critic.critique(CritiqueRequest(task="t", candidate='{"name": "Ada"}')).is_acceptable
        True
    """

    ok_feedback = "Valid JSON that matches the schema."

    def __init__(
        self,
        schema: Mapping[str, Any] | str | bool | type[BaseModel],
        *,
        max_errors: int = 10,
        name: str = "json_schema",
    ) -> None:
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            schema = schema.model_json_schema()
        elif isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"schema is a string but not JSON ({exc}); pass a dict or a JSON string"
                ) from exc
        if not isinstance(schema, (Mapping, bool)):
            raise ValueError(
                f"schema must be a JSON Schema dict, a JSON string or a pydantic model, got {schema!r}"
            )
        # the validator's own plain copy, which nothing else holds: later edits of the caller's schema (its
        # nested `required` lists too) change nothing; `self.schema` shows it read-only
        resolved: dict[str, Any] | bool = thawed(schema) if isinstance(schema, Mapping) else schema
        validator_cls = jsonschema.validators.validator_for(resolved)
        try:
            validator_cls.check_schema(resolved)
        except SchemaError as exc:
            raise ValueError(f"schema is not a valid JSON Schema: {exc.message}; fix the schema") from exc
        if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 1:
            raise ValueError(f"max_errors must be a positive int, got {max_errors!r}")
        _check_name(name)
        self.schema: Mapping[str, Any] | bool = frozen(resolved)
        self.validator = validator_cls(resolved, format_checker=validator_cls.FORMAT_CHECKER)
        self.max_errors = max_errors
        self.name = name

    def check(self, text: str) -> list[tuple[Finding, str]]:
        """Parse the candidate as JSON and validate it against the schema."""
        results: list[tuple[Finding, str]] = []
        body = extract_json_text(text)
        if not body:
            return [
                (self._finding("the answer is empty, not JSON", "critical"), "Answer with the JSON only.")
            ]
        try:
            value = json.loads(body)
        except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested past the limit
            try:
                value = first_json_value(body)
            except ValueError:
                where = (
                    f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
                    if isinstance(exc, json.JSONDecodeError)
                    else "it nests deeper than Python's recursion limit"
                )
                message = f"the answer is not valid JSON: {where}"
                return [
                    (
                        self._finding(message, "critical"),
                        "Answer with one valid JSON value only (double-quoted keys and strings, no trailing "
                        "commas, no comments), optionally inside a ```json fence.",
                    )
                ]
            results.append(
                (
                    self._finding("the answer has text around the JSON", "major"),
                    "Return only the JSON, without any explanation before or after it.",
                )
            )
        errors = sorted(self.validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
        for error in errors[: self.max_errors]:
            path = error.json_path
            results.append(
                (
                    self._finding(f"{path}: {error.message}", "major"),
                    _schema_suggestion(error, path),
                )
            )
        if len(errors) > self.max_errors:
            hidden = len(errors) - self.max_errors
            results.append(
                (
                    self._finding(f"{hidden} more schema violations not shown", "major"),
                    "Fix the reported violations first.",
                )
            )
        return results


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")


def _check_bound(label: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{label} must be a non-negative int or None, got {value!r}")
    return value


class LengthCritic(RuleCritic):
    """The candidate's length must lie within word and/or character bounds (all inclusive).

    Words are runs of non-whitespace characters; characters are counted on the text with surrounding whitespace
    stripped. Each violated bound is a `major` finding saying how far off the text is; an empty candidate is
    `critical` when a minimum is set.

    Args:
        min_words: fewest words allowed.
        max_words: most words allowed.
        min_chars: fewest characters allowed.
        max_chars: most characters allowed.
        name: the critic's name.

    Raises:
        ValueError: no bound given, a negative or non-int bound, or a minimum above its maximum.

    Example:
        >>> LengthCritic(max_words=3).critique(CritiqueRequest(task="t", candidate="one two three four")).issues
        ['too long: 4 words, the maximum is 3']
    """

    ok_feedback = "The length is within the bounds."

    def __init__(
        self,
        *,
        min_words: int | None = None,
        max_words: int | None = None,
        min_chars: int | None = None,
        max_chars: int | None = None,
        name: str = "length",
    ) -> None:
        self.min_words = _check_bound("min_words", min_words)
        self.max_words = _check_bound("max_words", max_words)
        self.min_chars = _check_bound("min_chars", min_chars)
        self.max_chars = _check_bound("max_chars", max_chars)
        if all(v is None for v in (min_words, max_words, min_chars, max_chars)):
            raise ValueError(
                "LengthCritic needs at least one bound: min_words, max_words, min_chars or max_chars"
            )
        for unit, low, high in (("words", min_words, max_words), ("chars", min_chars, max_chars)):
            if low is not None and high is not None and low > high:
                raise ValueError(f"min_{unit} ({low}) is larger than max_{unit} ({high}); swap or fix them")
        _check_name(name)
        self.name = name

    def check(self, text: str) -> list[tuple[Finding, str]]:
        """Count words and characters and compare them with the bounds."""
        stripped = text.strip()
        if not stripped and (self.min_words or self.min_chars):
            return [(self._finding("the answer is empty", "critical"), "Write the answer; it is empty.")]
        results: list[tuple[Finding, str]] = []
        words = len(stripped.split())
        chars = len(stripped)
        for unit, count, low, high in (
            ("words", words, self.min_words, self.max_words),
            ("characters", chars, self.min_chars, self.max_chars),
        ):
            if high is not None and count > high:
                results.append(
                    (
                        self._finding(f"too long: {count} {unit}, the maximum is {high}", "major"),
                        f"Shorten the answer by at least {count - high} {unit}: cut repetition, filler and "
                        "secondary details, keep the essential content.",
                    )
                )
            if low is not None and count < low:
                results.append(
                    (
                        self._finding(f"too short: {count} {unit}, the minimum is {low}", "major"),
                        f"Lengthen the answer by at least {low - count} {unit} with relevant detail the task "
                        "asks for (no padding).",
                    )
                )
        return results


def _clean_terms(label: str, terms: Iterable[str]) -> tuple[str, ...]:
    if isinstance(terms, str):
        raise ValueError(f"{label} must be a list of strings, not one string; write [{terms!r}]")
    cleaned = tuple(terms)
    for term in cleaned:
        if not isinstance(term, str) or not term.strip():
            raise ValueError(f"{label} must contain non-empty strings, got {term!r}")
    return cleaned


class RequiredTermsCritic(RuleCritic):
    """The candidate must contain every required term and none of the forbidden ones.

    Matching is case-insensitive unless `case_sensitive`; with `whole_words` (the default) a term only matches
    where it is not part of a longer word ("cat" does not match "category"); whitespace inside a term matches
    any whitespace. Each missing term and each forbidden term found is a `major` finding.

    Args:
        terms: terms that must all appear.
        forbidden_terms: terms that must not appear.
        case_sensitive: match case exactly.
        whole_words: only match whole words.
        name: the critic's name.

    Raises:
        ValueError: no terms at all, a bare string instead of a list, or an empty term.

    Example:
        >>> critic = RequiredTermsCritic(["thank you"], forbidden_terms=["unfortunately"])
        >>> critic.critique(CritiqueRequest(task="t", candidate="Thank you for the offer.")).is_acceptable
        True
    """

    ok_feedback = "Every required term is present and no forbidden term is used."

    def __init__(
        self,
        terms: Sequence[str] = (),
        *,
        forbidden_terms: Sequence[str] = (),
        case_sensitive: bool = False,
        whole_words: bool = True,
        name: str = "required_terms",
    ) -> None:
        self.terms = _clean_terms("terms", terms)
        self.forbidden_terms = _clean_terms("forbidden_terms", forbidden_terms)
        if not self.terms and not self.forbidden_terms:
            raise ValueError("RequiredTermsCritic needs at least one term in terms or forbidden_terms")
        _check_name(name)
        self.case_sensitive = bool(case_sensitive)
        self.whole_words = bool(whole_words)
        self.name = name
        self._patterns = {term: self._compile(term) for term in (*self.terms, *self.forbidden_terms)}

    def _compile(self, term: str) -> re.Pattern[str]:
        body = r"\s+".join(re.escape(part) for part in term.split())
        if self.whole_words:
            body = rf"(?<!\w){body}(?!\w)"
        return re.compile(body, 0 if self.case_sensitive else re.IGNORECASE)

    def check(self, text: str) -> list[tuple[Finding, str]]:
        """Search the candidate for each term."""
        results: list[tuple[Finding, str]] = []
        for term in self.terms:
            if not self._patterns[term].search(text):
                results.append(
                    (
                        self._finding(f"missing required term {term!r}", "major"),
                        f"Mention {term!r} explicitly, where it fits the content.",
                    )
                )
        for term in self.forbidden_terms:
            hits = len(self._patterns[term].findall(text))
            if hits:
                times = "once" if hits == 1 else f"{hits} times"
                results.append(
                    (
                        self._finding(f"uses forbidden term {term!r} ({times})", "major"),
                        f"Remove or rephrase every use of {term!r}.",
                    )
                )
        return results
