"""The peers side by side: reflection-graph and the packages people use for the same job, on one server, one GGUF.

One `python -m llama_cpp.server` on 127.0.0.1 serves the bundled Qwen2.5-Coder-1.5B-Instruct GGUF (one context,
thread count and seed for every client; `--threads`, default the machine's cores), and every variant talks to it
through its OpenAI-compatible API with the same reply limit (the model profile's `max_tokens`):

- **raw**: one greedy chat completion of the task (the OpenAI SDK, temperature 0);
- **reflection-graph**: `create_reflection_graph(ChatOpenAI(...))` with its defaults and the verifier as its critic
  (the verifier's defaults: resample, up to 5 generations; bench/_humaneval.py's `graph_record`,
  bench_instructions.py's `loop_record`);
- **dspy-refine**, **dspy-bestofn**: `dspy.Refine` and `dspy.BestOfN` (DSPy 3.4.1) around
  `dspy.ChainOfThought` of a `task -> answer` signature whose answer field is described
  (`dspy.OutputField(desc=...)`), as DSPy's docs show, `N=--n` attempts, the verifier as the reward
  function, `threshold=1.0`; `dspy.LM("openai/<model>", api_base=..., api_key="x", cache=False)` (DSPy's disk cache
  would replay a call instead of making it);
- **its-hub-bon**: its-hub 1.2's `BestOfN` with the verifier as its outcome reward model, `budget=--n`, on its
  `OpenAICompatibleLanguageModel` at temperature 0.7 (the package's sampling temperature). Its beam search and
  particle filtering need a process reward model scoring partial steps; the verifier scores whole answers, so the
  table gives a row saying so;
- **langgraph-reflection**: `create_reflection_graph(assistant, judge)` of langgraph-reflection 0.0.1 as its README
  shows, the judge graph asking for another answer with the verifier's failures while the verifier fails, and
  stopping after `--n` answers (the peer has no round counter of its own). Where the README's call fails on the
  installed LangGraph (it reads `graph.builder.schema`), the row says what breaks and runs with
  `state_schema=MessagesState`;
- **optillm-<technique>**: optillm 0.4.0's proxy, from an environment of its own (`--optillm-python`, default the
  `OPTILLM_PYTHON` variable; made by one command, see bench/optillm-requirements.txt: the package with
  `--no-deps` and only what its proxy imports, no torch), started once on loopback in front of the same forwarder
  as `optillm --base-url <forwarder> --port <free port> --best-of-n <--n>`, approach `auto`, and sent one chat
  completion of the task per problem with the technique as the model name's prefix (`bon-<model>`), as its README
  shows; its answer is scored as every other. The techniques: on HumanEval `bon`, `moa`, `self_consistency`,
  `cot_reflection`, `re2` and `plansearch` (its README's list for reasoning over code; plansearch is built for
  code: its prompts ask for observations on a competitive programming problem, then a Python program); on
  IFBench the same but plansearch, whose prompts turn any task into one for a Python program (the table gives a
  row saying so). optillm has no place for a verifier: each technique picks its answer itself (`bon` by the
  model's own 0-10 rating, `self_consistency` by the largest cluster of similar answers, `moa` by a critique and a
  synthesis), and the table's note says so. `bon` and `moa` ask the server for their samples with `n`, which
  llama.cpp's server ignores: the forwarder sends such a request as `n` requests (bench/_usage.py). Without
  `--optillm-python` there are no optillm records and the table gives a row saying how to make its environment;
  an environment that does not start the proxy gives each optillm record its error (made again on the next run).

The verifier is the one the project's own benches use: HumanEval's visible docstring examples run by
`CodeTestCritic` (the share passed is the reward), and IFBench's checker through `InstructionCritic` (the share of
instructions followed). Answers are judged as those benches judge them: HumanEval's own tests (`Judge.solves`),
IFBench's own scorer (strict and loose, instruction and prompt level). A HumanEval problem whose docstring has no
example the package can read gives reflection-graph no critic: raw's record stands for it there (as in
bench_code.py), and the peers' rewards are 1.0 (nothing to check fails).

Tokens are read from the server's own `usage` in every HTTP reply, whoever sent the request: every client is given
the URL of a small forwarder in front of the server (bench/_usage.py), the same for every variant, which counts the
HTTP calls, their tokens and any reply whose usage could not be read. DSPy and its-hub send the reply limit as
`max_completion_tokens`, which llama.cpp's server does not read; the forwarder passes it on as `max_tokens` too,
so every variant has the same limit. Each record holds the 1-minute load average before and after, its wall time and the commit; an
exception or an answer a peer could not parse is a record with its error text, never a skipped problem. The
attempts of the variants that make several (DSPy, its-hub, langgraph-reflection) are recorded with their
cumulative tokens and the verifier's reward, so the report also gives each one's solved count when cut at
reflection-graph's mean tokens per problem (the best attempt by the verifier within it; langgraph-reflection's
last, as it returns the last).

The sets: HumanEval/40-163 (`--ids`, default 40-79; the problems before 40 are reserved and never loaded) and the
first `--ifbench-limit` (32) IFBench development prompts of bench_instructions.py's fixed order (the reserved half
is never read). Problem-major: for each problem every variant, in an order rotated by one each problem. Records
go to bench/results/peers-<model>.jsonl keyed by the set, the problem, the variant and the settings (not the
commit), so a run can be killed and resumed; `--report-only` prints the tables from them. After a change to the
package, `--remake reflection-graph --made-before COMMIT` makes that variant's records again where the package
code they were made at does not hold COMMIT (resumable: a record made again holds it), and leaves every other
variant's records as they are; the report names each record's commit.

    python bench/bench_peers.py                       # both sets, resumes
    python bench/bench_peers.py --sets ifbench --ifbench-limit 4
    python bench/bench_peers.py --report-only
    python bench/bench_peers.py --optillm-python .venv-optillm/bin/python    # with optillm's techniques
    python bench/bench_peers.py --remake reflection-graph --made-before 33562e7   # the default again, after a fix
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table, wilson  # noqa: E402
from _optillm import SETUP, OptillmProxy, OptillmUnavailable, optillm_proxy  # noqa: E402
from _raw import commit, file_sha256, git, load_average  # noqa: E402
from _runs import LOAD_LIMIT, Results, loaded, run_key, to_make  # noqa: E402
from _usage import PROXY_TIMEOUT_S, HttpUsage, counting_proxy  # noqa: E402

VERSION = "peers-1"
"""The records' version: bumped when what a record means changes."""
MODEL = "qwen2.5-coder-1.5b"
"""The bundled model served (`embedded:<MODEL>`'s GGUF), and the name clients send."""
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SETS = ("humaneval", "ifbench")
VARIANTS = ("raw", "reflection-graph", "dspy-refine", "dspy-bestofn", "its-hub-bon", "langgraph-reflection")
BASELINE = "reflection-graph"
"""The variant whose mean tokens per problem is the budget the others are cut at."""
PICK = {"dspy-refine": "best", "dspy-bestofn": "best", "its-hub-bon": "best", "langgraph-reflection": "last"}
"""How a variant with attempts answers after its first k: the best by the verifier (ties to the earlier), or the
last."""
PROCESS_REWARD = (
    "needs a process reward model scoring partial steps (its StepGeneration and an AbstractProcessRewardModel); "
    "the verifier scores whole answers only"
)
LEFT_OUT = {
    "its-hub beam search": PROCESS_REWARD,
    "its-hub particle filtering": PROCESS_REWARD,
}
"""Peer techniques with no record, and why."""
OPTILLM_TECHNIQUES = {
    "humaneval": ("bon", "moa", "self_consistency", "cot_reflection", "re2", "plansearch"),
    "ifbench": ("bon", "moa", "self_consistency", "cot_reflection", "re2"),
}
"""optillm's techniques run on each set (the module's docstring says why)."""
OPTILLM_LEFT_OUT = {
    "ifbench": {
        "optillm plansearch": "a technique for code: its prompts ask for observations on a competitive "
        "programming problem, then a Python program"
    }
}
"""optillm's techniques with no record on a set, and why."""
OPTILLM_NOT_RUN = (
    "not run: its environment (no torch; bench/optillm-requirements.txt) is given with --optillm-python or "
    f"OPTILLM_PYTHON; make it with: {SETUP}"
)
OPTILLM_NOTE = "optillm has no verifier hook: run as documented, the technique picks its answer itself"
HUB_TEMPERATURE = 0.7


