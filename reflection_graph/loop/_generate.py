"""The `generate` node: draft `n_drafts` candidates (or revise into `n_revisions`, or take a given candidate to
glean), for the `critique` node to judge. It writes only `rg_pending`, and `stop_reason` when no critique will
follow (the trigger said no, the round limit is already reached, a model error, a strategy's last revision, or
every tactic returned its input unchanged).

No round repeats itself: a revision whose text equals the candidate it revises (whitespace folded) is no new
candidate. It is not judged and not counted as a round; the same sample slot tries the strategy's next tactic
(`Strategy.tactics`: a rule's fix, a warmer revision with a seed of its own, a fresh draft told the critique's
faults), within the slot's `1 + retries` attempts that `max_model_calls` already counts. Each candidate carries
the tactic that made it (`tactic`) and the tactics that repeated their input before it (`repeated`). A new reply
that keeps what the `rule` tactic fixes (a placeholder, a bare sign-off) is proposed with the rule's fix applied
(`tactic` "revise+rule", say): the critic judges that candidate, never a rewrite after the loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reflection_graph._runtime import (
    BudgetExhausted,
    RoleUsage,
    acall,
    call,
    current_budget,
    metering,
    sampled,
    sum_usage,
)
from reflection_graph._text import bare_sign_off, inline_placeholders, rule_revision
from reflection_graph.loop import _messages, _rules
from reflection_graph.loop._input import validate_input
from reflection_graph.loop._step import Step, over_limit
from reflection_graph.models import plain_completion
from reflection_graph.settings import Settings
from reflection_graph.state import Job, Pending, Round
from reflection_graph.strategies.base import Tactic

__all__ = ["agenerate", "generate"]

_ROLE: dict[Job, str] = {"draft": "generate", "revise": "revise", "glean": "generate"}
"""The usage role of each job (drafts are reported under `generate`, as the output schema documents)."""


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


def _trigger(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """`should_refine` before a round: False stops with `not_triggered`, an exception with `error`."""
    if step.should_refine is None:
        return None
    rounds = state.get("trajectory") or []
    if rounds:  # the predicate sees the latest round as `candidate` and `critique`
        state = {**state, "candidate": rounds[-1]["candidate"], "critique": rounds[-1]["critique"]}
    try:
        go = step.should_refine(state)
    except Exception as exc:  # reported, never skipped
        return {
            "stop_reason": "error",
            "error": f"should_refine raised {type(exc).__name__}: {exc}. Fix the predicate; it gets the state.",
        }
    return None if go else {"stop_reason": "not_triggered"}


@dataclass
class _Plan:
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


def _start(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | Job:
    """The job of this `generate` step, or the update that stops (or, for a given candidate, gleans) instead."""
    validate_input(state)
    if state.get("stop_reason") is not None:
        return {}
    over = over_limit(step, state)
    if over is not None:
        return over
    if state.get("trajectory"):  # a later round: a revision, or fresh drafts where the strategy draws them
        return _trigger(step, state) or ("draft" if step.strategy.fresh_drafts else "revise")
    if state.get("candidate"):
        stop = _trigger(step, state)
        if stop is not None:
            return stop
        sample = {"candidate": state["candidate"], "usage": {}, "echo": False}
        return {"rg_pending": Pending(iteration=1, job="glean", samples=[sample])}
    return "draft"


def _recalls(step: Step, job: Job) -> bool:
    """A draft reads the lessons of earlier similar tasks when memory is on."""
    return job == "draft" and step.memory is not None


def _plan(step: Step, state: Mapping[str, Any], job: Job, lessons: Any) -> _Plan:
    """The messages, model and sample count of this `generate` step (`lessons`: what memory recalled)."""
    settings, roles = step.settings, step.roles
    iteration = int(state.get("iterations") or 0) + 1
    previous: str | None = None
    fresh: list[BaseMessage] | None = None
    if job == "draft":
        text = str(step.memory.format_lessons(lessons)) if lessons else ""
        messages = _messages.draft(settings, state, text, roles.generator)
        model, count = roles.generator, settings.n_drafts if iteration == 1 else settings.n_revisions
    else:
        previous, critique = step.strategy.revise_from(state)
        if state.get("rg_feedback"):
            critique["feedback"] = f"{critique.get('feedback', '')}\nReviewer: {state['rg_feedback']}".strip()
        rounds: list[Round] = list(state.get("trajectory") or [])
        history = _rules.bounded(rounds[:-1], settings.history_window)
        messages = _messages.revision(settings, state, previous, critique, history, roles.reviser)
        model, count = roles.reviser, settings.n_revisions
        fresh = _messages.fresh_draft(settings, state, critique, roles.generator)
    assert model is not None
    budget = current_budget()
    if (
        budget is not None
    ):  # samples the token budget cannot cover are not started; they leave half for critiques
        count = budget.affordable(model, messages, count)
        budget.split(2 * count)
    return _Plan(
        job,
        iteration,
        model,
        messages,
        count,
        settings,
        step.strategy.first_seed(settings, iteration),
        _messages.finisher(settings, state, _ROLE[job]),
        _messages.echo_sources(settings, state),
        last=job == "revise" and step.strategy.last_revision(settings, iteration),
        feedback_used=job == "revise" and bool(state.get("rg_feedback")),
        slots=_slots(settings, state),
        previous=previous,
        tactics=step.strategy.tactics if job == "revise" else (),
        fresh=fresh,
        generator=roles.generator,
        rule=_rule(settings, state),
        stub=job == "draft" and _messages.completes_stub(settings, state, model),
    )


def _slots(settings: Settings, state: Mapping[str, Any]) -> Callable[[str], list[str]] | None:
    """The placeholders a candidate holds that the task and its context did not, and the sign-off a letter ends
    on with no sender (a candidate with one ranks below every candidate without: `_rules.rank`, whether it
    brought the slot in or kept the one it revised); not checked for code."""
    if settings.focus == "code":
        return None
    task, context = str(state.get("task") or ""), state.get("context")
    return lambda text: (
        inline_placeholders(text, task=task, context=context)
        + ([line] if (line := bare_sign_off(text)) else [])
    )


def _rule(settings: Settings, state: Mapping[str, Any]) -> Callable[[str], str | None] | None:
    """The `rule` tactic's fix of a candidate (a placeholder the task did not ask for, written out or left out);
    none for code."""
    if settings.focus == "code":
        return None
    task, context = str(state.get("task") or ""), state.get("context")
    return lambda text: rule_revision(text, task=task, context=context)


def same_text(a: str, b: str) -> bool:
    """`a` and `b` are the same text, whitespace folded (a revision that returns its input)."""
    return a.split() == b.split()


class _Sampled(NamedTuple):
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


def _generated(plan: _Plan, results: Sequence[_Sampled]) -> dict[str, Any]:
    """The state update of `generate` from its samples (text, usage, error): the pending candidates."""
    role = _ROLE[plan.job]
    samples: list[dict[str, Any]] = [
        {
            "candidate": text,
            "usage": {role: r.usage},
            **({"cut": r.cut} if r.cut else {}),
            **({"tactic": r.tactic} if r.tactic else {}),
            **({"repeated": list(r.repeated)} if r.repeated else {}),
        }
        for r in results
        if (text := r.text)  # an empty reply was retried by the call layer; one still empty is dropped
    ]
    if not samples:
        usage = {role: sum_usage([r.usage for r in results])}
        errors = [r.error for r in results]
        error = next((e for e in errors if e is not None and not isinstance(e, BudgetExhausted)), None)
        if error is None and any(isinstance(e, BudgetExhausted) for e in errors):
            return {"stop_reason": "budget", "rg_spent": usage}  # the step's budget says why
        if error is None and all(r.repeated for r in results):
            return {"stop_reason": "plateau", "rg_spent": usage}  # no tactic made a new candidate
        detail = f"{type(error).__name__}: {error}" if error else "every sample was empty"
        return {"stop_reason": "error", "error": f"{role} failed: {detail}", "rg_spent": usage}
    for sample in samples:
        sample["echo"] = _rules.echoes(sample["candidate"], plan.prompts)
        sample["placeholder"] = bool(plan.slots and plan.slots(sample["candidate"]))
    lost = [r.usage for r in results if not r.text]  # failed samples' calls count too
    if lost:
        samples[0]["usage"] = {role: sum_usage([samples[0]["usage"][role], *lost])}
    update: dict[str, Any] = {"rg_pending": Pending(iteration=plan.iteration, job=plan.job, samples=samples)}
    if plan.last:
        update["stop_reason"] = "max_iterations"  # the strategy returns this revision without a critique
    if plan.feedback_used:
        update["rg_feedback"] = None
    return update


def _limits(settings: Settings, retries: int) -> dict[str, Any]:
    return {"retries": retries, "timeout_s": settings.timeout_s, "ok": _nonempty}


def _attempt(plan: _Plan, tactic: Tactic, index: int) -> tuple[Any, list[BaseMessage]]:
    """The model and messages of one attempt of sample slot `index` by `tactic`."""
    if tactic == "fresh_draft" and plan.fresh is not None and plan.generator is not None:
        return sampled(plan.generator, index, greedy=index == 0), plan.fresh
    if tactic == "sampled_revision":  # a seed no slot's first revision takes, at the sampling temperature
        return sampled(plan.model, plan.count + index + 1), plan.messages
    number = plan.first_seed + index
    model = sampled(plan.model, number, greedy=plan.job == "draft")
    return (plain_completion(model) if plan.stub and number == 0 else model), plan.messages


def _tactics(plan: _Plan, index: int) -> list[Tactic]:
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
    plan: _Plan, tactic: Tactic, text: str | None, repeated: list[str]
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


def _slot(plan: _Plan, index: int) -> Generator[_Ask, _Reply, _Sampled]:
    """Sample slot `index`: the attempts it asks for (its caller makes each call, directly or awaited) until one
    makes a new candidate, an attempt fails, or the slot's `1 + retries` attempts are spent."""
    left = 1 + plan.settings.retries
    repeated: list[str] = []
    usage: list[RoleUsage] = []
    for tactic in _tactics(plan, index):
        if tactic == "rule":
            fixed = plan.rule(plan.previous) if plan.rule and plan.previous else None
            if fixed and not same_text(fixed, plan.previous or ""):
                return _Sampled(fixed, sum_usage(usage), None, None, "rule", tuple(repeated))
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
            return _Sampled(fixed, sum_usage(usage), None, None, f"{made_by}+rule", tuple(repeated))
        if final:
            return _Sampled(text, sum_usage(usage), error, cut, made_by, tuple(repeated))
    return _Sampled(None, sum_usage(usage), None, None, None, tuple(repeated))


