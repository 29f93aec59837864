"""Shared pieces of the benchmarks: instant fake chat models, the hand-written baselines, timing and tables.

Every variant of a benchmark uses the *same* fake model classes, so differences in the figures are the
orchestration's own. Repetitions are interleaved (variant order shuffled each repetition) so that machine noise
hits all variants alike.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reflection_graph.critique import CritiqueOutput  # noqa: E402

__all__ = [
    "FastChat",
    "critique_json",
    "draft_text",
    "equal_tokens",
    "interleaved",
    "langgraph_reflection_graph",
    "median",
    "minimal_langgraph_loop",
    "plain_loop",
    "print_table",
    "require_langgraph_reflection",
    "revising_generator",
    "wilson",
]

Reply = str | Callable[[list[BaseMessage]], str]


class FastChat(BaseChatModel):
    """An instant (or fixed-latency) chat model: replies with `reply`, counts calls and prompt characters.

    `latency` seconds are slept per call (`time.sleep` in `_generate`, `asyncio.sleep` in `_agenerate`).
    `with_structured_output` behaves like a provider's: the raw reply, then a parse step into the schema.
    """

    reply: Any = "draft"
    latency: float = 0.0
    calls: int = 0
    prompt_chars: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fast-fake"

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls += 1
        chars = sum(len(str(m.content)) for m in messages)
        self.prompt_chars.append(chars)
        text = self.reply(messages) if callable(self.reply) else str(self.reply)
        usage = {
            "input_tokens": chars // 4,
            "output_tokens": len(text) // 4,
            "total_tokens": (chars + len(text)) // 4,
        }
        message = AIMessage(content=text, usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.latency:
            time.sleep(self.latency)
        return self._result(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._result(messages)

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:  # type: ignore[override]
        def parse(raw: AIMessage) -> Any:
            parsed = schema.model_validate_json(str(raw.content))
            return {"raw": raw, "parsed": parsed, "parsing_error": None} if include_raw else parsed

        async def aparse(raw: AIMessage) -> Any:  # as a provider's output parser: no thread hop in ainvoke
            return parse(raw)

        return self | RunnableLambda(parse, afunc=aparse, name="parse_structured")


def critique_json(score: float = 4.0, ok: bool = False, issue: str = "too vague") -> str:
    """A critic reply (JSON of `CritiqueOutput`)."""
    return CritiqueOutput(
        issues=[issue],
        suggestions=[f"fix: {issue}"],
        is_acceptable=ok,
        score=score,
        feedback=f"The draft is {issue}; make it concrete.",
    ).model_dump_json()


def draft_text(n_chars: int = 600) -> str:
    """A draft of about `n_chars` characters."""
    sentence = "Thank you for the offer; after careful thought I have decided to decline it. "
    return (sentence * (n_chars // len(sentence) + 1))[:n_chars]


def revising_generator(n_chars: int = 600) -> FastChat:
    """A generator whose every reply is a new text of about `n_chars` characters (a draft, then revisions that
    change it), so no loop treats a revision as a repeat of its input."""
    counter = {"n": 0}
    base = draft_text(n_chars)

    def reply(_: list[BaseMessage]) -> str:
        counter["n"] += 1
        return f"{base} (version {counter['n']})"

    return FastChat(reply=reply)


def never_accepting_critic(**kw: Any) -> FastChat:
    """A critic that always rejects, each time with a new issue (so no plateau / no-new-issue stop)."""
    counter = {"n": 0}

    def reply(_: list[BaseMessage]) -> str:
        counter["n"] += 1
        return critique_json(score=4.0, issue=f"issue {counter['n']}")

    return FastChat(reply=reply, **kw)


# ------------------------------------------------------------------------------------------ the baselines


def plain_loop(
    generator: BaseChatModel, critic: BaseChatModel, rounds: int
) -> Callable[[str], dict[str, Any]]:
    """The floor: a hand-written Python loop, same calls and prompts in spirit, no graph."""
    judge = critic.with_structured_output(CritiqueOutput)

    def run(task: str) -> dict[str, Any]:
        candidate = ""
        crit: Any = None
        for i in range(rounds):
            if i == 0:
                prompt = f"Task: {task}\nWrite the answer."
            else:
                prompt = f"Task: {task}\nPrevious answer:\n{candidate}\nFeedback: {crit.feedback}\nRevise it."
            candidate = str(generator.invoke([HumanMessage(prompt)]).content)
            crit = judge.invoke([HumanMessage(f"Task: {task}\nAnswer:\n{candidate}\nCritique it as JSON.")])
            if crit.is_acceptable:
                break
        return {"candidate": candidate, "critique": crit.model_dump(), "iterations": i + 1}

    return run


class _MinimalState(TypedDict, total=False):
    task: str
    candidate: str
    critique: dict[str, Any]
    iterations: int


def _minimal_prompt(state: _MinimalState) -> list[BaseMessage]:
    """The hand-written loops' prompt: the task to answer, or the task, the last answer and its feedback."""
    if state.get("critique") is None:
        return [HumanMessage(f"Task: {state['task']}\nWrite the answer.")]
    return [
        HumanMessage(
            f"Task: {state['task']}\nPrevious answer:\n{state['candidate']}\n"
            f"Feedback: {state['critique']['feedback']}\nRevise it."
        )
    ]


