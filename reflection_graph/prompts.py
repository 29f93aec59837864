"""Named prompt templates, one per role. Fill them inside the node; override any of them per role.

Every template ends with a cue line ("Draft:", "JSON verdict:", "Revised answer:"). Instruction-tuned chat
models ignore it, and small *base* models (the embedded Gemma 3 270M) need it to start writing on topic.

Placeholders:
- GENERATE_PROMPT: {task}, {context}, {lessons}
- CRITIQUE_PROMPT: {task}, {context}, {candidate}, {threshold_rule}, {guidelines}
- JUDGE_PROMPT (the `LogprobCritic`'s few-shot yes/no question): {examples}, {task}, {context}, {candidate}
- REVISE_PROMPT: {task}, {context}, {candidate}, {critique}, {history}, {preserve_rule}, {focus}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

__all__ = [
    "CRITIQUE_PROMPT",
    "CRITIQUE_SYSTEM",
    "FOCUS_CUES",
    "FOCUS_PROMPTS",
    "GENERATE_PROMPT",
    "GENERATE_SYSTEM",
    "JUDGE_EXAMPLES",
    "JUDGE_PROMPT",
    "PRESERVE_CORRECT_RULE",
    "REVISE_PROMPT",
    "REVISE_SYSTEM",
    "THRESHOLD_RULE",
    "PromptOverride",
    "draft_messages",
    "format_critique",
    "render_prompt",
    "revise_messages",
]

PromptOverride = str | Callable[[Mapping[str, Any]], str]
"""A prompt override: a template string with the placeholders above, or a callable that gets them as a dict."""

GENERATE_SYSTEM = "You are a careful writer. Produce exactly what the task asks for, nothing else."

GENERATE_PROMPT = """Task: {task}
{context}{lessons}
Write the complete answer to the task below this line.

Draft:
"""

CRITIQUE_SYSTEM = (
    "You are a strict reviewer. You judge a candidate answer against its task and reply with JSON only, "
    'with the keys "issues", "suggestions", "is_acceptable", "score" and "feedback".'
)

THRESHOLD_RULE = "A candidate is acceptable only if it deserves a score of at least {threshold} out of 10."

CRITIQUE_PROMPT = """Task: {task}
{context}
Candidate answer:
{candidate}

Review the candidate. List concrete issues and concrete suggestions. Score it from 0 to 10.
{threshold_rule}{guidelines}
JSON verdict:
"""

JUDGE_EXAMPLES = """Task: What is 2 + 3?
Answer: 2 + 3 = 5.
Correct: Yes

Task: Name a primary colour.
Answer: A bicycle has two wheels.
Correct: No
Problem: The answer is off topic; it should name a colour such as red.

Task: Write a short, friendly greeting for a neighbour.
Answer: Good morning! I hope you have a lovely day.
Correct: Yes

Task: What is the capital of Italy?
Answer: The capital of Italy is Madrid.
Correct: No
Problem: Madrid is the capital of Spain; the capital of Italy is Rome.

Task: Write a Python function double(x) that returns x times two.
Answer: def double(x):
    return x * 2
Correct: Yes

Task: Write a polite note asking a colleague to review a document.
Answer: Read my document now, I don't have all day.
Correct: No
Problem: The note is rude; it should ask politely and thank the colleague.
"""
"""Few-shot examples of the `LogprobCritic`: a verdict line after each answer, and a problem line after a No."""

JUDGE_PROMPT = """{examples}
Task: {task}
{context}Answer: {candidate}
Correct:"""
"""The `LogprobCritic` reads the next-token probabilities of " Yes" and " No" after this prompt."""

REVISE_SYSTEM = "You are a careful writer who improves a draft using a reviewer's critique."

PRESERVE_CORRECT_RULE = (
    "Keep every part of the previous answer that the critique did not object to unchanged."
)

FOCUS_PROMPTS: dict[str, str] = {
    "general": "",
    "code": (
        "Return only the complete corrected code. Fix the failing tests and reported errors first; "
        "do not change function names or signatures the tests rely on."
    ),
    "reasoning": (
        "Re-check each reasoning step the critique questions, fix the wrong step and everything that "
        "depends on it, and state the final answer clearly at the end."
    ),
    "format": (
        "Fix the format problems exactly as reported (structure, required fields, length) "
        "without changing the content that is already right."
    ),
}

FOCUS_CUES: dict[str, str] = {"code": "```python\n"}
"""Appended after the cue line of the default draft and revise prompts: small base models write prose for code
tasks unless the prompt already opens a code fence (instruction-tuned models simply continue the fence)."""

REVISE_PROMPT = """Task: {task}
{context}
Previous answer:
{candidate}

Critique of the previous answer:
{critique}
{history}
Rewrite the answer so that it fixes every issue in the critique. {preserve_rule}
{focus}
Revised answer:
"""


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
    lines = [f"Score: {critique.get('score')}/10. Acceptable: {critique.get('is_acceptable')}."]
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
    return "\nEarlier rounds:\n" + "\n".join(parts) + "\n"


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
) -> list[BaseMessage]:
    """The messages that ask for a revision of `candidate` after `critique` (plus a bounded `history`)."""
    values = {
        "task": task,
        "context": _context(context),
        "candidate": candidate,
        "critique": format_critique(critique),
        "history": format_history(history),
        "preserve_rule": PRESERVE_CORRECT_RULE if preserve_correct else "",
        "focus": FOCUS_PROMPTS[focus],
    }
    prompt = render_prompt(template or REVISE_PROMPT, values)
    if template is None:
        prompt += FOCUS_CUES.get(focus, "")
    return [SystemMessage(REVISE_SYSTEM), HumanMessage(prompt)]
