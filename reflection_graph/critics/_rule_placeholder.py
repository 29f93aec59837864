"""The placeholder rule (`by="rule:placeholder"`): a template slot (`[Your Name]`, `<name>`) the task and its
context do not hold, or a letter that ends on a sign-off with no sender, with the placeholder rule's concrete edits
as its fix (reflection_graph/_text/_placeholders.py)."""

from __future__ import annotations

from collections.abc import Sequence

from reflection_graph._text import bare_sign_off, inline_placeholders, placeholder_edits
from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import RULE_PLACEHOLDER

__all__ = ["placeholder_fault", "placeholder_faults", "sign_off_fault"]


def placeholder_fault(slots: Sequence[str], edits: Sequence[str] = ()) -> Fault:
    """The fault the placeholder rule names for `slots` (the template placeholders a candidate holds), with `edits`
    (`placeholder_edits`: each a concrete change that quotes the lines it changes) as its fix."""
    plural = "s" if len(slots) > 1 else ""
    return Fault(
        issue=f"The answer holds the template placeholder{plural} {', '.join(slots)}, which the task did not ask for.",
        fix=" ".join(edits)
        or f"Remove {', '.join(slots)}: write the real text only where the task gives it, else leave that part out.",
        by=RULE_PLACEHOLDER,
    )


def sign_off_fault(line: str, edits: Sequence[str] = ()) -> Fault:
    """The fault the placeholder rule names for a letter that ends on the sign-off `line` with no sender."""
    return Fault(
        issue=f'The letter ends on "{line}" with no sender after it.',
        fix=" ".join(edits)
        or f'Delete the line "{line}" and end the letter on its closing sentence, or sign it with a name the task gives.',
        by=RULE_PLACEHOLDER,
    )


def placeholder_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The placeholder rule's fault of `answer`: a slot that `task` and `context` lack, or a letter that ends on
    a bare sign-off (none when neither)."""
    slots = inline_placeholders(answer, task=task, context=context)
    if slots:
        return [placeholder_fault(slots, placeholder_edits(answer, task=task, context=context))]
    line = bare_sign_off(answer)
    return [sign_off_fault(line, placeholder_edits(answer, task=task, context=context))] if line else []
