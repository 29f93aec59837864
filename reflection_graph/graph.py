"""`create_reflection_graph`: validate the settings, resolve the roles, wire generate -> critique -> finalize.

Counting rule
-------------
A *round* is one critique. `iterations` counts rounds, and the `critique` node stops the loop (it sets
`stop_reason`) as soon as `iterations == max_iterations`: an explicit counter in state, never LangGraph's recursion
limit. `generate` checks the same limit before it drafts or revises, so a checkpointed run resumed with a lower
`max_iterations` stops at once (with a warning when the stored run already ran past it). One router a round: the
conditional edge after `critique` reads `stop_reason`.

With the `loop` strategy and a model critic, a run makes at most
`max_model_calls(max_iterations, retries=..., parse_retries=..., n_drafts=..., n_revisions=...)` model calls:
`n_drafts` drafts in round 1 (none when an existing `candidate` is gleaned), `n_revisions` revisions in each later
round, one critique per candidate (re-asked up to `parse_retries` times when it cannot be parsed), and every one of
these calls retried at most `retries` times (transient errors, empty replies). With the defaults that is 2 calls per
round when nothing fails.

Strategies (reflection_graph/strategies/, one module each) share these nodes and decide the rest: the settings
they force (also against a run's `Context`), their edges after `critique`, what the next revision starts from,
which stop rules apply, and their own bound on model calls (`Strategy.max_model_calls(settings)`). The `tree`
strategy adds a `select` node after each critique that picks the most promising candidate so far to revise next:
the same calls, so the loop's bound; `self_refine` adds its uncritiqued refine to it.

Settings: one `Settings` (keyword arguments, or `settings=` as it is), with the setup's defaults (a verifier critic's
fresh drafts, `loop._defaults`) under the fields the caller did not set, then what the strategy forces
(`_layered_settings`).

Budgets: with `token_budget` or `time_budget_s`, the call layer admits each of those calls against what the
run has left (reflection_graph/_runtime/_budget.py): its reply limit is cut to what is left, and a call
without room for a useful reply is not started; the run then stops with `stop_reason="budget"` after that
step, returning its best candidate so far. `n_drafts`/`n_revisions` samples are cut to what the budget covers.
A budget only removes calls (a cut reply limit never adds one), so `max_model_calls` stays a true bound.

The `self_refine` strategy is one Self-Refine pass: draft, one critique, and (unless accepted) one revision that
is returned without a second critique.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict, get_type_hints

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer
from typing_extensions import Unpack

from reflection_graph import strategies
from reflection_graph._runtime import max_model_calls
from reflection_graph.context import Context
from reflection_graph.critics.base import Critic
from reflection_graph.loop import (
    ModelLike,
    Overrides,
    Roles,
    Setup,
    make_nodes,
    resolve,
    setup_defaults,
    setup_of,
)
from reflection_graph.loop import as_critic as _as_critic
from reflection_graph.settings import MAX_ITERATIONS, Settings, SettingsKwargs, chosen_settings
from reflection_graph.state import CritiqueReads, GenerateReads, InputState, OutputState, ReflectionState

__all__ = ["build_reflection_graph", "create_reflection_graph", "max_model_calls"]

_MEMORY_METHODS = ("search", "asearch", "save", "asave", "lessons_from_critiques", "format_lessons")


def _with_keys(reads: type, extra: type | None) -> type:
    """The TypedDict `reads` with the keys of `extra` added (a strategy's own state keys), or `reads` itself."""
    if extra is None:
        return reads
    hints = {**get_type_hints(reads, include_extras=True), **get_type_hints(extra, include_extras=True)}
    return TypedDict(f"{reads.__name__}With{extra.__name__}", hints, total=False)  # type: ignore[operator]


def _layered_settings(
    critic: Any, settings: Settings | None, values: Mapping[str, Any], *, human_review: bool = False
) -> Settings:
    """The settings a graph is built with, in layers: `Settings`' defaults; the setup's defaults (a verifier
    critic's fresh drafts, `loop._defaults.setup_defaults`; none with `human_review`) for what the caller did not
    set; what the caller set (`settings`, then `values` over it). The strategy's forced values are applied after,
    by the strategy.

    Raises:
        TypeError: `settings` is no `Settings`, or a name in `values` is no setting.
        ValueError: a value is out of range (validated once, where it enters).
    """
    chosen = chosen_settings(settings, values)
    return setup_defaults(critic, chosen, human_review=human_review)


def build_reflection_graph(
    generator: ModelLike = None,
    *,
    critic: ModelLike | Critic = None,
    reviser: ModelLike = None,
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None,
    critic_guidelines: str | None = None,
    memory: Any = None,
    human_review: bool = False,
    base_url: str | None = None,
    settings: Settings | None = None,
    **values: Unpack[SettingsKwargs],
) -> StateGraph[ReflectionState, Context, InputState, OutputState]:
    """Build the uncompiled reflection `StateGraph`; see `create_reflection_graph` for the arguments. Its nodes
    keep the strategy object they were wired for, whatever the registry holds later."""
    built = _layered_settings(critic, settings, values, human_review=human_review)
    strategy = strategies.get(built.strategy)
    built = strategy.force(built)
    strategy.check(human_review=human_review)
    if should_refine is not None and not callable(should_refine):
        raise ValueError("should_refine must be a callable taking the state and returning a bool")
    if memory is not None:
        missing = [m for m in _MEMORY_METHODS if not callable(getattr(memory, m, None))]
        if missing:
            raise ValueError(f"memory must be a reflection_graph.ReflexionMemory (missing {missing[0]}())")
    gen_model = resolve(generator, "generator", base_url)
    reviser_model = resolve(reviser, "reviser", base_url) if reviser is not None else gen_model
    critic_obj = _as_critic(critic, gen_model, built, base_url=base_url, guidelines=critic_guidelines)
    roles = Roles(gen_model, reviser_model, critic_obj)
    overrides = Overrides(
        built,
        roles,
        base_url=base_url,
        guidelines=critic_guidelines,
        default_critic=critic is None,
        strategy=strategy,
    )
    setup = Setup(overrides, strategy, should_refine, memory)

    builder = StateGraph(
        ReflectionState, context_schema=Context, input_schema=InputState, output_schema=OutputState
    )
    reads = {"generate": _with_keys(GenerateReads, strategy.state), "critique": CritiqueReads}
    for name, node in make_nodes(setup).items():  # each reads what it needs
        builder.add_node(name, node, input_schema=reads.get(name, ReflectionState))
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "critique")  # a stopped generate leaves nothing to judge: critique passes
    strategy.wire(builder, human_review=human_review)
    builder.add_edge("finalize", END)
    return builder


