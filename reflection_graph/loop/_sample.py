"""One sample slot of the `generate` node: what `generate` does this step (`GeneratePlan`), the attempts a slot
makes by tactic until one makes a new candidate (a revision that returns its input unchanged is none: the slot tries
the strategy's next tactic, within its `1 + retries` attempts), each attempt's call made directly or awaited, and
what the slot sampled (`Sampled`). The node that plans the step and turns the samples into pending candidates is
`_generate`."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reflection_graph._runtime import RoleUsage, acall, call, metering, sampled, sum_usage
from reflection_graph.loop import _rules
from reflection_graph.models import plain_completion
from reflection_graph.settings import Settings
from reflection_graph.state import Job
from reflection_graph.strategies.base import Tactic

__all__ = ["GeneratePlan", "Sampled", "arun_slot", "run_slot", "same_text"]


def _text(message: Any) -> str:
    """A model reply's text (content blocks joined by `BaseMessage.text`), stripped."""
    return (message.text if isinstance(message, BaseMessage) else str(message)).strip()


def _cut(message: Any) -> str | None:
    """Why a reply did not finish, or None: its `finish_reason` when it is one of `_rules.CUT_ISSUES` ("length":
    it ran into its reply limit, as llama.cpp and OpenAI report it; "repetition": the embedded model stopped it in
    a loop)."""
    meta = getattr(message, "response_metadata", None) or {}
    reason = meta.get("finish_reason")
    return reason if isinstance(reason, str) and reason in _rules.CUT_ISSUES else None


def _nonempty(message: Any) -> bool:
    return bool(_text(message))


@dataclass
class GeneratePlan:
    """What `generate` does this step: its job, and the `count` replies to sample for it."""

    job: Job
    iteration: int
    model: BaseChatModel
    messages: list[BaseMessage]
    count: int
    settings: Settings
    first_seed: int
    """The sample index (seed offset) of the first reply: a strategy's later fresh drafts take new seeds."""
    finish: Callable[[str], str]
    prompts: tuple[str, ...]
    """What a candidate must not echo (the task and the system messages; none for code)."""
    last: bool = False
    """The strategy returns this revision without a critique."""
    feedback_used: bool = False
    """A reviewer's words went into this revision (and are cleared once used)."""
    slots: Callable[[str], list[str]] | None = None
    """The template placeholders a candidate introduces (None: not checked, as for code)."""
    previous: str | None = None
    """The candidate a revision revises (None for drafts)."""
    tactics: tuple[Tactic, ...] = ()
    """The tactics a revision slot tries, in order, while each returns `previous` unchanged."""
    fresh: list[BaseMessage] | None = None
    """The messages of a fresh draft told the critique's faults (the `fresh_draft` tactic)."""
    generator: BaseChatModel | None = None
    """The model of a fresh draft (the generator)."""
    rule: Callable[[str], str | None] | None = None
    """A rule's fix of a candidate, or None where no rule applies (the `rule` tactic; not for code)."""
    stub: bool = False
    """The drafts complete a code stub: the greedy one is the plain completion (`models.plain_completion`)."""


def same_text(a: str, b: str) -> bool:
    """`a` and `b` are the same text, whitespace folded (a revision that returns its input)."""
    return a.split() == b.split()


class Sampled(NamedTuple):
    """A sample: its candidate, the reply as `finish` makes it one (None when it failed, or when every tactic
    repeated its input), the usage of its
    calls, its error, why its reply did not finish (`_cut`) or None, the tactic that made it, and the tactics
    that returned their input unchanged before it."""

    text: str | None
    usage: RoleUsage
    error: BaseException | None
    cut: str | None
    tactic: str | None = None
    repeated: tuple[str, ...] = ()


def _limits(settings: Settings, retries: int) -> dict[str, Any]:
    return {"retries": retries, "timeout_s": settings.timeout_s, "ok": _nonempty}


def _attempt(plan: GeneratePlan, tactic: Tactic, index: int) -> tuple[Any, list[BaseMessage]]:
    """The model and messages of one attempt of sample slot `index` by `tactic`."""
    if tactic == "fresh_draft" and plan.fresh is not None and plan.generator is not None:
        return sampled(plan.generator, index, greedy=index == 0), plan.fresh
    if tactic == "sampled_revision":  # a seed no slot's first revision takes, at the sampling temperature
        return sampled(plan.model, plan.count + index + 1), plan.messages
    number = plan.first_seed + index
    model = sampled(plan.model, number, greedy=plan.job == "draft")
    return (plain_completion(model) if plan.stub and number == 0 else model), plan.messages


