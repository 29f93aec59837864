"""DocETL-style gleaning over a list of documents: a draft per document (the map), then validate-and-refine rounds.

DocETL's gleaning runs a map prompt on each document, then up to `num_rounds` times asks a validator whether the
output meets `validation_prompt` and, if not, refines it. `create_gleaning_graph` does the same with the reflection
graph as the per-document worker:

```
START -> plan -> (Send "glean" once per document, concurrently) -> collect -> END
```

- `plan` checks the input and fans out one `Send` per document to `glean`, which runs the reflection subgraph on
  it (draft, then critique with the validation prompt as the critic's guidelines, then revise ...).
- At most `max_concurrency` documents run at once (the compiled graph carries `max_concurrency` in its config;
  a run's own `config={"max_concurrency": n}` wins).
- `collect` returns `results` in input order, one entry per document with its own `stop_reason`, `error` and
  `usage`, plus the summed `usage`. A document whose run fails becomes an entry with `stop_reason="error"` and
  the message; the other documents are not affected.

Counting rule: `num_rounds` is DocETL's: the most *refinements* per document. Each document gets one draft and at
most `num_rounds + 1` validations (the last refinement is validated too, so `select="best"` can pick among
validated outputs), i.e. the reflection graph runs with `max_iterations = num_rounds + 1`. A run's
`Context.max_iterations` overrides that per run (it counts validations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Overwrite, Send
from typing_extensions import NotRequired, Required, Unpack

from reflection_graph._runtime import add_role_usage
from reflection_graph.context import Context
from reflection_graph.critics.base import Critic
from reflection_graph.graph import create_reflection_graph
from reflection_graph.settings import Settings, SettingsKwargs, chosen_settings
from reflection_graph.state import Round, StopReason, UsageReport

__all__ = [
    "DOCUMENT_PLACEHOLDER",
    "DocumentResult",
    "GleaningInput",
    "GleaningOutput",
    "GleaningState",
    "create_gleaning_graph",
]

DOCUMENT_PLACEHOLDER = "{document}"
"""Written in `prompt`, it is replaced by the document's text; without it the text is passed as `context`."""

_MAX_ROUNDS = 100


class GleaningInput(TypedDict, total=False):
    """What the gleaning graph takes.

    Attributes:
        documents: the documents, each a string or a mapping with `text` (required), `id` (optional, echoed in
            the result) and `candidate` (optional: an existing output to glean instead of drafting one).
        prompt: the map prompt applied to every document. `{document}` in it is replaced by the document's
            text; without the placeholder the text is given to every role as `context`.
    """

    documents: Required[list[Any]]
    prompt: Required[str]


class DocumentResult(TypedDict):
    """One document's outcome.

    Attributes:
        index: the document's position in the input.
        id: the document's `id` when it had one, else None.
        output: the final output (None when the run failed before any draft).
        score: the final critique's score (0-10), when there is one.
        critique: the final critique (`Critique.model_dump()`), when there is one.
        iterations: validations run.
        stop_reason: `accepted | max_iterations | plateau | not_triggered | budget | error`.
        error: what went wrong when `stop_reason == "error"`.
        usage: tokens, calls and seconds per role for this document.
        trajectory: the rounds, only when the graph was built with `include_trajectory=True`.
    """

    index: int
    id: str | None
    output: str | None
    score: float | None
    critique: dict[str, Any] | None
    iterations: int
    stop_reason: StopReason
    error: str | None
    usage: UsageReport
    trajectory: NotRequired[list[Round]]


class GleaningOutput(TypedDict, total=False):
    """What the gleaning graph returns.

    Attributes:
        results: one `DocumentResult` per input document, in input order.
        usage: usage per role summed over all documents.
    """

    results: list[DocumentResult]
    usage: UsageReport


class _DocumentTask(TypedDict):
    """The payload of one `Send` to `glean`."""

    index: int
    document: Any
    prompt: str


def _add_results(
    left: list[DocumentResult] | None, right: list[DocumentResult] | None
) -> list[DocumentResult]:
    """Reducer: gather the results the concurrent `glean` tasks write in one step."""
    return [*(left or []), *(right or [])]


class GleaningState(GleaningInput, GleaningOutput, total=False):
    """The overall state; `rg_doc_results` is internal (reset at the start of every run)."""

    rg_doc_results: Annotated[list[DocumentResult], _add_results]


def _check_documents(documents: Any, prompt: Any) -> None:
    if not isinstance(documents, list):
        raise ValueError(
            f"'documents' must be a list of strings or {{'text': ...}} mappings, got {type(documents).__name__}"
        )
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(
            "'prompt' must be a non-empty string, e.g. 'Summarize this document in one sentence: {document}'"
        )
    for index, document in enumerate(documents):
        if isinstance(document, str):
            continue
        if isinstance(document, Mapping) and isinstance(document.get("text"), str):
            candidate = document.get("candidate")
            if candidate is not None and not isinstance(candidate, str):
                raise ValueError(f"documents[{index}]['candidate'] must be a string or absent")
            continue
        raise ValueError(
            f"documents[{index}] must be a string or a mapping with a string 'text' "
            f"(and optional 'id', 'candidate'), got {type(document).__name__}"
        )


