"""The requests built from the named templates (`_templates.py`): a template filled (`render_prompt`), the user's
request as they wrote it, the messages of a first draft and of a revision (completion-style, or a conversation for a
model prompted through its chat template), a critique and earlier rounds as the reviser reads them, and a fresh
draft's request told an earlier answer's faults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from reflection_graph.prompts._templates import (
    CHAT_REVISE_PROMPT,
    FOCUS_CUES,
    FOCUS_PROMPTS,
    FRESH_DRAFT_PROMPT,
    GENERATE_PROMPT,
    GENERATE_SYSTEM,
    PRESERVE_CORRECT_RULE,
    REVISE_PROMPT,
    REVISE_SYSTEM,
    PromptOverride,
)


class _Defaulting(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return ""


def render_prompt(template: PromptOverride, values: Mapping[str, Any]) -> str:
    """Fill a template string (unknown placeholders become empty) or call a template callable."""
    if callable(template):
        return str(template(dict(values)))
    return template.format_map(_Defaulting(values))


HISTORY_CHARS = 600
"""Each earlier round shown to the reviser is cut to this many characters (prompts never grow with rounds)."""


def _context(context: str | None) -> str:
    return f"Context:\n{context}\n" if context else ""


def plain_request(task: str, context: str | None, lessons: str = "") -> str:
    """The user's request as they wrote it: the task, after its context and recalled lessons when there are any.
    A chat model's first draft is this one message (the plain call a user makes without the loop)."""
    return f"{_context(context)}{lessons}{task}"


def draft_messages(
    task: str, context: str | None, lessons: str, *, focus: str, template: PromptOverride | None
) -> list[BaseMessage]:
    """The messages that ask for a first draft (`lessons` come from the Reflexion memory)."""
    values = {"task": task, "context": _context(context), "lessons": lessons}
    prompt = render_prompt(template or GENERATE_PROMPT, values)
    if template is None:
        prompt += FOCUS_CUES.get(focus, "")
    return [SystemMessage(GENERATE_SYSTEM), HumanMessage(prompt)]


def format_critique(critique: Mapping[str, Any]) -> str:
    """A critique as the reviser reads it: score, verdict, issues, suggestions and feedback."""
    score = critique.get("score")
    shown = f"{score:.1f}" if isinstance(score, (int, float)) else score
    lines = [f"Score: {shown}/10. Acceptable: {critique.get('is_acceptable')}."]
    if critique.get("issues"):
        lines.append("Issues:\n" + "\n".join(f"- {i}" for i in critique["issues"]))
    if critique.get("suggestions"):
        lines.append("Suggestions:\n" + "\n".join(f"- {s}" for s in critique["suggestions"]))
    if critique.get("feedback"):
        lines.append(f"Feedback: {critique['feedback']}")
    return "\n".join(lines)


def format_history(rounds: list[Mapping[str, Any]]) -> str:
    """Earlier rounds for the reviser, each cut to `HISTORY_CHARS`."""
    if not rounds:
        return ""
    parts = [
        f"Round {r['iteration']} (score {r['score']}): {r['candidate'][:HISTORY_CHARS]}\n"
        f"Feedback: {((r['critique'] or {}).get('feedback') or '')[:HISTORY_CHARS]}"
        for r in rounds
    ]
    return "Earlier rounds:\n" + "\n".join(parts) + "\n"


def revise_messages(
    task: str,
    context: str | None,
    candidate: str,
    critique: Mapping[str, Any],
    history: list[Mapping[str, Any]],
    *,
    focus: str,
    preserve_correct: bool,
    template: PromptOverride | None,
    chat: bool = False,
) -> list[BaseMessage]:
    """The messages that ask for a revision of `candidate` after `critique` (plus a bounded `history`).

    `chat` (a model prompted through its chat template, with no overridden template): a conversation instead of
    the completion-style worked example, which an instruction-tuned model copies whole (`Task:`, `Previous
    answer:` ...): the task, the previous answer as the model's own reply, then the critique and `CHAT_REVISE_PROMPT`.
    """
    if chat and template is None:
        return _chat_revision(
            task, context, candidate, critique, focus=focus, preserve_correct=preserve_correct
        )
    values = {
        "task": task,
        "context": _context(context),
        "candidate": candidate,
        "critique": format_critique(critique),
        "history": format_history(history),
        "preserve_rule": PRESERVE_CORRECT_RULE + "\n" if preserve_correct else "",
        "focus": FOCUS_PROMPTS[focus] + "\n" if FOCUS_PROMPTS[focus] else "",
    }
    prompt = render_prompt(template or REVISE_PROMPT, values)
    if template is None:
        prompt += FOCUS_CUES.get(focus, "")
    return [SystemMessage(REVISE_SYSTEM), HumanMessage(prompt)]


def _review_points(critique: Mapping[str, Any]) -> str:
    """The critique's issues, suggestions and feedback as lines (no score: a chat model copies it)."""
    lines = [f"- {i}" for i in critique.get("issues") or []]
    lines += [f"- {s}" for s in critique.get("suggestions") or []]
    if critique.get("feedback"):
        lines.append(f"- {critique['feedback']}")
    return "\n".join(dict.fromkeys(lines)) or "- No fault was found; improve the answer where you can."


def _chat_revision(
    task: str,
    context: str | None,
    candidate: str,
    critique: Mapping[str, Any],
    *,
    focus: str,
    preserve_correct: bool,
) -> list[BaseMessage]:
    values = {
        "critique": _review_points(critique),
        "preserve_rule": PRESERVE_CORRECT_RULE + "\n" if preserve_correct else "",
        "focus": FOCUS_PROMPTS[focus] + "\n" if FOCUS_PROMPTS[focus] else "",
    }
    return [
        HumanMessage(plain_request(task, context)),
        AIMessage(candidate),
        HumanMessage(render_prompt(CHAT_REVISE_PROMPT, values)),
    ]


def fresh_draft_request(task: str, critique: Mapping[str, Any]) -> str | None:
    """The task with the faults of `critique` (issues, their fixes, the feedback) as a fresh draft's request, or
    None when the critique names none."""
    lines = [f"- {i}" for i in critique.get("issues") or []]
    lines += [f"- {s}" for s in critique.get("suggestions") or []]
    if not lines:
        return None
    return render_prompt(FRESH_DRAFT_PROMPT, {"request": task, "faults": "\n".join(dict.fromkeys(lines))})