def create_reflection_graph(
    generator: ModelLike = None,
    *,
    critic: ModelLike | Critic = None,
    reviser: ModelLike = None,
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None,
    critic_guidelines: str | None = None,
    memory: Any = None,
    human_review: bool = False,
    base_url: str | None = None,
    checkpointer: Checkpointer = None,
    store: Any = None,
    name: str = "reflection",
    settings: Settings | None = None,
    **values: Unpack[SettingsKwargs],
) -> CompiledStateGraph[ReflectionState, Context, InputState, OutputState]:
    """Create a compiled draft -> critique -> revise graph.

    Args:
        generator: the drafting model: a `BaseChatModel`, an `init_chat_model` string (`"openai:gpt-4o-mini"`),
            `"local:/path/model.gguf"`, a plain callable `fn(prompt: str) -> str`, or None for the embedded model.
        critic: a `Critic` (e.g. `CodeTestCritic`, `CompositeCritic`) or a model spec as for `generator`; None
            uses the generator's model at temperature 0.
        reviser: model spec for revisions; None reuses the generator.
        should_refine: predicate on the state, checked before critiquing a given `candidate` and before each
            revision; False stops with `not_triggered`; an exception stops with `error` and a message.
        critic_guidelines: domain guidelines added to the LLM critic's prompt.
        memory: a `ReflexionMemory`; lessons from earlier similar tasks go into the draft prompt and this run's
            lessons are saved by `finalize`. Without its own store it uses the graph's `store`.
        human_review: pause after each critique with `interrupt` so a person can accept or add feedback
            (needs a checkpointer).
        base_url: OpenAI-compatible server for string model names.
        checkpointer: passed to `compile` (e.g. `SqliteSaver`, `PostgresSaver`).
        store: passed to `compile` (e.g. `InMemoryStore`, `SqliteStore`, `PostgresStore`).
        name: the compiled graph's name.
        settings: a `reflection_graph.Settings` made ahead (the CLI passes its own), used as it is: the fields
            it was given count as set, the others as defaults. Keyword settings (`**values`) go over it.
        **values: any field of `reflection_graph.Settings`, each validated here: `max_iterations` (3),
            `min_iterations` (1), `score_threshold` (None: the critic's verdict decides; set: `score >= threshold`
            accepts and the bar is written into the critic prompt), `min_improvement` (0.5) and `patience` (2)
            for the plateau stop, `stop_on_no_new_issues` (True), `select` ("best" or "last"), `strategy`
            (a name in `reflection_graph.strategies`: "loop", "self_refine", "resample", "tree" or one you
            registered),
            `n_drafts` and `n_revisions` (1: samples per round, best kept), `preserve_correct`, `focus`
            ("general", "code", "reasoning", "format"; a critic that declares itself a verifier, such as
            `InstructionCritic` or, under "code", `CodeTestCritic`, defaults to `strategy="resample"`,
            `n_drafts=1`, `n_revisions=2`, `max_iterations=3` where you set none of them and `human_review` is
            off: `loop._defaults.VERIFIER_DEFAULTS`, the same from Python, the CLI and a server),
            `history_window`,
            `prompts` (overrides keyed by role), `parse_retries`, `on_parse_error` ("feedback" or "raise"),
            `retries`, `timeout_s`, and the whole run's `token_budget` and `time_budget_s` (None: no budget).

    Returns:
        A `CompiledStateGraph` taking `{"task", "candidate"?, "context"?}` and returning `candidate`,
        `critique`, `trajectory`, `iterations`, `stop_reason`, `error` and `usage`. Its recursion limit is
        raised (`with_config`) so that it never cuts a run short of `max_iterations` rounds, also as a subgraph.

    Raises:
        ValueError: a setting is out of range or a model spec cannot be resolved; the message names the fix.
        TypeError: an unknown argument, or `settings` is no `Settings`.

    Example:
        ```python
        from reflection_graph import create_reflection_graph

        graph = create_reflection_graph("openai:gpt-4o-mini", max_iterations=3, score_threshold=8)
        result = graph.invoke({"task": "Write a polite email declining a job offer"})
        print(result["candidate"], result["stop_reason"])
        ```
    """
    builder = build_reflection_graph(
        generator,
        critic=critic,
        reviser=reviser,
        should_refine=should_refine,
        critic_guidelines=critic_guidelines,
        memory=memory,
        human_review=human_review,
        base_url=base_url,
        settings=settings,
        **values,
    )
    strategy = setup_of(builder).strategy  # the object the nodes were wired for, not a new lookup
    steps_per_round = strategy.steps_per_round(human_review=human_review)
    graph = builder.compile(checkpointer=checkpointer, store=store, name=name)
    # a run may raise max_iterations through its Context, up to MAX_ITERATIONS: the counter is the real bound
    return graph.with_config(recursion_limit=steps_per_round * MAX_ITERATIONS + 4)