def minimal_langgraph_loop(generator: BaseChatModel, critic: BaseChatModel, rounds: int) -> Any:
    """A minimal hand-written LangGraph loop of the same shape: generate -> critique -> (generate | END)."""
    from langgraph.graph import END, START, StateGraph

    judge = critic.with_structured_output(CritiqueOutput)

    def generate(state: _MinimalState) -> dict[str, Any]:
        return {"candidate": str(generator.invoke(_minimal_prompt(state)).content)}

    async def agenerate(state: _MinimalState) -> dict[str, Any]:
        return {"candidate": str((await generator.ainvoke(_minimal_prompt(state))).content)}

    def critique(state: _MinimalState) -> dict[str, Any]:
        msg = HumanMessage(f"Task: {state['task']}\nAnswer:\n{state['candidate']}\nCritique it as JSON.")
        crit = judge.invoke([msg])
        return {"critique": crit.model_dump(), "iterations": state.get("iterations", 0) + 1}

    async def acritique(state: _MinimalState) -> dict[str, Any]:
        msg = HumanMessage(f"Task: {state['task']}\nAnswer:\n{state['candidate']}\nCritique it as JSON.")
        crit = await judge.ainvoke([msg])
        return {"critique": crit.model_dump(), "iterations": state.get("iterations", 0) + 1}

    def route(state: _MinimalState) -> Literal["generate", "__end__"]:
        if state["critique"]["is_acceptable"] or state["iterations"] >= rounds:
            return END
        return "generate"

    builder = StateGraph(_MinimalState)
    builder.add_node("generate", RunnableLambda(generate, afunc=agenerate))
    builder.add_node("critique", RunnableLambda(critique, afunc=acritique))
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "critique")
    builder.add_conditional_edges("critique", route, ["generate", END])
    return builder.compile()


def lean_langgraph_loop(generator: BaseChatModel, critic: BaseChatModel, rounds: int) -> Any:
    """The leanest LangGraph loop a user would write: plain node functions, `json.loads` of the critic's reply.

    Same shape and same fake models as the others: generate -> critique -> (generate | END), with a round counter.
    """
    from langgraph.graph import END, START, StateGraph

    def judged(state: _MinimalState, reply: Any) -> dict[str, Any]:
        return {"critique": json.loads(reply.content), "iterations": state.get("iterations", 0) + 1}

    def ask(state: _MinimalState) -> list[BaseMessage]:
        return [HumanMessage(f"Task: {state['task']}\nAnswer:\n{state['candidate']}\nCritique it as JSON.")]

    def generate(state: _MinimalState) -> dict[str, Any]:
        return {"candidate": generator.invoke(_minimal_prompt(state)).content}

    async def agenerate(state: _MinimalState) -> dict[str, Any]:
        return {"candidate": (await generator.ainvoke(_minimal_prompt(state))).content}

    def critique(state: _MinimalState) -> dict[str, Any]:
        return judged(state, critic.invoke(ask(state)))

    async def acritique(state: _MinimalState) -> dict[str, Any]:
        return judged(state, await critic.ainvoke(ask(state)))

    def route(state: _MinimalState) -> Literal["generate", "__end__"]:
        if state["critique"]["is_acceptable"] or state["iterations"] >= rounds:
            return END
        return "generate"

    def build(gen: Any, crit: Any) -> Any:
        builder = StateGraph(_MinimalState)
        builder.add_node("generate", gen)
        builder.add_node("critique", crit)
        builder.add_edge(START, "generate")
        builder.add_edge("generate", "critique")
        builder.add_conditional_edges("critique", route, ["generate", END])
        return builder.compile()

    # a user writes sync functions for invoke and async ones for ainvoke: two graphs, each with plain functions
    sync_graph, async_graph = build(generate, critique), build(agenerate, acritique)

    class Lean:
        def invoke(self, value: Any) -> Any:
            return sync_graph.invoke(value)

        async def ainvoke(self, value: Any) -> Any:
            return await async_graph.ainvoke(value)

    return Lean()