def _reflection_input(task: _DocumentTask) -> dict[str, Any]:
    document = task["document"]
    text = document if isinstance(document, str) else str(document["text"])
    prompt = task["prompt"]
    inputs: dict[str, Any]
    if DOCUMENT_PLACEHOLDER in prompt:
        inputs = {"task": prompt.replace(DOCUMENT_PLACEHOLDER, text)}
    else:
        inputs = {"task": prompt, "context": text}
    if isinstance(document, Mapping) and document.get("candidate"):
        inputs["candidate"] = document["candidate"]
    return inputs


def _document_id(document: Any) -> str | None:
    if isinstance(document, Mapping) and document.get("id") is not None:
        return str(document["id"])
    return None


def _sum_usage(reports: Sequence[UsageReport]) -> UsageReport:
    total: UsageReport = {}
    for report in reports:
        for role, usage in (report or {}).items():
            total[role] = add_role_usage(total.get(role), usage)
    return total


class _Gleaner:
    """The node functions, closed over the compiled per-document reflection graph."""

    def __init__(self, reflection: Any, include_trajectory: bool) -> None:
        self.reflection = reflection
        self.include_trajectory = include_trajectory

    def plan(self, state: GleaningState) -> dict[str, Any]:
        _check_documents(state.get("documents"), state.get("prompt"))
        return {"rg_doc_results": Overwrite([])}

    def fan_out(self, state: GleaningState) -> list[Send] | Literal["collect"]:
        documents = list(state.get("documents") or [])
        if not documents:
            return "collect"
        prompt = str(state["prompt"])
        return [
            Send("glean", _DocumentTask(index=i, document=doc, prompt=prompt))
            for i, doc in enumerate(documents)
        ]

    def _result(self, task: _DocumentTask, out: Mapping[str, Any]) -> dict[str, Any]:
        critique = out.get("critique")
        result: DocumentResult = {
            "index": task["index"],
            "id": _document_id(task["document"]),
            "output": out.get("candidate") or None,
            "score": (critique or {}).get("score"),
            "critique": critique,
            "iterations": int(out.get("iterations") or 0),
            "stop_reason": out.get("stop_reason") or "error",
            "error": out.get("error"),
            "usage": dict(out.get("usage") or {}),
        }
        if self.include_trajectory:
            result["trajectory"] = list(out.get("trajectory") or [])
        return {"rg_doc_results": [result]}

    def _failure(self, task: _DocumentTask, exc: Exception) -> dict[str, Any]:
        result: DocumentResult = {
            "index": task["index"],
            "id": _document_id(task["document"]),
            "output": None,
            "score": None,
            "critique": None,
            "iterations": 0,
            "stop_reason": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "usage": {},
        }
        if self.include_trajectory:
            result["trajectory"] = []
        return {"rg_doc_results": [result]}

    def glean(self, task: _DocumentTask, config: RunnableConfig) -> dict[str, Any]:
        try:
            out = self.reflection.invoke(_reflection_input(task), config)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # one document's failure must not lose the others
            return self._failure(task, exc)
        return self._result(task, out)

    async def aglean(self, task: _DocumentTask, config: RunnableConfig) -> dict[str, Any]:
        try:
            out = await self.reflection.ainvoke(_reflection_input(task), config)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # one document's failure must not lose the others
            return self._failure(task, exc)
        return self._result(task, out)

    def collect(self, state: GleaningState) -> dict[str, Any]:
        results = sorted(state.get("rg_doc_results") or [], key=lambda r: r["index"])
        return {"results": results, "usage": _sum_usage([r["usage"] for r in results])}


_GLEANING: dict[str, Any] = {"strategy": "loop", "n_revisions": 1}
"""The settings gleaning sets unless its caller does: it refines, one revision a round."""