# ------------------------------------------------------------------------------------------ the sets


class CodeSet:
    """HumanEval/40-163 as bench_code.py runs it: the task in a user's words, the visible examples as the verifier,
    HumanEval's own tests as the judge (bench/_humaneval.py)."""

    name = "humaneval"
    answer = "the complete Python function asked for: its signature and its whole body, as code"

    def __init__(self, ids: Sequence[int]) -> None:
        import _humaneval
        from _humaneval_set import problems

        self.he = _humaneval
        self.judge = _humaneval.Judge()
        self.problems = problems(ids)

    def key(self, problem: dict[str, Any]) -> str:
        return str(problem["task_id"])

    def task(self, problem: dict[str, Any]) -> str:
        return str(self.he.task_of(problem))

    def code(self, problem: dict[str, Any], text: str) -> str:
        from reflection_graph.loop._code import finish_candidate

        return finish_candidate(self.task(problem), text.strip()) or text

    def verify(self, problem: dict[str, Any], text: str) -> float:
        """The verifier's reward: the share of the visible examples passed (1.0 when there is none)."""
        share = self.judge.visible(problem, self.code(problem, text))
        return 1.0 if share is None else float(share)

    def failures(self, problem: dict[str, Any], text: str) -> str:
        """The verifier's failures, as its critique words them."""
        from reflection_graph.critics.base import CritiqueRequest

        critic = self.he.visible_critic(problem)
        if critic is None:
            return ""
        verdict = critic.critique(
            CritiqueRequest(task=self.task(problem), candidate=self.code(problem, text))
        )
        return "\n".join(verdict.issues) or verdict.feedback

    def score(self, problem: dict[str, Any], text: str) -> dict[str, Any]:
        code = self.code(problem, text)
        return {
            "solved": self.judge.solves(problem, code),
            "visible": self.judge.visible(problem, code),
            "code": code,
        }

    def raw(self, problem: dict[str, Any], chat: Any) -> dict[str, Any]:
        return dict(self.he.raw_record(problem, chat, self.judge))

    def graph(self, problem: dict[str, Any], model: Any) -> dict[str, Any]:
        record = dict(self.he.graph_record(problem, model, self.judge, {}))
        if record.get("no_visible_tests"):
            record["note"] = "no visible example: no critic to give it; raw's record stands for it"
        return record