def require_langgraph_reflection() -> Any:
    """Import `langgraph_reflection`, or exit with the install command (it is not a project dependency)."""
    try:
        import langgraph_reflection
    except ImportError:
        print(
            "langgraph-reflection is not installed; it is only needed for this comparison:\n"
            "    pip install langgraph-reflection\n"
            "(or pass --skip-peer to measure the other variants only)",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    return langgraph_reflection


def langgraph_reflection_graph(generator: BaseChatModel, critic: BaseChatModel, rounds: int) -> Any:
    """The same loop with `langgraph_reflection.create_reflection_graph` (the PyPI peer).

    The peer works on a message list: the main graph answers, the reflection graph appends a HumanMessage with
    the critique to ask for another round, or appends nothing to stop. It has no round counter (it relies on the
    recursion limit), so the reflection node stops after `rounds` critiques itself, as a user would write it.
    """
    from langgraph.graph import END, START, MessagesState, StateGraph

    lgr = require_langgraph_reflection()
    judge = critic.with_structured_output(CritiqueOutput)

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [generator.invoke(state["messages"])]}

    async def aanswer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await generator.ainvoke(state["messages"])]}

    def _after(state: MessagesState, crit: Any) -> dict[str, Any]:
        answers = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        if crit.is_acceptable or answers >= rounds:
            return {}
        return {"messages": [HumanMessage(f"Feedback: {crit.feedback}\nIssues: {crit.issues}\nRevise it.")]}

    def judge_node(state: MessagesState) -> dict[str, Any]:
        msgs = [SystemMessage("Critique the last answer as JSON."), *state["messages"]]
        return _after(state, judge.invoke(msgs))

    async def ajudge_node(state: MessagesState) -> dict[str, Any]:
        msgs = [SystemMessage("Critique the last answer as JSON."), *state["messages"]]
        return _after(state, await judge.ainvoke(msgs))

    main = StateGraph(MessagesState)
    main.add_node("answer", RunnableLambda(answer, afunc=aanswer))
    main.add_edge(START, "answer")
    main.add_edge("answer", END)
    reflection = StateGraph(MessagesState)
    reflection.add_node("judge", RunnableLambda(judge_node, afunc=ajudge_node))
    reflection.add_edge(START, "judge")
    reflection.add_edge("judge", END)
    # langgraph-reflection 0.0.1 reads `graph.builder.schema`, which LangGraph 1.x no longer has: pass the
    # state schema explicitly (without it the peer fails with AttributeError on LangGraph >= 1.0).
    with warnings.catch_warnings():  # it also passes the deprecated `config_schema=None` to StateGraph
        warnings.simplefilter("ignore")
        peer = lgr.create_reflection_graph(main.compile(), reflection.compile(), state_schema=MessagesState)
    return peer.compile()


# ------------------------------------------------------------------------------------------------ timing


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def interleaved(
    variants: Mapping[str, Callable[[], Any]],
    *,
    reps: int,
    per_rep: int,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Time each variant `per_rep` times per repetition, shuffling variant order every repetition.

    Returns seconds per call for every repetition (the mean of its `per_rep` calls), by variant. `clock` is wall
    time by default; `time.process_time` (this process's CPU time) holds steadier on a machine other jobs load.
    """
    rng = random.Random(seed)
    names = list(variants)
    out: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(reps):
        rng.shuffle(names)
        for name in names:
            fn = variants[name]
            start = clock()
            for _ in range(per_rep):
                fn()
            out[name].append((clock() - start) / per_rep)
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of `k` successes in `n` trials (95% with the default `z`); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    scale = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def equal_tokens(best: Mapping[int, Mapping[str, Any]], tokens: float) -> tuple[int, int] | None:
    """The N on each side of `tokens` in best-of-N's mean tokens (`best[n]["tokens"]`): the largest N at or
    below it and the smallest at or above it; None when the N drawn do not reach it on both sides."""
    below = [n for n, b in best.items() if b["tokens"] <= tokens]
    above = [n for n, b in best.items() if b["tokens"] >= tokens]
    if not below or not above:
        return None
    return max(below), min(above)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a plain aligned table (Markdown-compatible)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        print(line(row))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)