def _ruled(plan: _Plan, text: str | None, cut: str | None, made_by: str | None) -> str | None:
    """The rule's fix of a revision slot's new reply (a placeholder or a bare sign-off the reply kept), or None
    where the strategy has no `rule` tactic, the reply was cut, or no rule applies."""
    if not (text and made_by and cut is None and plan.rule and "rule" in plan.tactics):
        return None
    return plan.rule(text)


def _sample(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
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


async def _asample(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
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


def generate(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Draft `n_drafts` (or revise into `n_revisions`) candidates; the critique node judges them."""
    if isinstance(job := _start(step, state), dict):
        return job
    found = step.memory.search(state["task"], store=step.store) if _recalls(step, job) else None
    plan = _plan(step, state, job, found)
    if plan.count == 1:
        return _generated(plan, [_sample(plan, config, 0)])
    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.count) as pool:  # each sample sees the budget
        runs = [
            pool.submit(contextvars.copy_context().run, _sample, plan, config, i) for i in range(plan.count)
        ]
        return _generated(plan, [run.result() for run in runs])


async def agenerate(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `generate`: the samples run concurrently."""
    if isinstance(job := _start(step, state), dict):
        return job
    found = await step.memory.asearch(state["task"], store=step.store) if _recalls(step, job) else None
    plan = _plan(step, state, job, found)
    return _generated(plan, await asyncio.gather(*(_asample(plan, config, i) for i in range(plan.count))))
