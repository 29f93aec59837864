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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reflection_graph._runtime import BudgetExhausted, current_budget, sum_usage
from reflection_graph._text import bare_sign_off, inline_placeholders, rule_revision
from reflection_graph.loop import _messages, _rules
from reflection_graph.loop._input import validate_input
from reflection_graph.loop._sample import GeneratePlan, Sampled, arun_slot, run_slot
from reflection_graph.loop._step import Step, over_limit
from reflection_graph.settings import Settings
from reflection_graph.state import Job, Pending, Round

__all__ = ["agenerate", "generate"]

_ROLE: dict[Job, str] = {"draft": "generate", "revise": "revise", "glean": "generate"}
"""The usage role of each job (drafts are reported under `generate`, as the output schema documents)."""


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


def _start(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | Job:
    """The job of this `generate` step, or the update that stops (or, for a given candidate, gleans) instead."""
    validate_input(state)
    if state.get("stop_reason") is not None:
        return {}
    over = over_limit(step, state)
    if over is not None:
        return over
    if state.get("trajectory"):  # a later round: a revision, or fresh drafts where the strategy draws them
        iteration = int(state.get("iterations") or 0) + 1
        return _trigger(step, state) or ("draft" if step.strategy.drafts_afresh(iteration) else "revise")
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


def _plan(step: Step, state: Mapping[str, Any], job: Job, lessons: Any) -> GeneratePlan:
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
    return GeneratePlan(
        job,
        iteration,
        model,
        messages,
        count,
        settings,
        step.strategy.first_seed(settings, iteration),
        _messages.finisher(settings, state, _ROLE[job]),
        _echo_sources(settings, state, messages if job == "revise" else None, fresh),
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


def _echo_sources(
    settings: Settings,
    state: Mapping[str, Any],
    revision: list[BaseMessage] | None,
    fresh: list[BaseMessage] | None,
) -> tuple[str, ...]:
    """What this step's candidates must not echo: the task and the system messages, and for a revision the review
    it was given (its request, and the fresh draft's request that is told the faults), so a reply that copies the
    review back (it then holds every word the review names) is an echo, never an answer. None for code."""
    sources = _messages.echo_sources(settings, state)
    if not sources:
        return sources
    requests = [str(m[-1].content) for m in (revision, fresh) if m]
    return (*sources, *requests)


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


def _generated(plan: GeneratePlan, results: Sequence[Sampled]) -> dict[str, Any]:
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


def generate(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Draft `n_drafts` (or revise into `n_revisions`) candidates; the critique node judges them."""
    if isinstance(job := _start(step, state), dict):
        return job
    found = step.memory.search(state["task"], store=step.store) if _recalls(step, job) else None
    plan = _plan(step, state, job, found)
    if plan.count == 1:
        return _generated(plan, [run_slot(plan, config, 0)])
    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.count) as pool:  # each sample sees the budget
        runs = [
            pool.submit(contextvars.copy_context().run, run_slot, plan, config, i) for i in range(plan.count)
        ]
        return _generated(plan, [run.result() for run in runs])


async def agenerate(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `generate`: the samples run concurrently."""
    if isinstance(job := _start(step, state), dict):
        return job
    found = await step.memory.asearch(state["task"], store=step.store) if _recalls(step, job) else None
    plan = _plan(step, state, job, found)
    return _generated(plan, await asyncio.gather(*(arun_slot(plan, config, i) for i in range(plan.count))))