def create_gleaning_graph(
    generator: Any = None,
    *,
    validation_prompt: str | None,
    num_rounds: int = 2,
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None,
    max_concurrency: int = 8,
    critic: Any = None,
    reviser: Any = None,
    base_url: str | None = None,
    include_trajectory: bool = False,
    checkpointer: Checkpointer = None,
    store: Any = None,
    name: str = "gleaning",
    settings: Settings | None = None,
    **values: Unpack[SettingsKwargs],
) -> CompiledStateGraph[GleaningState, Context, GleaningInput, GleaningOutput]:
    """Create a compiled graph that maps a prompt over documents and gleans each output (DocETL's gleaning).

    Args:
        generator: the model that drafts and refines: a `BaseChatModel`, a model string (`"openai:gpt-4o-mini"`,
            `"local:/path.gguf"`, `"embedded"`), a callable `fn(prompt) -> str`, or None for the embedded model.
        validation_prompt: what a good output must satisfy (DocETL's `validation_prompt`); it becomes the LLM
            critic's guidelines. Required with a model critic; must be None when `critic` is a `Critic` instance
            (such a critic has its own rules and would ignore it).
        num_rounds: the most refinements per document (>= 1); see the module docs for the counting rule.
        should_refine: DocETL's `if`: a predicate on the per-document reflection state (`task`, `candidate`,
            `critique`, ...), checked before validating a given `candidate` and before each refinement. False
            stops that document with `not_triggered`; an exception is reported as that document's error.
        max_concurrency: the most documents processed at once (>= 1).
        critic: the validator: a model spec as for `generator` (None reuses the generator at temperature 0) or
            a `Critic` instance such as `CodeTestCritic`.
        reviser: model spec for refinements; None reuses the generator.
        base_url: OpenAI-compatible server for string model names.
        include_trajectory: add each document's rounds to its result.
        checkpointer: passed to `compile`.
        store: passed to `compile`.
        name: the compiled graph's name.
        settings: a `reflection_graph.Settings` for the per-document loop, made ahead, as
            `create_reflection_graph` takes it; `max_iterations` comes from `num_rounds`.
        **values: any field of `reflection_graph.Settings` for the per-document loop (`score_threshold`,
            `select`, `prompts`, `retries`, `timeout_s`, ...), over `settings`, validated as
            `create_reflection_graph` does. Unless given, `strategy` is "loop" and `n_revisions` 1 (gleaning
            refines one revision a round, also with a verifier critic).

    Returns:
        A `CompiledStateGraph` taking `{"documents": [...], "prompt": "..."}` and returning `results` (one
        `DocumentResult` per document, in input order) and the summed `usage`.

    Raises:
        ValueError: an argument is out of range; the message names the fix. Bad input (`documents` not a list,
            an empty `prompt`, an item that is neither a string nor a mapping with `text`) fails the run at its
            first step with a `ValueError` naming the item.

    Example:
        ```python
        from reflection_graph.gleaning import create_gleaning_graph

        graph = create_gleaning_graph(
            "openai:gpt-4o-mini",
            validation_prompt="The summary must name the product and be one sentence.",
            num_rounds=2,
        )
        out = graph.invoke({"documents": ["...", "..."], "prompt": "Summarize: {document}"})
        for result in out["results"]:
            print(result["index"], result["stop_reason"], result["output"])
        ```
    """
    if isinstance(num_rounds, bool) or not isinstance(num_rounds, int) or not 1 <= num_rounds <= _MAX_ROUNDS:
        raise ValueError(
            f"num_rounds must be an int between 1 and {_MAX_ROUNDS} (the most refinements per document), "
            f"got {num_rounds!r}"
        )
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
    chosen = chosen_settings(settings, values)
    if "max_iterations" in chosen.given:
        raise ValueError("pass num_rounds (the most refinements per document), not max_iterations")
    if should_refine is not None and not callable(should_refine):
        raise ValueError("should_refine must be a callable taking the document's state and returning a bool")
    if isinstance(critic, Critic):
        if validation_prompt is not None:
            raise ValueError(
                f"validation_prompt is only used by a model critic, but critic is a {type(critic).__name__}; "
                "pass validation_prompt=None or give the rules to the critic itself"
            )
    elif not isinstance(validation_prompt, str) or not validation_prompt.strip():
        raise ValueError(
            "validation_prompt must be a non-empty string saying what a good output satisfies, e.g. "
            "'The summary names every person mentioned in the document.'"
        )
    reflection = create_reflection_graph(
        generator,
        critic=critic,
        reviser=reviser,
        should_refine=should_refine,
        critic_guidelines=validation_prompt,
        base_url=base_url,
        name=f"{name}_document",
        # gleaning refines: one revision a round, also with a verifier critic (whose graph default is fresh drafts)
        settings=chosen.apply(
            {
                **{k: v for k, v in _GLEANING.items() if k not in chosen.given},
                "max_iterations": num_rounds + 1,
            }
        ),
    )
    gleaner = _Gleaner(reflection, include_trajectory)
    builder = StateGraph(
        GleaningState, context_schema=Context, input_schema=GleaningInput, output_schema=GleaningOutput
    )
    builder.add_node("plan", gleaner.plan)
    builder.add_node(
        "glean", RunnableLambda(gleaner.glean, afunc=gleaner.aglean, name="glean"), input_schema=_DocumentTask
    )
    builder.add_node("collect", gleaner.collect)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", gleaner.fan_out, ["glean", "collect"])
    builder.add_edge("glean", "collect")
    builder.add_edge("collect", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name=name)
    return compiled.with_config(max_concurrency=max_concurrency)
