"""The `JudgeCritic`'s written critique: faults written as issue/fix pairs, kept only as whole lines, and each
checked by the judge before anyone reads it.

- **Pairs**: the model writes `{"faults": [{"issue": ..., "fix": ...}]}`, so a fix always belongs to its issue:
  when an issue is dropped, its fix goes with it.
- **Whole lines**: at most `MAX_FAULTS` pairs, each string at most `MAX_LINE_CHARS` characters (the grammar's
  bound; the longest reply, about 265 tokens of English, closes within the embedded model's 320-token budget for
  JSON). A line is kept as far as it runs in whole sentences in the task's script (`_lines.whole_line`); an issue
  left empty drops its pair, a fix left empty leaves the issue without one. A fix that brings in a template
  placeholder the answer does not hold ("Sign it [Your Name].") is dropped.
- **Checked**: each issue left goes back to the judge as a yes/no question about the answer (`FaultCheck`).
- **Attributed**: each fault says which critic named it (`by`): `"judge"` for the model's, `"rule:..."` for a
  rule's (reflection_graph/critics/_rule_faults.py). It is not in the grammar: the model cannot claim a rule's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from reflection_graph._text import introduced_placeholders, scripts, whole_line

__all__ = ["MAX_FAULTS", "MAX_LINE_CHARS", "Fault", "FaultCheck", "WrittenCritique", "usable", "written"]

MAX_FAULTS = 3
"""At most this many faults are written per answer (the grammar's bound on the list)."""
MAX_LINE_CHARS = 160
"""The grammar's bound on each issue and fix: room for a sentence of 25 words; the prompt asks for one sentence."""


class Fault(BaseModel):
    """One fault of an answer and how to fix it."""

    issue: str = Field(
        description="One real fault of the answer, in one whole sentence.",
        json_schema_extra={"maxLength": MAX_LINE_CHARS},
    )
    fix: str = Field(
        default="",
        description="How to fix that fault, in one whole sentence.",
        json_schema_extra={"maxLength": MAX_LINE_CHARS},
    )
    by: SkipJsonSchema[str] = Field(
        default="judge",
        description='Which critic named the fault: "judge" (the model), "rule:placeholder", "rule:required", '
        '"rule:facts", "rule:script", "rule:language", "rule:arithmetic" or "rule:recipient".',
    )


class WrittenCritique(BaseModel):
    """The faults a judge writes down. No score and no verdict: those come from the probabilities."""

    faults: list[Fault] = Field(
        default_factory=list,
        description="The answer's faults, each with its fix (at least one: only a rejected answer is critiqued).",
        json_schema_extra={"minItems": 1, "maxItems": MAX_FAULTS},
    )

    @property
    def issues(self) -> list[str]:
        """The issue of each fault."""
        return [f.issue for f in self.faults]

    @property
    def suggestions(self) -> list[str]:
        """The fix of each fault that has one."""
        return [f.fix for f in self.faults if f.fix]


@dataclass(frozen=True)
class FaultCheck:
    """The judge's reading of one written fault.

    Attributes:
        fault: the fault (whole lines only).
        has: `log P(Yes) - log P(No)` to "does the answer have this fault?" (`confirm="choice"`: the log-odds of
            "the reviewer is right" over "wrong", with "right" as A).
        free: `log P(Yes) - log P(No)` to "is the answer free of this fault?" (None: not asked; `"choice"`: the
            log-odds of "wrong" over "right", with "right" as B, so that `has - free` sums the two orders).
        confirmed: the fault holds: `has > 0` when asked once; `(has - free) / 2 > 0` when asked both ways, a
            judge that says Yes to any question gaining nothing from it.
    """

    fault: Fault
    has: float
    free: float | None

    @property
    def confirmed(self) -> bool:
        return (self.has if self.free is None else (self.has - self.free) / 2) > 0


def usable(critique: WrittenCritique, *, task: str, context: str | None, answer: str) -> list[Fault]:
    """The faults of `critique` as whole lines in the task's script (see the module doc), repeats removed."""
    allowed = scripts(task, context)
    kept: dict[str, Fault] = {}
    for fault in critique.faults[:MAX_FAULTS]:
        issue = whole_line(fault.issue, allowed)
        if not issue or issue.casefold() in kept:
            continue
        fix = whole_line(fault.fix, allowed)
        if fix and introduced_placeholders(fix, task=task, context=context, earlier=(answer,)):
            fix = ""
        kept[issue.casefold()] = Fault(issue=issue, fix=fix)
    return list(kept.values())


UNREAD = "The written critique could not be read, so the answer is not accepted on this round."


def written(reply: Any) -> WrittenCritique | None:
    """The written critique from a structured-output reply (`include_raw`: `{"raw", "parsed", "parsing_error"}`),
    or None when it cannot be read."""
    parsed = reply.get("parsed") if isinstance(reply, Mapping) and "raw" in reply else reply
    if isinstance(reply, Mapping) and reply.get("parsing_error") is not None:
        return None
    try:
        if isinstance(parsed, WrittenCritique):
            return parsed
        if isinstance(parsed, BaseModel):
            return WrittenCritique.model_validate(parsed.model_dump())
        if isinstance(parsed, Mapping):
            return WrittenCritique.model_validate(dict(parsed))
    except ValueError:
        pass
    return None
