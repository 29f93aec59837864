"""Prompt shaping and reply cleanup: chat messages to one plain-text prompt for a completion-style base model, or to
chat-template messages; the stop sequences each kind of prompt brings.

A base model continues text; through a chat template it replies with nothing. So the messages are rendered as
plain text (system text, a blank line, the user text), stop sequences cut the rambling that follows an answer,
and a reply cut by `max_tokens` is trimmed back to its last full sentence. Through a chat template a prompt that
ends with one of the package's cue lines stops where the model writes that line again (`cue_stop`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reflection_graph.prompts import CUE_LINES

_CUE_STOPS = tuple(f"\n{cue}" for cue in CUE_LINES)
DEFAULT_STOP: tuple[str, ...] = (
    _CUE_STOPS[0],
    "\n\n\n",  # after `\nTask:`: llama-cpp-python cuts a reply at the first listed stop it holds
    *_CUE_STOPS[1:],
    "<end_of_turn>",
    "<start_of_turn>",
)
"""Stop sequences for free text: a base model that has finished an answer tends to start the next prompt (the
package's cue lines, `prompts.CUE_LINES`, each on a new line), or a new turn."""


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
_MARKERS: tuple[str, ...] = ("<end_of_turn>", "<start_of_turn>", "<eos>")
"""Stop-token debris `_clean` cuts a reply at."""
_TRAILING = " -*#|"
"""What `_clean` trims from a reply's end (with whitespace)."""


def _clean(text: str, truncated: bool) -> str:
    """Strip a completion: cut stop-token debris, and trim a length-cut reply to its last full sentence."""
    for marker in _MARKERS:
        text = text.split(marker, 1)[0]
    text = text.strip()
    if truncated and text and text[-1] not in ".!?)]\"'`":
        ends = [m.start() + 1 for m in _SENTENCE_END.finditer(text + " ")]
        cut = ends[-1] if ends else 0
        if cut >= len(text) // 2:
            text = text[:cut].rstrip()
    return text.rstrip(_TRAILING).rstrip()


def _clean_prefix(raw: str, stops: Sequence[str]) -> str:
    """The part of a reply still being written (`raw`, the text so far) that `_clean` keeps whatever follows.

    Streaming's twin of `_clean`: whatever text comes next, whether the call then ends by a stop sequence, its
    end-of-turn token or its reply limit, `_clean` of the whole reply (cut at the first of `stops` and
    `_MARKERS`) starts with this text, so a streamed piece never has to be taken back. It holds back, from the
    end of `raw`:
    - anything from the first place a stop sequence or marker starts (or may start: the end of `raw` is the
      beginning of one);
    - the unfinished sentence (after the last sentence end, `_SENTENCE_END`): a reply cut by its reply limit is
      trimmed back to its last full sentence;
    - trailing whitespace and `_TRAILING` characters, which `_clean` trims from a reply's end.

    Args:
        raw: the reply so far, as llama.cpp generated it.
        stops: the call's stop sequences (and the end-of-turn text a chat reply is cut at).
    """
    end = len(raw)
    for stop in (*stops, *_MARKERS):
        if not stop:
            continue
        found = raw.find(stop)
        if found >= 0:
            end = min(end, found)
            continue
        for size in range(min(len(stop) - 1, len(raw)), 0, -1):
            if raw.endswith(stop[:size]):
                end = min(end, len(raw) - size)
                break
    text = raw[:end].lstrip()
    # a line end counts once text follows it (else `_clean` strips it); a stop after punctuation always counts,
    # also before a held-back space (`_clean` keeps the punctuation whether a stop cuts the reply there or not)
    written = len(text.rstrip())
    spaced = text + raw[end] if text and end < len(raw) and raw[end].isspace() else text
    ends = [
        m.start() + 1 for m in _SENTENCE_END.finditer(spaced) if m.group() != "\n" or m.start() < written - 1
    ]
    keep = ends[-1] if ends else 0
    while keep and (text[keep - 1].isspace() or text[keep - 1] in _TRAILING):
        keep -= 1
    return text[:keep]


_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
_CUE = re.compile(r"\n([A-Z][\w ]{0,40}:)\s*\Z")
_PACKAGE_CUES = frozenset(CUE_LINES)
"""The cue lines of the package's prompts (`Draft:`, `Revised answer:`, `JSON verdict:`, ...)."""


def cue_stop(messages: Sequence[BaseMessage]) -> str:
    """The package's cue line a prompt ends with (`Draft:`, `Revised answer:`), as a stop sequence on a line of
    its own.

    Through a chat template a completion-style prompt of the package (or a user's template built like one) still
    ends with such a cue; an instruction-tuned model that writes it again on a line of its own has finished its
    answer and starts another (a second `Revised answer:`). Only the package's cue lines count, and only that very
    line stops it: a user's own task that happens to end in `Answer:` is sent as a plain call is, with no stop.
    """
    if not messages or messages[-1].type != "human":
        return ""
    found = _CUE.search("\n" + messages[-1].text)
    return f"\n{found.group(1)}\n" if found and found.group(1) in _PACKAGE_CUES else ""


def chat_message(message: BaseMessage) -> dict[str, str]:
    """A LangChain message as a chat-template message (`role`, `content`)."""
    return {"role": _ROLES.get(message.type, "user"), "content": message.text}