def _tactics(plan: GeneratePlan, index: int) -> list[Tactic]:
    """What sample slot `index` tries, in order: a draft's one call; for a revision, the strategy's tactics (a
    rule fixes the candidate once, in slot 0; a fresh draft needs its messages)."""
    if plan.job != "revise":
        return ["revise"]
    return [
        t
        for t in plan.tactics
        if not (t == "rule" and (index > 0 or plan.rule is None))
        and not (t == "fresh_draft" and plan.fresh is None)
    ]


def _outcome_of(
    plan: GeneratePlan, tactic: Tactic, text: str | None, repeated: list[str]
) -> tuple[bool, str | None]:
    """Whether an attempt's reply is final (a new candidate, or an error) and the tactic to record for it."""
    if text is None or plan.previous is None:
        return True, (None if plan.job != "revise" else tactic)
    if same_text(text, plan.previous):
        repeated.append(tactic)
        return False, None
    return True, tactic


_Ask = tuple[Any, list[BaseMessage], int]
"""An attempt to make: the model, its messages and the retries it may take."""
_Reply = tuple[str | None, BaseException | None, str | None, RoleUsage]
"""An attempt's outcome: its text (None when it failed), its error, why its reply did not finish, its usage."""


def _slot(plan: GeneratePlan, index: int) -> Generator[_Ask, _Reply, Sampled]:
    """Sample slot `index`: the attempts it asks for (its caller makes each call, directly or awaited) until one
    makes a new candidate, an attempt fails, or the slot's `1 + retries` attempts are spent."""
    left = 1 + plan.settings.retries
    repeated: list[str] = []
    usage: list[RoleUsage] = []
    for tactic in _tactics(plan, index):
        if tactic == "rule":
            fixed = plan.rule(plan.previous) if plan.rule and plan.previous else None
            if fixed and not same_text(fixed, plan.previous or ""):
                return Sampled(fixed, sum_usage(usage), None, None, "rule", tuple(repeated))
            continue
        if left <= 0:
            break
        model, messages = _attempt(plan, tactic, index)
        reply, error, cut, part = yield model, messages, left - 1
        text = (
            plan.finish(reply) if reply else reply
        )  # the candidate the reply makes (an empty one is dropped)
        usage.append(part)
        left -= max(1, part["calls"])
        warm = tactic == "revise" and index > 0  # a later slot's first revision is already sampled warmer
        final, made_by = _outcome_of(plan, "sampled_revision" if warm else tactic, text, repeated)
        fixed = _ruled(plan, text, cut, made_by) if final else None
        if fixed is not None:  # the reply kept what the rule fixes: the rule's fix of it is the candidate
            if same_text(fixed, plan.previous or ""):
                repeated.append(str(made_by))  # fixed, it is the candidate it revised: no new one
                continue
            return Sampled(fixed, sum_usage(usage), None, None, f"{made_by}+rule", tuple(repeated))
        if final:
            return Sampled(text, sum_usage(usage), error, cut, made_by, tuple(repeated))
    return Sampled(None, sum_usage(usage), None, None, None, tuple(repeated))


def _ruled(plan: GeneratePlan, text: str | None, cut: str | None, made_by: str | None) -> str | None:
    """The rule's fix of a revision slot's new reply (a placeholder or a bare sign-off the reply kept), or None
    where the strategy has no `rule` tactic, the reply was cut, or no rule applies."""
    if not (text and made_by and cut is None and plan.rule and "rule" in plan.tactics):
        return None
    return plan.rule(text)


def run_slot(plan: GeneratePlan, config: RunnableConfig, index: int) -> Sampled:
    slot = _slot(plan, index)
    try:
        ask = next(slot)
        while True:
            model, messages, retries = ask
            with metering() as meter:
                try:
                    reply = call(model, messages, config, **_limits(plan.settings, retries))
                    done: _Reply = (_text(reply), None, _cut(reply), meter.usage)
                except Exception as exc:
                    done = (None, exc, None, meter.usage)
            ask = slot.send(done)
    except StopIteration as end:
        return end.value


async def arun_slot(plan: GeneratePlan, config: RunnableConfig, index: int) -> Sampled:
    slot = _slot(plan, index)
    try:
        ask = next(slot)
        while True:
            model, messages, retries = ask
            with metering() as meter:
                try:
                    reply = await acall(model, messages, config, **_limits(plan.settings, retries))
                    done: _Reply = (_text(reply), None, _cut(reply), meter.usage)
                except Exception as exc:
                    done = (None, exc, None, meter.usage)
            ask = slot.send(done)
    except StopIteration as end:
        return end.value
