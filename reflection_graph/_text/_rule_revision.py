"""The placeholder rule as a reviser: a candidate with a template placeholder the task did not ask for, fixed by
rule, for the critic to judge like any other revision (the loop's `rule` tactic).

- A greeting that is nothing but a placeholder ("Dear [Recruiter's Name],") is addressed to the role it names
  ("Dear Recruiter,"), or "Dear Hiring Manager," when it names none (`with_salutations_named`).
- A line that holds nothing but placeholders ("[Your Name]", "[Your Position], [Company]") is left out
  (`without_placeholder_lines`); a sign-off a letter then ends on ("Sincerely,", `bare_sign_off`) goes with it,
  so a letter ends on its own closing sentence, never on a bare sign-off with no sender.

Nothing here runs after the loop: a rule's candidate reaches the answer only when the critic judged it the best.
Code, and a task that asks for a template, are never rewritten.
"""

from __future__ import annotations

import difflib
import re

from reflection_graph._text._placeholders import (
    asks_for_template,
    inline_placeholders,
    introduced_placeholders,
    with_salutations_named,
    without_placeholder_lines,
)

__all__ = ["SIGN_OFF", "bare_sign_off", "placeholder_edits", "rule_revision"]

SIGN_OFF = re.compile(
    r"^\s*(sincerely( yours)?|yours (sincerely|truly|faithfully)|best|best regards|best wishes|kind regards|"
    r"regards|warm regards|warmest regards|warmly|cheers|all the best|thanks|many thanks|thank you|"
    r"with gratitude|respectfully( yours)?)\s*[,.!]?\s*$",
    re.I,
)
"""A line that is nothing but a letter's sign-off."""


_GREETING = re.compile(r"^[^\S\n]*(dear|hi|hello|greetings|good (morning|afternoon|evening))\b", re.I | re.M)
"""A letter's greeting line: a text without one is no letter, and its last line is never a sign-off."""


def bare_sign_off(text: str) -> str | None:
    """The sign-off line a letter (a text that opens a line with a greeting) ends on with no sender after it
    ("Sincerely,"), or None: a sender the letter leaves unnamed, as a template placeholder would."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines or SIGN_OFF.match(lines[-1]) is None or _GREETING.search(text) is None:
        return None
    return lines[-1].strip()


def rule_revision(answer: str, *, task: str, context: str | None = None) -> str | None:
    """`answer` with its placeholders the task did not ask for fixed by rule (see the module doc), or None when
    no rule applies (no such placeholder, code, or a task asking for a template)."""
    if asks_for_template(task, context):
        return None
    fixed = answer
    if inline_placeholders(answer, task=task, context=context):
        fixed = with_salutations_named(answer, task=task, context=context)
        fixed = without_placeholder_lines(fixed, task=task, context=context)
    if bare_sign_off(fixed) is not None:
        lines = fixed.rstrip().splitlines()
        fixed = "\n".join(lines[:-1]).rstrip()
    return fixed if fixed and fixed != answer else None


def _quoted(lines: list[str]) -> str:
    return ", ".join(f'"{line.strip()}"' for line in lines if line.strip())


def placeholder_edits(answer: str, *, task: str, context: str | None = None) -> list[str]:
    """The placeholder faults of `answer` (a bare sign-off among them) as concrete edits a reviser can apply, each
    quoting the lines of the answer it changes: the rule's own fix line by line ('Replace the line "Dear [Name]," with "Dear Hiring
    Manager,".'), then each placeholder no rule fixes, with the line it sits in."""
    if not inline_placeholders(answer, task=task, context=context) and bare_sign_off(answer) is None:
        return []
    fixed = rule_revision(answer, task=task, context=context) or answer
    old, new = answer.splitlines(), fixed.splitlines()
    edits: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        gone, came = (
            [line for line in old[i1:i2] if line.strip()],
            [line for line in new[j1:j2] if line.strip()],
        )
        if op == "replace" and len(gone) == len(came):
            edits += [
                f'Replace the line "{a.strip()}" with "{b.strip()}".' for a, b in zip(gone, came, strict=True)
            ]
        elif op in ("replace", "delete") and gone:
            ending = " and end the answer on the sentence before them" if i2 >= len(old) - 1 else ""
            edits.append(f"Delete the line{'s' if len(gone) > 1 else ''} {_quoted(gone)}{ending}.")
    for slot in introduced_placeholders(fixed, task=task, context=context):
        line = next((line.strip() for line in new if slot in line), slot)
        edits.append(
            f'Replace {slot} in "{line}" with the real words the task gives, or reword it without {slot}.'
        )
    return edits
