"""What the `focus` setting changes in `generate`: the messages of a draft or a revision, and how a reply becomes
a candidate.

- A first draft by a model prompted through its chat template, with no overridden prompt: the user's task as it
  is (`plain_request`), the very call a user makes without the loop, whatever the focus.
- `focus="code"` with a task that holds a function stub and no overridden prompt for the role: code prompts
  (reflection_graph/loop/_code.py), chat-style for a model prompted through its chat template, else
  completion-style; a reply that continues the stub becomes the full function. A completion-style first draft is
  the plain completion of the stub (`completes_stub`): the stub alone, by the model as a plain completion runs it
  (`models.plain_completion`).
- Any other focus: the named templates of reflection_graph/prompts/ (`focus` picks the targeted revision
  rules), and the reply is kept as it is (an overridden code prompt's reply only gets its fences balanced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from reflection_graph._text import well_formed
from reflection_graph.loop._code import code_messages, find_stub, finish_candidate
from reflection_graph.models.profile import chat_template
from reflection_graph.prompts import (
    CRITIQUE_SYSTEM,
    GENERATE_SYSTEM,
    REVISE_SYSTEM,
    draft_messages,
    fresh_draft_request,
    plain_request,
    revise_messages,
)
from reflection_graph.settings import Settings

__all__ = ["completes_stub", "draft", "echo_sources", "finisher", "fresh_draft", "revision"]


def _code(settings: Settings, role: str) -> bool:
    """Completion-style code prompts: the code focus with the role's default prompt."""
    return settings.focus == "code" and settings.prompts.get(role) is None


def completes_stub(settings: Settings, state: Mapping[str, Any], model: Any) -> bool:
    """Whether `draft` prompts `model` with a code stub to complete (completion-style, no overridden prompt): its
    greedy draft is then the plain completion of the stub, made by `models.plain_completion(model)`."""
    return _code(settings, "generate") and not chat_template(model) and find_stub(state["task"]) is not None


def draft(settings: Settings, state: Mapping[str, Any], lessons: str, model: Any) -> list[BaseMessage]:
    """The messages of a first draft for `model` (`lessons`: recalled from memory, or '')."""
    chat = chat_template(model)
    if settings.prompts.get("generate") is None and chat:
        return [HumanMessage(plain_request(state["task"], state.get("context"), lessons))]
    if _code(settings, "generate"):
        found = code_messages(state["task"], state.get("context"), chat=chat)
        if found is not None:
            return found
    template = settings.prompts.get("generate")
    return draft_messages(
        state["task"], state.get("context"), lessons, focus=settings.focus, template=template
    )


def fresh_draft(
    settings: Settings, state: Mapping[str, Any], critique: Mapping[str, Any], model: Any
) -> list[BaseMessage] | None:
    """The messages of a fresh draft by `model` told the faults `critique` names: the first draft's request with
    the faults after it. None when the critique names none, or for completion-style code prompts (a stub's
    prompt has no place for them)."""
    request = fresh_draft_request(str(state["task"]), critique)
    if request is None or (_code(settings, "generate") and not chat_template(model)):
        return None
    return draft(settings, {**state, "task": request}, "", model)


def revision(
    settings: Settings,
    state: Mapping[str, Any],
    previous: str,
    critique: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    model: Any,
) -> list[BaseMessage]:
    """The messages of a revision of `previous` by `model` that answers `critique` (`history`: earlier rounds)."""
    chat = chat_template(model)
    if _code(settings, "revise"):
        task, context = state["task"], state.get("context")
        found = code_messages(task, context, candidate=previous, critique=critique, chat=chat)
        if found is not None:
            return found
    return revise_messages(
        state["task"],
        state.get("context"),
        previous,
        dict(critique),
        list(history),
        focus=settings.focus,
        preserve_correct=settings.preserve_correct,
        template=settings.prompts.get("revise"),
        chat=chat,
    )


def finisher(settings: Settings, state: Mapping[str, Any], role: str) -> Callable[[str], str]:
    """How a reply becomes a candidate. Code focus: a stub's continuation becomes the full function, and fences
    are balanced (the default prompts open a ```python fence the reply does not repeat); an overridden prompt's
    replies only get their fences balanced. Other focuses keep the reply as it is."""
    if settings.focus != "code":
        return lambda text: text
    if settings.prompts.get(role) is not None:
        return lambda text: well_formed(text) or text
    task = state["task"]
    return lambda text: finish_candidate(task, text) or text


def echo_sources(settings: Settings, state: Mapping[str, Any]) -> tuple[str, ...]:
    """What a candidate must not echo: the task and the system messages (nothing for code, which restates its
    stub by design)."""
    if settings.focus == "code":
        return ()
    return (state["task"], GENERATE_SYSTEM, REVISE_SYSTEM, CRITIQUE_SYSTEM)
