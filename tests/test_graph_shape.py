"""The graph's shape (`get_graph()`'s nodes and edges) and what each option changes in it.

Written from the design (DESIGN.md, "The graph"), not copied from the drawing: `generate` drafts and revises,
`critique` judges, `finalize` picks the answer, one conditional edge after `critique` goes back to `generate` or on to
`finalize`, and `human_review` puts a `review` node (an `interrupt`) between the critique and that route.

Only `human_review` changes the shape. `strategy`, `score_threshold` and `should_refine` are decided inside the
nodes and routers, so each is asserted to leave the shape exactly as it is; what the strategy changes is the route a
run takes, asserted below from the model calls a run makes (the threshold's and the trigger's effects on a run are
in tests/test_graph.py). Combinations of these options are not drawn one by one: none of them can add a node or an
edge. The README picture's own Mermaid and DOT text are checked in tests/test_graph_picture.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.graph import END, START

from reflection_graph import create_reflection_graph
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

Edge = tuple[str, str]


def graph(**options: Any) -> Any:
    return create_reflection_graph(
        RecordingChatModel(), critic=FakeCriticModel(critiques=[critique(1)]), **options
    )


def shape(**options: Any) -> tuple[set[str], dict[Edge, bool]]:
    """Node names, and each edge (source, target) with whether it is conditional."""
    drawn = graph(**options).get_graph()
    return set(drawn.nodes), {(e.source, e.target): e.conditional for e in drawn.edges}


def successors(edges: dict[Edge, bool], node: str) -> set[str]:
    return {target for source, target in edges if source == node}


def test_the_loop_goes_back_from_critique_to_generate_and_nowhere_else() -> None:
    nodes, edges = shape()
    assert nodes == {START, "generate", "critique", "finalize", END}
    assert successors(edges, START) == {"generate"} and edges[(START, "generate")] is False
    # The one route of the loop: after a critique, revise or finish, decided by a router (a conditional edge).
    assert successors(edges, "critique") == {"generate", "finalize"}
    assert edges[("critique", "generate")] is True and edges[("critique", "finalize")] is True
    # A draft or a revision is critiqued next, always: one router a round, after the critique (a stopped generate
    # leaves nothing to judge and the critique passes it on).
    assert successors(edges, "generate") == {"critique"} and edges[("generate", "critique")] is False
    assert successors(edges, "finalize") == {END} and edges[("finalize", END)] is False
    assert successors(edges, END) == set()
    assert not any(target == START for _, target in edges)
    assert not any(source == target for source, target in edges)


def test_human_review_puts_a_review_node_between_the_critique_and_its_route() -> None:
    nodes, edges = shape(human_review=True)
    plain_nodes, plain_edges = shape()
    assert nodes == plain_nodes | {"review"}
    assert successors(edges, "critique") == {"review"} and edges[("critique", "review")] is False
    assert successors(edges, "review") == {"generate", "finalize"}
    assert edges[("review", "generate")] is True and edges[("review", "finalize")] is True
    # Nothing else moves: the review node takes over the critique's way out, and only that.
    assert {e for e in edges if "review" not in e} == {e for e in plain_edges if e[0] != "critique"}
    assert not any(target == "review" and source != "critique" for source, target in edges)


@pytest.mark.parametrize("human_review", [False, True])
@pytest.mark.parametrize(
    "option",
    [
        {"strategy": "self_refine"},
        {"score_threshold": 8.0},
        {"should_refine": lambda state: True},
        {"strategy": "self_refine", "score_threshold": 8.0, "should_refine": lambda state: True},
    ],
    ids=["self_refine", "threshold", "trigger", "all-three"],
)
def test_options_decided_inside_the_nodes_do_not_change_the_shape(
    human_review: bool, option: dict[str, Any]
) -> None:
    assert shape(human_review=human_review, **option) == shape(human_review=human_review)


def model_calls(**options: Any) -> tuple[int, int, list[str]]:
    """Generator calls, critic calls and the answer of one run, with a critic that rejects every candidate and
    rounds that no plateau or repeated issue may end early (`min_iterations=3`)."""
    gen, crit = RecordingChatModel(), FakeCriticModel(critiques=[critique(1)])
    graph = create_reflection_graph(gen, critic=crit, max_iterations=3, min_iterations=3, **options)
    result = graph.invoke({"task": "Write a haiku"})
    return len(gen.received), len(crit.received), [result["candidate"], result["stop_reason"]]


def test_the_strategies_differ_in_the_route_a_run_takes() -> None:
    # The loop: a draft and two revisions, each critiqued; the third critique is the last round (max_iterations=3).
    assert model_calls() == (3, 3, ["draft 3", "max_iterations"])
    # Self-Refine: draft, one critique, one refine that is returned without a second critique, whatever the limit.
    assert model_calls(strategy="self_refine") == (2, 1, ["draft 2", "max_iterations"])