class InstructionSet:
    """IFBench's development prompts as bench_instructions.py runs them: the prompt as the task, IFBench's checker
    (`InstructionCritic`) as the verifier, IFBench's own scorer as the judge."""

    name = "ifbench"
    answer = "the whole reply to the task, following every instruction in it"

    def __init__(self, limit: int) -> None:
        import bench_instructions
        from _ifbench_set import prompts

        self.bi = bench_instructions
        rows, self.excluded = bench_instructions.split_rows(prompts())
        self.problems = bench_instructions.in_order(rows)[:limit]

    def key(self, problem: dict[str, Any]) -> str:
        return str(self.bi.prompt_id(problem))

    def task(self, problem: dict[str, Any]) -> str:
        return str(problem["prompt"])

    def _verdict(self, problem: dict[str, Any], text: str) -> Any:
        from reflection_graph.critics.base import CritiqueRequest

        return self.bi.critic_of(problem).critique(CritiqueRequest(task=problem["prompt"], candidate=text))

    def verify(self, problem: dict[str, Any], text: str) -> float:
        """The verifier's reward: the share of the prompt's instructions the checker counts as followed."""
        verdict = self._verdict(problem, text)
        return (verdict.checks_passed or 0) / max(verdict.checks_total or 1, 1)

    def failures(self, problem: dict[str, Any], text: str) -> str:
        """The checker's failures, as its critique words them."""
        verdict = self._verdict(problem, text)
        return "\n".join(verdict.issues) or str(verdict.feedback)

    def score(self, problem: dict[str, Any], text: str) -> dict[str, Any]:
        return dict(self.bi.scored(problem, text, self.bi.critic_of(problem)))

    def raw(self, problem: dict[str, Any], chat: Any) -> dict[str, Any]:
        return dict(self.bi.raw_record(problem, chat, self.bi.critic_of(problem)))

    def graph(self, problem: dict[str, Any], model: Any) -> dict[str, Any]:
        from reflection_graph.loop._defaults import VERIFIER_DEFAULTS as D

        critic = self.bi.critic_of(problem)
        record = self.bi.loop_record(
            problem, model, critic, D["max_iterations"], D["n_revisions"], D["strategy"]
        )
        return dict(record)


# ------------------------------------------------------------------------------------------ the variants


@dataclass
class Context:
    """What every variant shares: the server, its usage counter and the settings."""

    base_url: str
    usage: HttpUsage
    max_tokens: int
    n: int
    notes: dict[str, str] = field(default_factory=dict)
    untimed: float = 0.0
    """Seconds spent judging attempts for the budget cut (not the variant's own work): left out of its time."""
    optillm: OptillmProxy | None = None
    """optillm's proxy in front of `base_url`, when it runs."""
    optillm_why: str = "optillm's proxy was not started"
    """Why there is no `optillm` proxy."""


class ServerChat:
    """One greedy chat completion of a task through the server (the OpenAI SDK): `RawChat.complete`'s reply."""

    def __init__(self, base_url: str, max_tokens: int) -> None:
        import openai

        self.client = openai.OpenAI(base_url=base_url, api_key="x")
        self.max_tokens = max_tokens

    def complete(self, task: str) -> dict[str, Any]:
        start = time.monotonic()
        out = self.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": task}],
            temperature=0.0,
            max_tokens=self.max_tokens,
        )
        usage = out.usage
        return {
            "text": out.choices[0].message.content or "",
            "finish_reason": out.choices[0].finish_reason,
            "prompt_tokens": int(usage.prompt_tokens if usage else 0),
            "completion_tokens": int(usage.completion_tokens if usage else 0),
            "seconds": time.monotonic() - start,
        }


def chat_model(ctx: Context) -> Any:
    """reflection-graph's model for a server (`resolve_model(name, base_url=...)`), at the bench's reply limit."""
    from reflection_graph.models import resolve_model

    model = resolve_model(MODEL, base_url=ctx.base_url)
    return model.model_copy(update={"extra_body": {"max_tokens": ctx.max_tokens}})


class Attempts:
    """The attempts of a variant that makes several: for each, the tokens spent so far, the verifier's reward and
    the judge's figures."""

    def __init__(self, kind: Any, problem: dict[str, Any], ctx: Context) -> None:
        self.kind, self.problem, self.ctx = kind, problem, ctx
        self.start = ctx.usage.now()
        self.made: list[dict[str, Any]] = []

    def add(self, text: str, tokens: int | None = None) -> float:
        """Verify `text`, judge it (untimed) and keep it; `tokens`: the tokens spent so far (default: the
        counter's reading). The verifier's reward."""
        reward = float(self.kind.verify(self.problem, text))
        spent = (self.ctx.usage.now() - self.start).tokens if tokens is None else tokens
        judging = time.monotonic()
        self.made.append({"tokens": spent, "reward": reward, **self.kind.score(self.problem, text)})
        self.ctx.untimed += time.monotonic() - judging
        return reward


