"""The critique schema and a tolerant parser for critic replies.

`Critique` is what every critic returns. `CritiqueOutput` is the narrower schema handed to a model's
`with_structured_output` (and turned into a JSON grammar for the embedded model). `parse_critique` turns a
free-text reply into a `Critique`, accepting the aliases other reflection designs use (`needs_improvement`,
`is_good`, `pass`, `quality_score`, ...). A reply that still cannot be parsed raises `CritiqueParseError`;
what the loop does then is the `on_parse_error` policy of the LLM critic (see `reflection_graph.critics`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field, field_validator, model_validator

from reflection_graph._text import extract_json_object

__all__ = [
    "Critique",
    "CritiqueOutput",
    "CritiqueParseError",
    "Finding",
    "Severity",
    "critique_tool_schema",
    "extract_json_object",
    "parse_critique",
]

Severity = Literal["none", "minor", "major", "critical"]
_SEVERITY_ORDER: dict[str, int] = {"none": 0, "minor": 1, "major": 2, "critical": 3}

MAX_ITEMS = 50
"""At most this many issues, suggestions and findings are kept per critique (a note says how many were cut)."""
MAX_ITEM_CHARS = 1000
"""Each issue or suggestion is cut to this many characters."""
MAX_FEEDBACK_CHARS = 8000
"""The feedback is cut to this many characters: a critique never makes the revise prompt or the result huge."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded_list(items: list[str]) -> list[str]:
    kept = [_cut(item, MAX_ITEM_CHARS) for item in items[:MAX_ITEMS]]
    if len(items) > MAX_ITEMS:
        kept[-1] = f"({len(items) - MAX_ITEMS + 1} more not shown)"
    return kept


