"""A judge for instruction-tuned models: its token probabilities decide, its written critique explains.

Asked for a 0-10 JSON score, a small instruction-tuned model such as the embedded Qwen2.5-Coder-1.5B-Instruct
grades bad answers high and, asked "A or B?" for a letter, favours a position. Read from its next-token
probabilities instead, the same model ranks answers well (docs/benchmarks.md gives the measured figures).
`JudgeCritic` reads two things, with no constant fitted to data:

- **preference**, when the request shows an earlier candidate: "Which answer does the task better, A or B?",
  asked with the candidate as A and then as B. In each order the log-odds of the candidate's letter; a judge that
  favours a position adds to one order what it takes from the other, so their sum is free of it.
  `p_better = sigmoid(sum / 2)`, the candidate's chance of being the better answer.
- **verdict**: "Is this answer correct, and does it do what the task asks?", `p_yes = P(Yes) / (P(Yes) + P(No))`.
  It ranks, but its level says little: this model says Yes to most bad answers too.

So this judge compares; it does not grade alone. Score: `10 * p_yes` for a candidate with nothing earlier to
compare with; otherwise the earlier candidate's score moved by the preference, towards 10 by `2p - 1` of the way
when `p_better > 1/2`, towards 0 when below (`moved_score`), so selection keeps the candidate the judge prefers.
**Accepted** only after a comparison, and only on evidence: when the candidate wins in *both* orders (its letter
more likely than the other's with it as A and with it as B) and `p_yes > 1/2`. When the orders split (the judge
picked the same position both times, so their sum says little: a candidate built to make the judge answer by
position alone, or an unchanged revision, gets `p_better` ~ 1/2), the comparison is a **tie**, and a tie is not a
win: the candidate is then accepted only when its own verdict beats the earlier candidate's (`p_yes` above the
earlier one's, read with one more call) and `p_yes > 1/2`. A first candidate is never accepted, so the loop
always tries one revision. Each bar is where the model's own two readings are even, so nothing is fitted. With
`score_threshold` set, the score decides as everywhere.

A candidate that holds a **template placeholder** (`[Your Name]`, `[Company]`, `<name>`, `{name}`), inline or
alone on its line, that neither the task nor its context holds is never accepted, and its critique names the
placeholder with concrete edits that quote the lines they change (`placeholder_edits`),
whether the candidate brought it in or kept the earlier candidate's; one it brought in is also judged worse than
the earlier one (its `p_better` is taken as `min(p, 1 - p)`). Selection ranks it below every candidate without
one (see reflection_graph/_text/_placeholders.py); the loop's `rule` tactic proposes the edited candidate.
A task that asks for a template allows them.

Beside the model, **rules** name faults that are real by construction (reflection_graph/critics/_rule_faults.py):
the placeholder above, a requirement the task states in a form a rule can check and the answer misses (a subject
line, a signature, a word, bullet, paragraph or sentence count, quoted words to include or end with, lowercase or
capitals only, no commas), a weekday, date, time or amount the task gives said otherwise, a list shorter or
longer than the answer announces, and an answer mostly in a script that is neither the task's nor that of a language it
names. A rejected candidate's critique shows them whatever the verdict says, after the judge's confirmed faults,
each fix a concrete edit that quotes the text concerned; `Critique.named_by` says which critic named each issue
(`judge`, `rule:placeholder`, `rule:required`, `rule:facts`, `rule:script`). They never decide acceptance, except the placeholder.

Only a rejected candidate gets a **written critique**, and by default (`write="when_wrong"`) only one whose
verdict says it is wrong (P(Yes) <= 1/2): on the project's critique set (bench/bench_critique.py) Qwen's written
critique named a fault for every good answer, and no check below kept the real faults without some invented ones;
a candidate judged right but not better gets the plain "no fault confirmed" note. The model at temperature 0
writes faults as issue/fix pairs in JSON through its grammar (reflection_graph/critics/_faults.py). Asked for
faults, this model lists one for nearly every answer, right or wrong, so no written fault reaches a person or the
reviser unchecked:
- each line is kept as far as it runs in whole sentences in the task's script (a line cut mid-sentence, or
  drifting into another script, loses the broken part, or all of it);
- each issue left is put back to the judge: "Does this answer have this fault: ...? Yes or No", and with
  `confirm="both"` (the default) also "Is this answer free of this fault: ...?". A fault is kept when the
  mean log-odds `(has - free) / 2` is above 0 (with `confirm="yes"`, when P(Yes) > P(No) to the first
  question): a judge that says Yes to any question gains nothing. With `confirm="choice"` the judge instead
  chooses between "the reviewer is right" and "the reviewer is wrong", each in place A in turn, and a fault is
  kept when the mean log-odds of "right" over both orders is above 0 (a judge that picks a position gains
  nothing). An unconfirmed issue is dropped with its fix.
When no fault is confirmed the critique says so, and the reviser is asked to improve the answer against the task.
The written critique never scores and never accepts.

Calls per candidate: 1 (the verdict) for a first candidate, 3 (the verdict, both orders) for a later one, plus 1
when a comparison ties and the candidate's P(Yes) is above 1/2 (the earlier candidate's verdict); for a rejected
candidate 1 more (the written critique, up to 3 grammar passes when a reply does not close) and, per written fault
left after the line checks (at most 3), 2 one-token readings (also with `"choice"`; 1 with `confirm="yes"`, 0 with
`"none"`), each
as long as the verdict's prompt plus the fault.

It needs a model whose replies carry OpenAI-style next-token `logprobs` (the embedded model always does;
`ChatOpenAI` against a server that returns them); a reply without them raises a clear error. It is the default
critic when the generator is the embedded model running an instruction-tuned GGUF through its chat template.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from reflection_graph._text import bare_sign_off, inline_placeholders, placeholder_edits
from reflection_graph.critics._faults import (
    UNREAD,
    Fault,
    FaultCheck,
    WrittenCritique,
    usable,
    written,
)
from reflection_graph.critics._logprob_reading import LogprobReadingCritic, log_odds, next_token_logprobs
from reflection_graph.critics._rule_faults import (
    placeholder_fault,
    placeholder_faults,
    read_faults,
    sign_off_fault,
)
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.pairwise import best_earlier, moved_score
from reflection_graph.critique import Critique
from reflection_graph.models import at_temperature_zero
from reflection_graph.prompts import (
    CHAT_CRITIQUE_PROMPT,
    CHAT_FAULT_CHOICE_PROMPT,
    CHAT_FAULT_PROMPT,
    CHAT_NO_FAULT_PROMPT,
    CHAT_PREFERENCE_PROMPT,
    CHAT_VERDICT_PROMPT,
    FAULT_HELD,
    FAULT_NOT_HELD,
    render_prompt,
)

__all__ = [
    "Confirm",
    "Fault",
    "FaultCheck",
    "JudgeCritic",
    "Judgement",
    "Write",
    "WrittenCritique",
    "log_odds",
    "placeholder_fault",
    "preference",
    "sign_off_fault",
]

Write = Literal[True, False, "when_wrong"]
"""When a rejected candidate gets a written critique: always, never, or only when the judge's verdict says it is
wrong (P(Yes) <= 1/2; a candidate judged right but not better then gets the plain "no fault confirmed" note)."""
Confirm = Literal["both", "choice", "yes", "none"]
"""How a written fault is checked: asked both ways, as a choice in both orders, asked once, or not at all (every
whole line kept)."""

NO_FAULT = "No fault was confirmed in this answer: improve it against the task where you can, and keep what is right."
WORSE = "Judged worse than the best earlier answer; keep what that answer did right."
TIE = "Judged no better than the best earlier answer: the comparison of the two went by their order alone."
WRONG = "Judged likely wrong or off the task; re-check its facts, numbers and what it asks."
FIRST = "Not compared with another answer yet."


@dataclass(frozen=True)
class Judgement:
    """The judge's readings of one candidate (nothing in it is fitted to data).

    Attributes:
        p_yes: `P(Yes) / (P(Yes) + P(No))` to "is this answer correct, and does it do what the task asks?".
        p_better: the chance that the candidate is the better of it and the earlier one (None: no earlier one).
        score: `10 * p_yes`, or the earlier score moved by `p_better` (`moved_score`).
        accepted: after a comparison only: won in both orders, or (a tie) a verdict above the earlier
            candidate's; and `p_yes > 1/2`; never with a placeholder the task did not ask for.
        tie: the two orders split (the judge picked the same position both times): the comparison is no evidence.
        p_yes_earlier: the earlier candidate's `p_yes`, read only to settle a tie (else None).
        placeholders: the template placeholders the candidate holds that the task did not ask for (whether it
            brought them in or kept the earlier answer's; see the module doc).
        edits: the placeholder rule's concrete edits of the candidate (`placeholder_edits`), its fault's fix.
        sign_off: the sign-off a letter ends on with no sender after it (`bare_sign_off`), or None: like a
            placeholder, it keeps the candidate from being accepted and is named as a fault.
    """

    p_yes: float
    p_better: float | None
    score: float
    accepted: bool
    tie: bool = False
    p_yes_earlier: float | None = None
    placeholders: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()
    sign_off: str | None = None


def preference(as_a: float, as_b: float) -> float:
    """The candidate's chance of being the better answer, from the log-odds of its own letter in each order.

    `as_a` is `log P(A) - log P(B)` with the candidate as A; `as_b` is `log P(B) - log P(A)` with it as B. A
    position bias adds the same amount to one and takes it from the other, so their sum is free of it; the mean
    log-odds `(as_a + as_b) / 2` goes through the logistic function.
    """
    mean = (as_a + as_b) / 2
    return 1 / (1 + math.exp(-mean)) if mean >= 0 else math.exp(mean) / (1 + math.exp(mean))


def _sigmoid(x: float) -> float:
    return preference(x, x)  # the logistic function, without overflow


# -- the critique a judgement gives --------------------------------------------------------------------------
def _accepted_critique(judgement: Judgement) -> Critique:
    """An accepted candidate's critique: the judgement's score, and the evidence it won on (both orders, or the
    verdicts after a tie).

    Args:
        judgement: the judge's readings of the candidate, `accepted` among them.
    """
    return Critique(
        is_acceptable=True,
        score=judgement.score,
        feedback=(
            "Judged correct, and more likely right than the best earlier answer (their comparison tied)."
            if judgement.tie
            else "Judged correct, and better than the best earlier answer."
        ),
    )


def _rejected_critique(judgement: Judgement, faults: Sequence[Fault], notes: list[str]) -> Critique:
    """A rejected candidate's critique: the confirmed faults and the rules' (each with the critic that named it,
    `named_by`), the judge's readings that tell against it, and plain notes (feedback only) when nothing is found.

    Args:
        judgement: the judge's readings of the candidate.
        faults: the written faults the judge confirmed, then the rules' faults.
        notes: notes for the feedback so far (such as an unreadable written critique); this list is extended.
    """
    issues = [f.issue for f in faults]
    named_by = [f.by for f in faults]
    suggestions = [f.fix for f in faults if f.fix]
    if judgement.p_better is not None and judgement.p_better < 0.5 and not judgement.tie:
        issues.append(WORSE)
        named_by.append("judge")
    if judgement.p_yes <= 0.5:
        issues.append(WRONG)
        named_by.append("judge")
    if judgement.p_better is None:
        notes.insert(0, FIRST)
    elif judgement.tie and not judgement.placeholders:
        notes.insert(0, TIE)
    if not issues and UNREAD not in notes:
        notes.append(NO_FAULT)
    return Critique(
        issues=issues,
        suggestions=suggestions,
        is_acceptable=False,
        score=judgement.score,
        feedback=" ".join([*issues, *notes]),
        named_by=named_by,
    )


_Ask = tuple[Runnable[Any, Any], list[BaseMessage]]
_Steps = Generator[_Ask, Any, Any]


class JudgeCritic(LogprobReadingCritic):
    """Judge a candidate from an instruction-tuned model's token probabilities, with a checked written critique.

    See the module doc for the readings, the score, the acceptance rule (nothing fitted) and the calls it makes.

    Args:
        model: the judge, a chat model whose replies carry next-token logprobs (the embedded model on an
            instruction-tuned GGUF; `ChatOpenAI` against a server that returns them). It runs at temperature 0.
        write: write a critique (faults and fixes) for a rejected candidate, for the reviser: True always, False
            never, `"when_wrong"` only when the verdict's P(Yes) is at most 1/2 (see `Write`). Acceptance never
            depends on it.
        confirm: how each written fault is checked before it is shown: `"both"` asks the judge whether the answer
            has the fault and whether it is free of it, `"choice"` asks it to choose between "the reviewer is
            right" and "the reviewer is wrong" with each in first place in turn, `"yes"` asks the first question
            only, `"none"` keeps every whole line unchecked.
        top_logprobs: how many next-token alternatives each reading lists (1 to 20).
        max_candidate_chars: the longest answer a prompt shows; a longer one is cut, its head kept.
        retries: how often a transient model error is retried.
        timeout_s: the time limit of one model call in seconds; None for none.
        name: the critic's name in findings.

    Example:
        ```python
        from reflection_graph import create_reflection_graph
        from reflection_graph.critics import JudgeCritic
        from reflection_graph.models import resolve_model

        model = resolve_model("embedded:qwen2.5-coder-1.5b", role="critic")
        graph = create_reflection_graph(model, critic=JudgeCritic(model))
        ```
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        write: Write = "when_wrong",
        confirm: Confirm = "both",
        top_logprobs: int = 20,
        max_candidate_chars: int = 3000,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "judge",
    ) -> None:
        if confirm not in get_args(Confirm):
            raise ValueError(f"confirm must be one of {', '.join(get_args(Confirm))}; got {confirm!r}")
        super().__init__(model, retries=retries, timeout_s=timeout_s, name=name)
        self._reading(top_logprobs, max_candidate_chars)

        self.model = at_temperature_zero(model)
        if write not in get_args(Write):
            raise ValueError(f"write must be True, False or 'when_wrong'; got {write!r}")
        self.write: Write = write
        self.confirm: Confirm = confirm
        self._reader = self._one_token_reader()
        self._writer: Runnable[Any, Any] = self.model.with_structured_output(
            WrittenCritique, include_raw=True
        )

    # -- prompts ---------------------------------------------------------------------------------------------
    def _values(self, request: CritiqueRequest) -> dict[str, str]:
        context = f"Context:\n{request.context.strip()}\n" if request.context else ""
        return {"task": request.task.strip(), "context": context, "candidate": self._cut(request.candidate)}

    def verdict_messages(self, request: CritiqueRequest) -> list[BaseMessage]:
        """The yes/no question about `request.candidate`."""
        return [HumanMessage(render_prompt(CHAT_VERDICT_PROMPT, self._values(request)))]

    def preference_messages(self, request: CritiqueRequest, other: str) -> list[list[BaseMessage]]:
        """The comparison of `request.candidate` with `other`: the candidate as A, then as B."""
        values = self._values(request)
        mine, theirs = values["candidate"], self._cut(other)
        return [
            [HumanMessage(render_prompt(CHAT_PREFERENCE_PROMPT, {**values, "a": mine, "b": theirs}))],
            [HumanMessage(render_prompt(CHAT_PREFERENCE_PROMPT, {**values, "a": theirs, "b": mine}))],
        ]

    def critique_messages(self, request: CritiqueRequest) -> list[BaseMessage]:
        """The request for the written critique: one message that starts as the verdict's does (the task, then
        the answer), so a model that keeps prompt prefixes evaluates them once for both."""
        return [HumanMessage(render_prompt(CHAT_CRITIQUE_PROMPT, self._values(request)))]

    def fault_messages(self, request: CritiqueRequest, fault: Fault) -> list[list[BaseMessage]]:
        """The questions that check one written fault: "does the answer have it?", and with `confirm="both"`
        "is the answer free of it?"."""
        values = {**self._values(request), "fault": fault.issue}
        if self.confirm == "choice":
            orders = ({"a": FAULT_HELD, "b": FAULT_NOT_HELD}, {"a": FAULT_NOT_HELD, "b": FAULT_HELD})
            return [[HumanMessage(render_prompt(CHAT_FAULT_CHOICE_PROMPT, {**values, **o}))] for o in orders]
        templates = (
            (CHAT_FAULT_PROMPT, CHAT_NO_FAULT_PROMPT) if self.confirm == "both" else (CHAT_FAULT_PROMPT,)
        )
        return [[HumanMessage(render_prompt(template, values))] for template in templates]

    # -- readings --------------------------------------------------------------------------------------------
    def _top(self, reply: Any) -> dict[str, float]:
        top = next_token_logprobs(reply)
        if top is None:
            raise ValueError(
                f"JudgeCritic needs next-token logprobs, and {type(self.model).__name__} returned none; use the "
                "embedded model, a server that returns logprobs, or LLMCritic"
            )
        return top

    def _yes(self, reply: Any) -> float:
        return log_odds(self._top(reply), "yes", "no")

    def _judgement_steps(self, request: CritiqueRequest) -> _Steps:
        """The readings of `request.candidate`, one question at a time (see `_run`); returns a `Judgement`."""
        p_yes = _sigmoid(self._yes((yield self._reader, self.verdict_messages(request))))
        placed = inline_placeholders(request.candidate, task=request.task, context=request.context)
        sign_off = bare_sign_off(request.candidate)
        edits = (
            tuple(placeholder_edits(request.candidate, task=request.task, context=request.context))
            if placed or sign_off
            else ()
        )
        reference = best_earlier(request)
        if reference is None:
            return Judgement(
                p_yes, None, 10 * p_yes, False, placeholders=tuple(placed), edits=edits, sign_off=sign_off
            )
        earlier = str(reference["candidate"])
        as_a_question, as_b_question = self.preference_messages(request, earlier)
        as_a = log_odds(self._top((yield self._reader, as_a_question)), "A", "B")
        as_b = log_odds(self._top((yield self._reader, as_b_question)), "B", "A")
        p_better = preference(as_a, as_b)
        if placed and inline_placeholders(  # those of `placed` the earlier answer lacked (the same reading)
            request.candidate, task=request.task, context=request.context, earlier=(earlier,)
        ):
            p_better = min(p_better, 1 - p_better)  # a template slot the earlier answer did not have: worse
        tie = not ((as_a > 0 and as_b > 0) or (as_a < 0 and as_b < 0))
        p_yes_earlier = None
        if tie and p_yes > 0.5 and not placed:  # a tie is no evidence: the verdicts must settle it
            if self._cut(earlier) == self._cut(request.candidate):
                p_yes_earlier = p_yes  # an unchanged answer: the same reading, no call
            else:
                other = CritiqueRequest(task=request.task, candidate=earlier, context=request.context)
                p_yes_earlier = _sigmoid(self._yes((yield self._reader, self.verdict_messages(other))))
        won = (p_yes_earlier is not None and p_yes > p_yes_earlier) if tie else (as_a > 0 and as_b > 0)
        score = moved_score(min(10.0, max(0.0, float(reference.get("score") or 0.0))), p_better)
        accepted = won and p_yes > 0.5 and not placed and sign_off is None
        return Judgement(
            p_yes,
            p_better,
            min(10.0, max(0.0, score)),
            accepted,
            tie,
            p_yes_earlier,
            tuple(placed),
            edits,
            sign_off,
        )

    def _check_steps(self, request: CritiqueRequest, faults: Sequence[Fault]) -> _Steps:
        """Each fault put back to the judge (see `FaultCheck`); returns the list of checks."""
        checks = []
        for fault in faults:
            readings = []
            for index, question in enumerate(self.fault_messages(request, fault)):
                top = self._top((yield self._reader, question))
                if self.confirm != "choice":
                    readings.append(log_odds(top, "yes", "no"))
                else:  # "has" is the held choice's log-odds as A; "free" is the not-held choice's as A
                    readings.append(log_odds(top, "A", "B") if index == 0 else log_odds(top, "B", "A") * -1)
            checks.append(FaultCheck(fault, readings[0], readings[1] if len(readings) > 1 else None))
        return checks

    def _critique_steps(self, request: CritiqueRequest) -> _Steps:
        judgement = cast(Judgement, (yield from self._judgement_steps(request)))
        if judgement.accepted:
            return _accepted_critique(judgement)
        faults: list[Fault] = []
        notes: list[str] = []
        if self.write is True or (self.write == "when_wrong" and judgement.p_yes <= 0.5):
            found = written((yield self._writer, self.critique_messages(request)))
            if found is None:
                notes.append(UNREAD)
            else:
                faults = self.usable_faults(request, found)
                if self.confirm != "none":
                    checks = cast(list[FaultCheck], (yield from self._check_steps(request, faults)))
                    faults = [check.fault for check in checks if check.confirmed]
        return _rejected_critique(judgement, [*faults, *self.rule_faults(request, judgement)], notes)

    def rule_faults(self, request: CritiqueRequest, judgement: Judgement | None = None) -> list[Fault]:
        """The faults the rules name in `request.candidate` (reflection_graph/critics/_rule_faults.py; no call):
        the placeholder rule's (from `judgement` when given), a requirement of the task it misses, a value of the
        task it changes, another script."""
        answer, task, context = request.candidate, request.task, request.context
        placed = (
            placeholder_faults(answer, task=task, context=context)
            if judgement is None
            else [placeholder_fault(judgement.placeholders, judgement.edits)]
            if judgement.placeholders
            else [sign_off_fault(judgement.sign_off, judgement.edits)]
            if judgement.sign_off
            else []
        )
        return [*placed, *read_faults(answer, task=task, context=context)]

    # -- sync and async drivers ------------------------------------------------------------------------------
    def _run(self, steps: _Steps, config: RunnableConfig | None) -> Any:
        """Drive a reading: send each question to the model and its reply back, until the steps return."""
        reply = None
        try:
            while True:
                runnable, messages = steps.send(reply)
                reply = self._call(runnable, messages, config)
        except StopIteration as done:
            return done.value

    async def _arun(self, steps: _Steps, config: RunnableConfig | None) -> Any:
        """Async twin of `_run`."""
        reply = None
        try:
            while True:
                runnable, messages = steps.send(reply)
                reply = await self._acall(runnable, messages, config)
        except StopIteration as done:
            return done.value

    def judge(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Judgement:
        """The probability readings of `request.candidate`: the verdict, the comparison in both orders when
        there is an earlier candidate, and the earlier one's verdict to settle a tie (no written critique)."""
        return cast(Judgement, self._run(self._judgement_steps(request), config))

    async def ajudge(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Judgement:
        """Async twin of `judge`."""
        return cast(Judgement, await self._arun(self._judgement_steps(request), config))

    def p_yes(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> float:
        """The verdict alone: `P(Yes) / (P(Yes) + P(No))` for `request.candidate` (one call)."""
        return _sigmoid(self._yes(self._call(self._reader, self.verdict_messages(request), config)))

    def p_better(self, request: CritiqueRequest, other: str, config: RunnableConfig | None = None) -> float:
        """The comparison alone: the chance that `request.candidate` does the task better than `other` (two
        calls, one per order)."""
        return preference(*self.orders(request, other, config))

    def orders(
        self, request: CritiqueRequest, other: str, config: RunnableConfig | None = None
    ) -> tuple[float, float]:
        """The comparison's two readings (two calls): the log-odds of the candidate's letter with it as A, then as
        B. Both positive: it won in both orders; of opposite signs: a tie (the position decided)."""
        as_a, as_b = (self._call(self._reader, m, config) for m in self.preference_messages(request, other))
        return log_odds(self._top(as_a), "A", "B"), log_odds(self._top(as_b), "B", "A")

    def faults(
        self, request: CritiqueRequest, config: RunnableConfig | None = None
    ) -> WrittenCritique | None:
        """The written critique alone, as the model wrote it (one call; None when it cannot be read)."""
        return written(self._call(self._writer, self.critique_messages(request), config))

    def usable_faults(self, request: CritiqueRequest, critique: WrittenCritique) -> list[Fault]:
        """The faults of a written critique kept as whole lines in the task's script (no call)."""
        return usable(critique, task=request.task, context=request.context, answer=request.candidate)

    def check_faults(
        self, request: CritiqueRequest, faults: Sequence[Fault], config: RunnableConfig | None = None
    ) -> list[FaultCheck]:
        """Each fault put back to the judge as yes/no questions about `request.candidate` (one or two calls
        each, by `confirm`; `"none"` asks both ways, as `"both"` does, so that the readings can be compared)."""
        critic = self if self.confirm != "none" else self._with(confirm="both")
        return cast(list[FaultCheck], critic._run(critic._check_steps(request, faults), config))

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return cast(Critique, self._run(self._critique_steps(request), config))

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return cast(Critique, await self._arun(self._critique_steps(request), config))