def run_dspy(kind: Any, problem: dict[str, Any], ctx: Context, refine: bool) -> dict[str, Any]:
    """`dspy.Refine` or `dspy.BestOfN` around `dspy.ChainOfThought` of a `task -> answer` signature whose answer
    field says what the answer is (the set's `answer`, as DSPy's `OutputField(desc=...)` documents; with the bare
    string signature the model answered a code task with the stub's example output, "True"), the verifier as
    reward."""
    import dspy

    lm = dspy.LM(
        f"openai/{MODEL}", api_base=ctx.base_url, api_key="x", max_tokens=ctx.max_tokens, cache=False
    )
    attempts = Attempts(kind, problem, ctx)

    def reward(args: dict[str, Any], pred: Any) -> float:
        return attempts.add(str(pred.answer))

    class Solve(dspy.Signature):  # type: ignore[misc]
        """Do the task."""

        task: str = dspy.InputField()
        answer: str = dspy.OutputField(desc=kind.answer)

    program = dspy.ChainOfThought(Solve)
    peer = (dspy.Refine if refine else dspy.BestOfN)(module=program, N=ctx.n, reward_fn=reward, threshold=1.0)
    printed = io.StringIO()
    with dspy.context(lm=lm), contextlib.redirect_stdout(printed):
        pred = peer(task=kind.task(problem))
    record: dict[str, Any] = {"attempts": attempts.made}
    failed = [line for line in printed.getvalue().splitlines() if "failed" in line]
    if failed:
        record["attempt_errors"] = failed
    if pred is None:
        record["error"] = "no attempt gave a prediction" + (f": {failed[-1]}" if failed else "")
        return record
    return {**record, **kind.score(problem, str(pred.answer))}