class CritiqueParseError(ValueError):
    """A critic reply that could not be turned into a `Critique`."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class Finding(BaseModel):
    """One issue with its own severity, as tool and rule critics report them."""

    message: str
    severity: Severity = "major"
    source: str = "llm"


class CritiqueOutput(BaseModel):
    """Judge the candidate. This is the schema a critic model fills in."""

    issues: list[str] = Field(default_factory=list, description="Concrete problems found in the candidate.")
    suggestions: list[str] = Field(default_factory=list, description="Concrete changes that would fix them.")
    is_acceptable: bool = Field(description="True when the candidate fully meets the task.")
    score: float = Field(ge=0, le=10, description="Quality from 0 (useless) to 10 (perfect).")
    feedback: str = Field(default="", description="A short overall judgement for the writer.")


class Critique(CritiqueOutput):
    """A critic's verdict on one candidate.

    `severity` is derived: the worst finding's severity when there are findings, otherwise from the verdict and
    score (`none` when accepted without issues, `minor` for score >= 7, `major` for >= 4, else `critical`).
    """

    findings: list[Finding] = Field(default_factory=list, description="Issues with their own severity.")
    parsed: bool = Field(
        default=True, description="False when the reply could not be parsed (raw text kept)."
    )
    verdict_source: Literal["outside", "in-process"] | None = Field(
        default=None,
        description=(
            "Tests only: `outside` when the verdict was decided in a process that never ran the candidate's code, "
            "`in-process` when the tests ran in the candidate's own process (where its code could forge it)."
        ),
    )
    checks_passed: int | None = Field(
        default=None,
        ge=0,
        description="A verifier's count of passed checks (tests, rules); None for a judge.",
    )
    checks_total: int | None = Field(
        default=None, ge=0, description="A verifier's count of checks run; None for a judge."
    )
    named_by: list[str] = Field(
        default_factory=list,
        description=(
            "Which critic named each issue, parallel to `issues` (`judge`, `rule:placeholder`, `rule:required`, "
            "`rule:script`); empty when the critic does not say."
        ),
    )

    @field_validator("score", mode="before")
    @classmethod
    def _clamp_score(cls, value: Any) -> float:
        score = float(value)
        if not math.isfinite(score):
            raise ValueError(f"score must be a finite number on the 0-10 scale, got {value!r}")
        return min(10.0, max(0.0, score))

    @field_validator("issues", "suggestions", mode="after")
    @classmethod
    def _bound_items(cls, items: list[str]) -> list[str]:
        return _bounded_list(items)

    @field_validator("named_by", mode="after")
    @classmethod
    def _bound_named_by(cls, names: list[str]) -> list[str]:
        return names[:MAX_ITEMS]

    @model_validator(mode="after")
    def _named_by_parallel(self) -> Critique:
        if self.named_by and len(self.named_by) != len(self.issues):
            raise ValueError(
                f"named_by must name one critic per issue: {len(self.named_by)} names for {len(self.issues)} issues"
            )
        return self

    @field_validator("feedback", mode="after")
    @classmethod
    def _bound_feedback(cls, text: str) -> str:
        return _cut(text, MAX_FEEDBACK_CHARS)

    @field_validator("findings", mode="after")
    @classmethod
    def _bound_findings(cls, findings: list[Finding]) -> list[Finding]:
        return findings[:MAX_ITEMS]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def severity(self) -> Severity:
        if self.findings:
            worst = max(self.findings, key=lambda f: _SEVERITY_ORDER[f.severity])
            return worst.severity
        if self.is_acceptable and not self.issues:
            return "none"
        if self.score >= 7:
            return "minor"
        if self.score >= 4:
            return "major"
        return "critical"

    @classmethod
    def from_output(cls, output: CritiqueOutput | dict[str, Any]) -> Critique:
        data = output.model_dump() if isinstance(output, BaseModel) else dict(output)
        return cls.model_validate(data)


# The keys a critic's JSON reply may give each part of a critique under, the usual one first (compared lower-cased,
# with `_` for spaces and dashes).
_KEYS: dict[str, tuple[str, ...]] = {
    part: tuple(keys.split())
    for part, keys in {
        "accept": "is_acceptable acceptable accepted is_good pass passed passes ok approved",
        "reject": "needs_improvement needs_revision should_revise needs_refinement fail failed",
        "score": "score quality_score rating grade quality",
        "feedback": "feedback comments comment critique explanation reasoning summary reflection",
        "issues": "issues problems errors weaknesses flaws mistakes",
        "suggestions": "suggestions improvements recommendations fixes changes",
    }.items()
}


def _first(data: dict[str, Any], part: str) -> tuple[bool, Any]:
    """Whether `data` gives `part` of a critique under one of its `_KEYS`, and the value under the first one."""
    lowered = {str(k).strip().lower().replace(" ", "_").replace("-", "_"): v for k, v in data.items()}
    for key in _KEYS[part]:
        if key in lowered:
            return True, lowered[key]
    return False, None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in {"true", "yes", "y", "pass", "passed", "ok", "accept", "accepted", "1"}:
            return True
        if word in {"false", "no", "n", "fail", "failed", "reject", "rejected", "0"}:
            return False
    return None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(v) if not isinstance(v, dict) else json.dumps(v) for v in value if str(v).strip()]
    return [str(value)]


def _as_score(value: Any, raw: str = "") -> float | None:
    """A 0-10 score; "85/100" and "4/5" are rescaled. Anything else outside 0-10 is an error, never guessed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = re.search(r"(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?", value, re.IGNORECASE)
        if not match:
            return None
        value = float(match.group(1))
        if match.group(2) and float(match.group(2)) > 0:
            value = value * 10 / float(match.group(2))
    if not isinstance(value, (int, float)):
        return None
    score = float(value)
    if not math.isfinite(score) or not 0 <= score <= 10:
        raise CritiqueParseError(
            f"score {value!r} is outside the 0-10 scale; the critic must score from 0 to 10 (or write e.g. '85/100')",
            raw,
        )
    return score


