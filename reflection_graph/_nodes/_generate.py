"""The `generate` node: draft `n_drafts` candidates (or revise into `n_revisions`, or take a given candidate to
glean), for the `critique` node to judge. It writes only `rg_pending`, and `stop_reason` when no critique will
follow (the trigger said no, the round limit is already reached, a model error, a strategy's last revision)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reflection_graph._focus import _messages
from reflection_graph._loop import _rules
from reflection_graph._loop._input import validate_input
from reflection_graph._nodes._step import Step, over_limit
from reflection_graph._runtime._budget import BudgetExhausted, current_budget
from reflection_graph._runtime._calls import acall, call, sampled
from reflection_graph._runtime._usage import RoleUsage, metering, sum_usage
from reflection_graph._text._placeholders import inline_placeholders
from reflection_graph.models import plain_completion
from reflection_graph.settings import Settings
from reflection_graph.state import Job, Pending, Round

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
    stub: bool = False
    """The drafts complete a code stub: the greedy one is the plain completion (`models.plain_completion`)."""

    def model_for(self, index: int) -> Any:
        """The model of sample `index`: seeded by `sampled`, and the greedy first draft of a stub made as a
        plain completion of it."""
        number = self.first_seed + index
        model = sampled(self.model, number, greedy=self.job == "draft")
        return plain_completion(model) if self.stub and number == 0 else model


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
        stub=job == "draft" and _messages.completes_stub(settings, state, model),
    )


def _slots(settings: Settings, state: Mapping[str, Any]) -> Callable[[str], list[str]] | None:
    """The placeholders a candidate holds that the task and its context did not (a candidate with one ranks
    below every candidate without: `_rules.rank`, whether it brought the slot in or kept the one it revised);
    not checked for code."""
    if settings.focus == "code":
        return None
    task, context = str(state.get("task") or ""), state.get("context")
    return lambda text: inline_placeholders(text, task=task, context=context)


_Sampled = tuple[str | None, RoleUsage, BaseException | None, str | None]
"""A sample: its text (None when it failed), the usage of its calls, its error, and why its reply did not finish
(`_cut`), or None."""


def _generated(plan: _Plan, results: Sequence[_Sampled]) -> dict[str, Any]:
    """The state update of `generate` from its samples (text, usage, error): the pending candidates."""
    role = _ROLE[plan.job]
    samples: list[dict[str, Any]] = [
        {"candidate": plan.finish(text), "usage": {role: part}, **({"cut": cut} if cut else {})}
        for text, part, _, cut in results
        if text  # an empty reply was retried by the call layer; one still empty is dropped
    ]
    if not samples:
        usage = {role: sum_usage([part for _, part, _, _ in results])}
        error = next(
            (e for _, _, e, _ in results if e is not None and not isinstance(e, BudgetExhausted)), None
        )
        if error is None and any(isinstance(e, BudgetExhausted) for _, _, e, _ in results):
            return {"stop_reason": "budget", "rg_spent": usage}  # the step's budget says why
        detail = f"{type(error).__name__}: {error}" if error else "every sample was empty"
        return {"stop_reason": "error", "error": f"{role} failed: {detail}", "rg_spent": usage}
    for sample in samples:
        sample["echo"] = _rules.echoes(sample["candidate"], plan.prompts)
        sample["placeholder"] = bool(plan.slots and plan.slots(sample["candidate"]))
    lost = [part for text, part, _, _ in results if not text]  # failed samples' calls count too
    if lost:
        samples[0]["usage"] = {role: sum_usage([samples[0]["usage"][role], *lost])}
    update: dict[str, Any] = {"rg_pending": Pending(iteration=plan.iteration, job=plan.job, samples=samples)}
    if plan.last:
        update["stop_reason"] = "max_iterations"  # the strategy returns this revision without a critique
    if plan.feedback_used:
        update["rg_feedback"] = None
    return update


def _limits(settings: Settings) -> dict[str, Any]:
    return {"retries": settings.retries, "timeout_s": settings.timeout_s, "ok": _nonempty}


def _sample(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
    with metering() as meter:
        try:
            model = plan.model_for(index)
            reply = call(model, plan.messages, config, **_limits(plan.settings))
            return _text(reply), meter.usage, None, _cut(reply)
        except Exception as exc:
            return None, meter.usage, exc, None


async def _asample(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
    with metering() as meter:
        try:
            model = plan.model_for(index)
            reply = await acall(model, plan.messages, config, **_limits(plan.settings))
            return _text(reply), meter.usage, None, _cut(reply)
        except Exception as exc:
            return None, meter.usage, exc, None


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