def run_its_hub(kind: Any, problem: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """its-hub's `BestOfN`, the verifier as its outcome reward model, `budget=ctx.n`."""
    from its_hub import AbstractOutcomeRewardModel, BestOfN
    from its_hub.core.lms.openai_lm import OpenAICompatibleLanguageModel

    class Verifier(AbstractOutcomeRewardModel):  # type: ignore[misc]
        def score(self, messages: Any, **kwargs: Any) -> Any:
            batch = messages and isinstance(messages[0], list)
            scores = [self._one(m) for m in (messages if batch else [messages])]
            return scores if batch else scores[0]

        async def ascore(self, messages: Any, orchestrator: Any = None, **kwargs: Any) -> Any:
            return self.score(messages)

        def _one(self, conversation: Any) -> float:
            last = conversation[-1]
            content = last.content if hasattr(last, "content") else last.get("content")
            return float(kind.verify(problem, str(content or "")))

    lm = OpenAICompatibleLanguageModel(
        endpoint=ctx.base_url,
        api_key="x",
        model_name=MODEL,
        max_completion_tokens=ctx.max_tokens,
        temperature=HUB_TEMPERATURE,
    )
    start = ctx.usage.now()
    result = BestOfN(Verifier()).infer(lm, kind.task(problem), budget=ctx.n, return_response_only=False)
    spent = (ctx.usage.now() - start).tokens
    texts = [str(r.get("content") or "") for r in result.responses]
    attempts = Attempts(kind, problem, ctx)
    for index, text in enumerate(texts, 1):  # generated at once: each costs the mean of the calls
        attempts.add(text, tokens=round(spent * index / max(len(texts), 1)))
    return {
        "attempts": attempts.made,
        "attempt_tokens": "the mean of its calls (made together)",
        **kind.score(problem, texts[result.selected_index]),
    }


def reflection_peer(assistant: Any, judge: Any, ctx: Context) -> Any:
    """langgraph-reflection's graph, built as its README shows; where that fails on the installed LangGraph, the
    note says what breaks (`ctx.notes`) and it is built with `state_schema=MessagesState`."""
    from langgraph.graph import MessagesState
    from langgraph_reflection import create_reflection_graph

    with warnings.catch_warnings():  # it passes the deprecated `config_schema=None` to StateGraph
        warnings.simplefilter("ignore")
        try:
            return create_reflection_graph(assistant, judge).compile()
        except Exception as exc:
            version = _version("langgraph")
            ctx.notes["langgraph-reflection"] = (
                f"its README's create_reflection_graph(assistant, judge) fails on LangGraph {version}: "
                f"{type(exc).__name__}: {exc}; run with state_schema=MessagesState"
            )
            return create_reflection_graph(assistant, judge, state_schema=MessagesState).compile()


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def run_langgraph_reflection(kind: Any, problem: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """An assistant graph (the model answers the messages) and a judge graph (the verifier's failures as a user
    message, nothing once it passes or after `ctx.n` answers)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    model = chat_model(ctx)
    attempts = Attempts(kind, problem, ctx)

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def judge(state: MessagesState) -> dict[str, Any]:
        text = str(state["messages"][-1].content)
        reward = attempts.add(text)
        answers = sum(isinstance(m, AIMessage) for m in state["messages"])
        if reward >= 1.0 or answers >= ctx.n:
            return {}
        failures = kind.failures(problem, text)
        return {"messages": [HumanMessage(f"The answer fails these checks:\n{failures}\nFix it.")]}

    assistant = StateGraph(MessagesState)
    assistant.add_node("answer", answer)
    assistant.add_edge(START, "answer")
    assistant.add_edge("answer", END)
    judging = StateGraph(MessagesState)
    judging.add_node("judge", judge)
    judging.add_edge(START, "judge")
    judging.add_edge("judge", END)
    app = reflection_peer(assistant.compile(), judging.compile(), ctx)
    out = app.invoke({"messages": [HumanMessage(kind.task(problem))]})
    last = next(m for m in reversed(out["messages"]) if isinstance(m, AIMessage))
    record = {"attempts": attempts.made, **kind.score(problem, str(last.content))}
    if "langgraph-reflection" in ctx.notes:
        record["note"] = ctx.notes["langgraph-reflection"]
    return record


def optillm_variants(kind_name: str) -> tuple[str, ...]:
    """The optillm variants run on the set `kind_name` (`optillm-<technique>`)."""
    return tuple(f"optillm-{technique}" for technique in OPTILLM_TECHNIQUES.get(kind_name, ()))


def run_optillm(technique: str, kind: Any, problem: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """One chat completion of the task through optillm's proxy, the technique as the model name's prefix (its
    README's way), at the bench's reply limit; its answer scored. No proxy, or one that does not answer: a record
    with why (`unavailable`, so the next run makes it again)."""
    if ctx.optillm is None:
        return unavailable(f"optillm not running: {ctx.optillm_why}")
    import openai

    client = openai.OpenAI(base_url=ctx.optillm.url, api_key="x", timeout=PROXY_TIMEOUT_S, max_retries=0)
    try:
        out = client.chat.completions.create(
            model=f"{technique}-{MODEL}",
            messages=[{"role": "user", "content": kind.task(problem)}],
            max_tokens=ctx.max_tokens,
        )
    except openai.APITimeoutError:
        raise  # the technique ran past the limit: its own failure
    except openai.APIConnectionError as exc:
        return unavailable(f"optillm's proxy did not answer: {exc}")
    text = (out.choices[0].message.content or "") if out.choices else ""
    record: dict[str, Any] = {
        **kind.score(problem, text),
        "answer": text,
        "optillm": {"version": ctx.optillm.version, "technique": technique, "best_of_n": ctx.n},
        "note": OPTILLM_NOTE,
    }
    if out.usage is not None:  # optillm's own count: the completion tokens of the calls it counted
        record["optillm_completion_tokens"] = out.usage.completion_tokens
    if text.startswith("Error:"):  # the technique's own failure, given as its answer
        record["error"] = f"optillm {technique}: {text}"[:2000]
    return record


def unavailable(why: str) -> dict[str, Any]:
    """The record of a peer that was not there to run: `why`, as its error and its note in the table."""
    return {"error": why, "note": why[:200], "unavailable": True}


def run_variant(variant: str, kind: Any, problem: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The variant's record on one problem (its answer's figures; an exception is the record's `error`)."""
    technique = variant.removeprefix("optillm-")
    try:
        if variant.startswith("optillm-") and any(technique in t for t in OPTILLM_TECHNIQUES.values()):
            return run_optillm(technique, kind, problem, ctx)
        if variant == "raw":
            return kind.raw(problem, ServerChat(ctx.base_url, ctx.max_tokens))  # type: ignore[no-any-return]
        if variant == "reflection-graph":
            return kind.graph(problem, chat_model(ctx))  # type: ignore[no-any-return]
        if variant in ("dspy-refine", "dspy-bestofn"):
            return run_dspy(kind, problem, ctx, refine=variant == "dspy-refine")
        if variant == "its-hub-bon":
            return run_its_hub(kind, problem, ctx)
        if variant == "langgraph-reflection":
            return run_langgraph_reflection(kind, problem, ctx)
    except Exception as exc:  # a peer's failure is a record, never a skip
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    known = [*VARIANTS, *dict.fromkeys(v for name in SETS for v in optillm_variants(name))]
    raise ValueError(f"unknown variant {variant!r}: use one of {', '.join(known)}")


def measure(make: Callable[[], dict[str, Any]], ctx: Context, provenance: dict[str, Any]) -> dict[str, Any]:
    """`make()`'s record with the server usage counted while it ran, its wall time (less `ctx.untimed`), the load
    before and after, and `provenance`."""
    before, load_before, start = ctx.usage.now(), load_average(), time.monotonic()
    ctx.untimed = 0.0
    record = make()
    seconds = time.monotonic() - start - ctx.untimed
    spent = ctx.usage.now() - before
    for name in ("tokens", "calls"):  # the variant's own counts, kept beside the server's
        if name in record:
            record[f"own_{name}"] = record.pop(name)
    record.update(spent.as_record())
    record.update(provenance, seconds=round(seconds, 1), load=[load_before, load_average()])
    return record


def rotated(variants: Sequence[str], index: int) -> list[str]:
    """The variants in the order of problem `index`: shifted by one each problem, so none always runs first."""
    shift = index % len(variants)
    return [*variants[shift:], *variants[:shift]]


def run_set(
    kind: Any,
    ctx: Context,
    results: Results,
    run: str,
    commit_id: str,
    rerun_loaded: bool = False,
    variants: Sequence[str] = VARIANTS,
    stale: Callable[[dict[str, Any]], bool] = lambda record: False,
) -> None:
    """Every one of `variants` not yet recorded on every problem of `kind`, problem-major, each record written at
    once; a record of a peer that was not running (`unavailable`), or one `stale(record)` says is out of date
    (`--remake`), is made again."""
    for index, problem in enumerate(kind.problems):
        key = kind.key(problem)
        for variant in rotated(variants, index):
            done = results.get(run, key, variant)
            again = done is not None and (bool(done.get("unavailable")) or stale(done))
            if not (to_make(done, rerun_loaded) or again):
                continue
            provenance = {
                "run": run,
                "task_id": key,
                "variant": variant,
                "set": kind.name,
                "commit": commit_id,
            }
            record = measure(lambda v=variant, p=problem: run_variant(v, kind, p, ctx), ctx, provenance)
            results.put(record)
            shown = record.get("error") or _outcome(record)
            print(
                f"{kind.name:<9} {key:<16} {variant:<20} {str(shown)[:60]:<12} {record['tokens']:>6} tokens "
                f"{record['calls']:>2} calls {record['seconds']:>6.1f}s load {record['load'][0]:.2f}-"
                f"{record['load'][1]:.2f}" + (" (loaded)" if loaded(record) else ""),
                file=sys.stderr,
                flush=True,
            )


def _outcome(record: dict[str, Any]) -> str:
    if "solved" in record:
        return "solved" if record["solved"] else "failed"
    if "strict" in record:
        return f"{sum(record['strict'])}/{len(record['strict'])}"
    return "-"


# ------------------------------------------------------------------------------------------ the report


def followed(record: dict[str, Any], mode: str = "strict") -> list[bool]:
    """An IFBench record's verdicts (`mode`: strict or loose); none followed for a record with an error."""
    return [bool(x) for x in record.get(mode) or []]


def all_followed(verdicts: list[bool]) -> bool:
    """Whether a prompt's every instruction was followed (none recorded: not followed)."""
    return bool(verdicts) and all(verdicts)


def solved(record: dict[str, Any]) -> bool:
    """Whether a HumanEval record's answer passes HumanEval's tests (False for a record with an error)."""
    return bool(record.get("solved"))


def at_budget(record: dict[str, Any], variant: str, budget: float) -> dict[str, Any] | None:
    """The answer `variant` gives when cut at `budget` tokens: among its attempts whose cumulative tokens fit (the
    first always counts), the best by the verifier (ties to the earlier) or the last (`PICK`). None when the
    record has no attempts."""
    made = record.get("attempts")
    if variant not in PICK or not made:
        return None
    fitting = [a for a in made if a["tokens"] <= budget] or made[:1]
    if PICK[variant] == "last":
        return dict(fitting[-1])
    return dict(max(enumerate(fitting), key=lambda pair: (pair[1]["reward"], -pair[0]))[1])


def _share(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k}/{n} {100 * k / max(n, 1):.0f}% [{100 * low:.0f}-{100 * high:.0f}]"


def complete_rows(
    kind_name: str, keys: Sequence[str], results: Results, run: str, variants: Sequence[str] = VARIANTS
) -> list[dict[str, Any]]:
    """One row per problem with every one of `variants` recorded (for HumanEval, reflection-graph's record on a
    problem without visible examples is raw's)."""
    rows = []
    for key in keys:
        records = {v: results.get(run, key, v) for v in variants}
        if not all(records.values()):
            continue
        row = {v: dict(r) for v, r in records.items() if r is not None}
        if kind_name == "humaneval" and row[BASELINE].get("no_visible_tests"):
            stand = {k: row["raw"][k] for k in ("solved", "visible", "tokens", "calls") if k in row["raw"]}
            stand.update(prompt_tokens=row["raw"].get("prompt_tokens", 0))
            stand.update(completion_tokens=row["raw"].get("completion_tokens", 0))
            row[BASELINE] = {**row[BASELINE], **stand}
        rows.append(row)
    return rows


def per_problem(rows: list[dict[str, Any]], variant: str = BASELINE, field: str = "tokens") -> float:
    """A variant's mean per problem of a record's `field` over `rows` (0 with no rows); reflection-graph's mean
    tokens, the default, is the budget the others are cut at."""
    return sum(r[variant][field] for r in rows) / max(len(rows), 1)


def summary(
    kind_name: str, rows: list[dict[str, Any]], variants: Sequence[str] = VARIANTS
) -> list[list[Any]]:
    """The table's lines: one per variant of `variants`, then the peer techniques left out (optillm as a whole
    when none of its variants is there)."""
    n = len(rows)
    budget = per_problem(rows)
    lines = []
    for variant in variants:
        records = [r[variant] for r in rows]
        cut = [at_budget(x, variant, budget) or {} for x in records]  # a record with an error: nothing solved
        if kind_name == "humaneval":
            figures = [_share(sum(solved(x) for x in records), n)]
            at = _share(sum(solved(c) for c in cut), n)
        else:
            verdicts = [
                followed(x) or [False] * len(followed(r["raw"])) for x, r in zip(records, rows, strict=True)
            ]
            figures = [
                _share(sum(sum(v) for v in verdicts), sum(len(v) for v in verdicts)),
                _share(sum(all_followed(v) for v in verdicts), n),
            ]
            at = _share(sum(all_followed(followed(c)) for c in cut), n)
        at = at if variant in PICK else "-"
        errors = sum("error" in x for x in records)
        notes = sorted({str(x["note"]) for x in records if x.get("note")})
        lines.append(
            [
                variant,
                *figures,
                at,
                round(per_problem(rows, variant, "completion_tokens")),
                round(per_problem(rows, variant, "prompt_tokens")),
                f"{per_problem(rows, variant, 'calls'):.1f}",
                f"{per_problem(rows, variant, 'seconds'):.1f}",
                errors,
                "; ".join(notes[:2]),
            ]
        )
    width = len(lines[0]) if lines else 9
    optillm_ran = any(v.startswith("optillm-") for v in variants)
    left_out = {
        **LEFT_OUT,
        **(OPTILLM_LEFT_OUT.get(kind_name, {}) if optillm_ran else {"optillm": OPTILLM_NOT_RUN}),
    }
    for name, why in left_out.items():
        lines.append([name, *["-"] * (width - 2), why])
    return lines


def against_default(
    kind_name: str, rows: list[dict[str, Any]], variants: Sequence[str] = VARIANTS
) -> list[str]:
    """Issue 50's question, per variant: its score (problems solved, or instructions followed, strict) beside the
    default's, its tokens as a multiple of the default's, and the problems only one of the two gets. A variant
    beats the default when it scores more, or as much at fewer tokens; the last line names the peers that do (raw
    is not one), or says that none does."""

    def score(record: dict[str, Any]) -> int:
        return sum(followed(record)) if kind_name == "ifbench" else int(solved(record))

    base = [score(r[BASELINE]) for r in rows]
    base_score, base_tokens = sum(base), per_problem(rows)
    lines, beaten_by = [], []
    for variant in variants:
        if variant == BASELINE:
            continue
        scores = [score(r[variant]) for r in rows]
        mine = sum(scores)
        tokens = per_problem(rows, variant)
        pairs = list(zip(rows, scores, base, strict=True))
        gains = [str(r[BASELINE]["task_id"]) for r, theirs, ours in pairs if theirs > ours]
        losses = [str(r[BASELINE]["task_id"]) for r, theirs, ours in pairs if theirs < ours]
        beats = mine > base_score or (mine == base_score and tokens < base_tokens)
        if beats and variant != "raw":
            beaten_by.append(variant)
        ratio = f"{tokens / base_tokens:.2f}x" if base_tokens else "-"
        lines.append(
            f"- {variant}: {mine} against the default's {base_score}, at {ratio} its tokens; better on "
            f"{', '.join(gains) or 'none'}, worse on {', '.join(losses) or 'none'}"
            + ("; beats the default" if beats else "")
        )
    lines.append(
        f"peers that beat the default: {', '.join(beaten_by)}"
        if beaten_by
        else "no peer beats the default: none scores more, none as much at fewer tokens"
    )
    return lines


def heads(kind_name: str) -> list[str]:
    figures = ["solved"] if kind_name == "humaneval" else ["instructions strict", "prompts strict"]
    budget = (
        "solved at the graph's tokens" if kind_name == "humaneval" else "prompts strict at the graph's tokens"
    )
    tail = ["completion tokens", "prompt tokens", "HTTP calls", "seconds", "errors", "note"]
    return ["variant", *figures, budget, *tail]


def report(kind: Any, results: Results, run: str, identity: dict[str, Any]) -> None:
    """The markdown table of one set over its complete problems, and the provenance line."""
    keys = [kind.key(p) for p in kind.problems]
    optillm = [v for v in optillm_variants(kind.name) if any(results.get(run, k, v) for k in keys)]
    variants = [*VARIANTS, *optillm]
    rows = complete_rows(kind.name, keys, results, run, variants)
    print(f"## {kind.name}: {len(rows)} of {len(keys)} problems complete, run {run}")
    print(f"settings: {json.dumps(identity, sort_keys=True)}\n")
    if not rows:
        print("no problem has every variant recorded yet for these settings\n")
        return
    print_table(heads(kind.name), summary(kind.name, rows, variants))
    print(
        "\nagainst the default ("
        + ("instructions followed, strict" if kind.name == "ifbench" else "solved")
        + "):"
    )
    print("\n".join(against_default(kind.name, rows, variants)))
    records = [r[v] for r in rows for v in variants]
    loads = [x for r in records for x in r.get("load") or []]
    budget = per_problem(rows)
    unread = sum(int(r.get("unread") or 0) for r in records)
    print(
        f"\nper problem means; k/n, % and Wilson 95% interval; the graph's tokens: {budget:.0f} per problem "
        f"(attempts cut there; '-': one answer, nothing to cut); replies whose usage could not be read: {unread}; "
        f"1-minute load {min(loads, default=0):.2f}-{max(loads, default=0):.2f}, "
        f"{sum(loaded(x) for x in records)} of {len(records)} records above {LOAD_LIMIT:g} "
        f"(--rerun-loaded makes them again); commits {', '.join(sorted({str(x['commit']) for x in records}))}\n"
    )


# ------------------------------------------------------------------------------------------ main


def _ids(text: str) -> list[int]:
    from bench_code import _ids as parse

    return parse(text)


def identity_of(kind_name: str, gguf_sha: str, args: argparse.Namespace, profile: Any) -> dict[str, Any]:
    """What a record is valid for (not the commit): the set, the GGUF, the server's settings and the peers'."""
    return {
        "version": VERSION,
        "set": kind_name,
        "model": MODEL,
        "gguf_sha256": gguf_sha,
        "n_ctx": profile.n_ctx,
        "n_threads": args.threads,
        "seed": 0,
        "max_tokens": profile.max_tokens,
        "n": args.n,
        "dspy": "ChainOfThought(task -> answer, the answer field described), threshold 1.0",
        "its_hub_temperature": HUB_TEMPERATURE,
    }


def made_before(
    commit_id: str, variants: Sequence[str], repo: Path | None = None
) -> Callable[[dict[str, Any]], bool]:
    """`--remake`'s test of a record: one of `variants` made at a commit that does not have `commit_id` as an
    ancestor (its commit's `+`, uncommitted changes, is ignored; a commit `repo` does not know counts as without
    it, so its record is made again). `repo`: default this checkout. Raises ValueError when `commit_id` is no
    commit of `repo`."""
    if git("rev-parse", "--verify", "--quiet", f"{commit_id}^{{commit}}", cwd=repo).returncode != 0:
        raise ValueError(f"--made-before {commit_id}: not a commit of this repository")
    holds: dict[str, bool] = {}

    def stale(record: dict[str, Any]) -> bool:
        if record.get("variant") not in variants:
            return False
        made = str(record.get("commit") or "").rstrip("+")
        if made not in holds:
            holds[made] = (
                bool(made) and git("merge-base", "--is-ancestor", commit_id, made, cwd=repo).returncode == 0
            )
        return not holds[made]

    return stale


@contextlib.contextmanager
def serving(path: str, profile: Any, threads: int) -> Iterator[str]:
    from _server import llama_server

    with llama_server(path, alias=MODEL, n_ctx=profile.n_ctx, n_threads=threads, seed=0) as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="the sets (default both)")
    parser.add_argument(
        "--ids", default="40-79", help="HumanEval problem numbers, 40-163 only (default 40-79)"
    )
    parser.add_argument(
        "--ifbench-limit", type=int, default=32, help="the first N IFBench prompts (default 32)"
    )
    parser.add_argument("--n", type=int, default=5, help="the peers' attempts or budget (default 5)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama.cpp threads")
    parser.add_argument(
        "--report-only", action="store_true", help="print the tables from the records, run nothing"
    )
    parser.add_argument(
        "--rerun-loaded", action="store_true", help=f"make records at a load > {LOAD_LIMIT:g} again"
    )
    parser.add_argument(
        "--remake",
        nargs="+",
        choices=VARIANTS,
        default=[],
        help="make these variants' records again where they were made before --made-before",
    )
    parser.add_argument(
        "--made-before",
        default=None,
        help="a commit: --remake's variants are made again where their record's commit does not hold it",
    )
    parser.add_argument(
        "--results", type=Path, default=None, help=f"default bench/results/peers-{MODEL}.jsonl"
    )
    parser.add_argument(
        "--optillm-python",
        default=os.environ.get("OPTILLM_PYTHON") or None,
        help="the python of optillm's environment (default $OPTILLM_PYTHON; none: no optillm records)",
    )
    args = parser.parse_args(argv)
    if args.n < 1 or args.ifbench_limit < 1:
        parser.error("--n and --ifbench-limit must be at least 1")
    if bool(args.remake) != bool(args.made_before):
        parser.error("--remake and --made-before go together")
    try:
        stale = made_before(args.made_before, args.remake) if args.remake else (lambda record: False)
    except ValueError as exc:
        parser.error(str(exc))

    from reflection_graph.models.profile import PROFILES

    profile = PROFILES[MODEL]
    try:
        kinds = [
            CodeSet(_ids(args.ids)) if name == "humaneval" else InstructionSet(args.ifbench_limit)
            for name in args.sets
        ]
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = profile.path()
    gguf_sha = file_sha256(path)
    results = Results(args.results or RESULTS_DIR / f"peers-{MODEL}.jsonl")
    runs = {k.name: run_key(identity_of(k.name, gguf_sha, args, profile)) for k in kinds}
    if not args.report_only:
        commit_id = commit()
        with contextlib.ExitStack() as stack:
            upstream = stack.enter_context(serving(path, profile, args.threads))
            url, usage = stack.enter_context(counting_proxy(upstream))
            ctx = Context(base_url=url, usage=usage, max_tokens=profile.max_tokens, n=args.n)
            if args.optillm_python:
                try:
                    ctx.optillm = stack.enter_context(
                        optillm_proxy(args.optillm_python, url, best_of_n=args.n)
                    )
                    print(f"optillm {ctx.optillm.version} at {ctx.optillm.url}", file=sys.stderr, flush=True)
                except OptillmUnavailable as exc:
                    ctx.optillm_why = str(exc)
                    print(f"optillm: {exc}", file=sys.stderr, flush=True)
            for kind in kinds:
                print(f"{kind.name}: run {runs[kind.name]} at {commit_id}", file=sys.stderr, flush=True)
                variants = [*VARIANTS, *(optillm_variants(kind.name) if args.optillm_python else ())]
                run_set(kind, ctx, results, runs[kind.name], commit_id, args.rerun_loaded, variants, stale)
    for kind in kinds:
        report(kind, results, runs[kind.name], identity_of(kind.name, gguf_sha, args, profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
