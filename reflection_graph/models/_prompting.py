"""Prompt shaping for a completion-style base model: chat messages to one plain-text prompt, and reply cleanup.

A base model continues text; through a chat template it replies with nothing. So the messages are rendered as
plain text (system text, a blank line, the user text), stop sequences cut the rambling that follows an answer,
and a reply cut by `max_tokens` is trimmed back to its last full sentence.
"""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

DEFAULT_STOP: tuple[str, ...] = (
    "\nTask:",
    "\n\n\n",
    "\nDraft:",
    "\nCandidate answer:",
    "\nCritique of the previous answer:",
    "\nRevised answer:",
    "\nJSON verdict:",
    "<end_of_turn>",
    "<start_of_turn>",
)
"""Stop sequences for free text: a base model that has finished an answer tends to start the next prompt."""


def messages_to_prompt(messages: list[BaseMessage]) -> str:
    """Render chat messages as one plain-text prompt for a completion-style model.

    A system message and one user message become `system text`, a blank line, then `user text`. A conversation
    that already holds assistant turns is rendered with `User:` / `Assistant:` labels and ends with
    `Assistant:` so the model continues as the assistant. A lone user message is sent exactly as written (not
    stripped): a completion model continues that very text, e.g. a code stub with the newline after its docstring.
    """
    if len(messages) == 1 and isinstance(messages[0], HumanMessage):
        return messages[0].text
    conversation = any(isinstance(m, (AIMessage, ToolMessage)) for m in messages)
    parts: list[str] = []
    for message in messages:
        text = message.text.strip()
        if isinstance(message, SystemMessage):
            parts.append(text)
        elif isinstance(message, HumanMessage):
            parts.append(f"User: {text}" if conversation else text)
        elif isinstance(message, AIMessage):
            parts.append(f"Assistant: {text}")
        elif isinstance(message, ToolMessage):
            parts.append(f"Tool result: {text}")
        else:
            parts.append(text)
    prompt = "\n\n".join(p for p in parts if p)
    if conversation:
        prompt += "\n\nAssistant:"
    return prompt


_SENTENCE_END = re.compile(r"[.!?)\]\"'`:]\s|\n")


def _clean(text: str, truncated: bool) -> str:
    """Strip a completion: cut stop-token debris, and trim a length-cut reply to its last full sentence."""
    for marker in ("<end_of_turn>", "<start_of_turn>", "<eos>"):
        text = text.split(marker, 1)[0]
    text = text.strip()
    if truncated and text and text[-1] not in ".!?)]\"'`":
        ends = [m.start() + 1 for m in _SENTENCE_END.finditer(text + " ")]
        cut = ends[-1] if ends else 0
        if cut >= len(text) // 2:
            text = text[:cut].rstrip()
    return text.rstrip(" -*#|").rstrip()