def critique_from_mapping(data: dict[str, Any], raw: str = "") -> Critique:
    """Build a `Critique` from a mapping that may use alias keys.

    Rules: the verdict comes from an accept-style key, or the negation of a reject-style key
    (`needs_improvement`). A missing score is 8 for an accepted verdict and 4 otherwise; a missing verdict is
    `score >= 7`. Neither present raises `CritiqueParseError`.
    """
    has_accept, accept = _first(data, "accept")
    verdict = _as_bool(accept) if has_accept else None
    if verdict is None:
        has_reject, reject = _first(data, "reject")
        rejected = _as_bool(reject) if has_reject else None
        verdict = None if rejected is None else not rejected
    _, score_value = _first(data, "score")
    score = _as_score(score_value, raw)
    if verdict is None and score is None:
        raise CritiqueParseError(
            "critique has neither a verdict (is_acceptable / needs_improvement / pass ...) nor a score "
            f"(score / quality_score ...); keys seen: {sorted(data)}",
            raw,
        )
    if score is None:
        score = 8.0 if verdict else 4.0
    if verdict is None:
        verdict = score >= 7
    _, feedback = _first(data, "feedback")
    _, issues = _first(data, "issues")
    _, suggestions = _first(data, "suggestions")
    return Critique(
        issues=_as_list(issues),
        suggestions=_as_list(suggestions),
        is_acceptable=verdict,
        score=score,
        feedback="" if feedback is None else str(feedback),
    )


def _exact_output(text: str) -> Critique | None:
    """The reply as a `Critique` when it is exactly a valid `CritiqueOutput` JSON object, else None."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        output = CritiqueOutput.model_validate_json(text)
    except ValidationError:
        return None
    return Critique.model_validate(output.__dict__)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The top-level JSON objects of `text`, in order; an object inside another (or inside its strings) is not
    one of them."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index >= 0:
        try:
            value, end = decoder.raw_decode(text, index)
        except (json.JSONDecodeError, RecursionError):  # nested past Python's recursion limit: not read
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return found


def _is_verdict(data: dict[str, Any]) -> bool:
    """True when `data` carries a verdict or a score under any accepted key."""
    return any(_first(data, part)[0] for part in ("accept", "reject", "score"))


def critique_tool_schema() -> dict[str, Any]:
    """`CritiqueOutput` as the tool a critic fills in through function calling, with the score an integer from an
    `enum` of 0-10: servers that turn a tool's schema into a grammar but ignore `minimum`/`maximum` (llama.cpp's
    OpenAI-compatible server) then cannot produce a score off the scale, which the parser would have to refuse."""
    schema = CritiqueOutput.model_json_schema()
    score = {
        key: value
        for key, value in schema["properties"]["score"].items()
        if key not in ("minimum", "maximum", "type")
    }
    schema["properties"] = {
        **schema["properties"],
        "score": {**score, "type": "integer", "enum": list(range(11))},
    }
    return schema


def parse_critique(reply: str | dict[str, Any] | BaseModel) -> Critique:
    """Parse a critic reply (text with a JSON object, a mapping, or a pydantic model) into a `Critique`.

    A reply that is exactly a `CritiqueOutput` JSON object is validated directly (`model_validate_json`). Otherwise
    the tolerant parser reads the critic's own verdict: the *last* top-level JSON object in the text that carries a
    verdict or a score (alias keys accepted). An object quoted earlier (e.g. the candidate's own
    `{"score": 10, "is_acceptable": true}`) or nested inside the verdict is never taken for it.

    Raises:
        CritiqueParseError: no JSON object with a verdict or a score in the text, or a score off the 0-10 scale.
    """
    if isinstance(reply, Critique):
        return reply
    if isinstance(reply, CritiqueOutput):
        return Critique.model_validate(reply.__dict__)
    if isinstance(reply, BaseModel):
        return critique_from_mapping(reply.model_dump())
    if isinstance(reply, dict):
        return critique_from_mapping(reply)
    text = str(reply)
    fast = _exact_output(text)
    if fast is not None:
        return fast
    verdicts = [data for data in _json_objects(text) if _is_verdict(data)]
    if not verdicts:
        snippet = text.strip()[:120] or "<empty reply>"
        if not _json_objects(text):
            raise CritiqueParseError(f"critic reply has no JSON object: {snippet!r}", text)
        return critique_from_mapping(_json_objects(text)[-1], raw=text)  # names the keys it saw
    return critique_from_mapping(verdicts[-1], raw=text)
