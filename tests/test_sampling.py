"""Best-of-N: `n_drafts` first drafts and `n_revisions` revisions per round, sampled in parallel and judged."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from reflection_graph import create_reflection_graph, max_model_calls
from tests.fakes import FakeCriticModel, SeededModel, critique


def by_seed(scores: dict[int, float], ok_at: float = 11) -> Any:
    def judge(messages: list[BaseMessage]) -> dict[str, Any]:
        text = str(messages[-1].content)
        seed = int(text.split("seed=")[1].split()[0])
        score = scores.get(seed, 1.0)
        return critique(score, ok=score >= ok_at, issues=[] if score >= ok_at else [f"seed {seed} weak"])

    return judge


def run(graph: Any, mode: str, task: str = "t") -> dict[str, Any]:
    return graph.invoke({"task": task}) if mode == "sync" else asyncio.run(graph.ainvoke({"task": task}))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_best_of_n_drafts_keeps_the_best_and_records_every_sample(mode: str) -> None:
    gen = SeededModel(seed=10)
    crit = FakeCriticModel(critiques=[by_seed({10: 3.0, 11: 8.0, 12: 5.0})])
    graph = create_reflection_graph(gen, critic=crit, n_drafts=3, max_iterations=1)
    result = run(graph, mode)
    first = result["trajectory"][0]
    samples = first["samples"]
    # the first sample is the generator's own call (never worse than no loop); the others distinct seeds, warmer
    assert [s["candidate"] for s in samples] == [
        "sample seed=10 t=0.0",
        "sample seed=11 t=0.7",
        "sample seed=12 t=0.7",
    ]
    assert [s["score"] for s in samples] == [3.0, 8.0, 5.0]
    assert first["candidate"] == result["candidate"] == "sample seed=11 t=0.7" and first["score"] == 8.0
    usage = result["usage"]
    assert usage["generate"]["calls"] == 3 and usage["critique"]["calls"] == 3
    assert first["usage"]["total"]["calls"] == 6 == sum(s["usage"]["total"]["calls"] for s in samples)
    assert len(gen.received) + len(crit.received) <= max_model_calls(1, n_drafts=3)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_first_draft_is_the_greedy_call_whatever_the_models_temperature(mode: str) -> None:
    """Never worse than no loop: sample 0 of the first round is the model at temperature 0 (its seed and all
    else kept); the other drafts keep the model's own temperature, and a revision round's samples are not greedy."""
    gen = SeededModel(seed=10, temperature=0.9)
    crit = FakeCriticModel(critiques=[by_seed({})])
    graph = create_reflection_graph(
        gen, critic=crit, n_drafts=3, n_revisions=2, max_iterations=2, patience=None
    )
    result = run(graph, mode)
    first, second = result["trajectory"]
    assert [s["candidate"] for s in first["samples"]] == [
        "sample seed=10 t=0.0",
        "sample seed=11 t=0.9",
        "sample seed=12 t=0.9",
    ]
    assert [s["candidate"] for s in second["samples"]] == ["sample seed=10 t=0.9", "sample seed=11 t=0.9"]
    assert gen.temperature == 0.9  # the model passed in is never changed


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_greedy_draft_wins_ties_against_warmer_samples(mode: str) -> None:
    """Equal scores and equal checks: the round keeps sample 0 (the greedy call); a warmer one must beat it."""
    crit = FakeCriticModel(critiques=[by_seed({10: 6.0, 11: 6.0, 12: 6.0})])
    graph = create_reflection_graph(SeededModel(seed=10), critic=crit, n_drafts=3, max_iterations=1)
    result = run(graph, mode)
    assert result["trajectory"][0]["candidate"] == result["candidate"] == "sample seed=10 t=0.0"
    crit = FakeCriticModel(critiques=[by_seed({10: 6.0, 11: 6.0, 12: 6.5})])
    graph = create_reflection_graph(SeededModel(seed=10), critic=crit, n_drafts=3, max_iterations=1)
    assert run(graph, mode)["candidate"] == "sample seed=12 t=0.7"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_n_revisions_samples_each_revision_round(mode: str) -> None:
    # a revision (its prompt holds the critique's issue) is a new text, not its draft again (a repeat is no round)
    gen = SeededModel(
        seed=0,
        reply_of=lambda seed, t, prompt: f"{'revised' if 'weak' in prompt else 'drafted'} seed={seed} t={t}",
    )
    crit = FakeCriticModel(critiques=[by_seed({0: 2.0, 1: 6.0, 2: 4.0})])
    graph = create_reflection_graph(gen, critic=crit, n_revisions=3, max_iterations=2, patience=None)
    result = run(graph, mode)
    assert [len(r.get("samples", [None])) for r in result["trajectory"]] == [1, 3]
    revised = ["revised seed=0 t=0.0", "revised seed=1 t=0.7", "revised seed=2 t=0.7"]
    assert [s["candidate"] for s in result["trajectory"][1]["samples"]] == revised
    assert result["trajectory"][1]["score"] == 6.0 and result["usage"]["revise"]["calls"] == 3
    made = len(gen.received) + len(crit.received)
    assert made == 1 + 1 + 3 + 3 <= max_model_calls(2, n_revisions=3)


def test_with_a_threshold_the_sync_search_stops_at_the_first_passing_draft() -> None:
    gen = SeededModel(seed=0)
    crit = FakeCriticModel(critiques=[by_seed({0: 4.0, 1: 9.0, 2: 10.0, 3: 10.0}, ok_at=8)])
    result = create_reflection_graph(gen, critic=crit, n_drafts=4, score_threshold=8).invoke({"task": "t"})
    assert result["stop_reason"] == "accepted" and result["candidate"] == "sample seed=1 t=0.7"
    assert len(crit.received) == 2  # seeds 0 and 1 judged; 2 and 3 never needed
    assert [s["score"] for s in result["trajectory"][0]["samples"]] == [4.0, 9.0]


def test_with_a_threshold_the_async_search_cancels_the_critiques_still_running() -> None:
    gen = SeededModel(seed=0)
    crit = FakeCriticModel(critiques=[by_seed({0: 9.0}, ok_at=8)])
    started: list[int] = []
    cancelled: list[int] = []
    finished: list[int] = []

    async def judge_slowly(messages: list[BaseMessage], **kw: Any) -> Any:
        seed = int(str(messages[-1].content).split("seed=")[1].split()[0])
        if seed != 0:  # the passing draft is judged at once, the others would take 5 s
            started.append(seed)
            try:
                await asyncio.sleep(5.0)
            except asyncio.CancelledError:
                cancelled.append(seed)
                raise
            finished.append(seed)
        return crit._generate(messages)

    crit.__dict__["_agenerate"] = judge_slowly
    result = asyncio.run(
        create_reflection_graph(gen, critic=crit, n_drafts=4, score_threshold=8).ainvoke({"task": "t"})
    )
    assert result["stop_reason"] == "accepted" and result["candidate"] == "sample seed=0 t=0.0"
    # the three slow critiques were all under way, and each was cancelled, none awaited to its end
    assert sorted(started) == [1, 2, 3] and sorted(cancelled) == [1, 2, 3] and finished == []
    assert len(crit.received) == 1  # only the passing draft's critique got to the model


class Gauge:
    """Counts calls in flight, and the most at once (a count, not a wall-clock reading)."""

    def __init__(self) -> None:
        self.now = self.peak = self.calls = 0

    @contextlib.asynccontextmanager
    async def held(self, seconds: float) -> Any:
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            # long enough for the other samples' calls to start, if they run together
            await asyncio.sleep(seconds)
            yield
        finally:
            self.now -= 1


def test_n_drafts_run_concurrently() -> None:
    """4 drafts are generated at once, and judged at once: the most calls in flight is 4 for each role (1 if the
    samples ran one after another)."""
    drafts, critiques = Gauge(), Gauge()

    class GaugedModel(SeededModel):
        async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> Any:
            async with drafts.held(0.2):
                return await super()._agenerate(messages)

    async def judge(messages: list[BaseMessage], **kw: Any) -> Any:
        async with critiques.held(0.2):
            return crit._generate(messages)

    crit = FakeCriticModel(critiques=[by_seed({})])
    crit.__dict__["_agenerate"] = judge
    graph = create_reflection_graph(GaugedModel(seed=0), critic=crit, n_drafts=4, max_iterations=1)
    result = asyncio.run(graph.ainvoke({"task": "t"}))
    assert len(result["trajectory"][0]["samples"]) == 4
    assert (drafts.calls, drafts.peak) == (4, 4)
    assert (critiques.calls, critiques.peak) == (4, 4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_drafts": 0}, "n_drafts must be >= 1"),
        ({"n_drafts": 17}, "n_drafts must be <= 16"),
        ({"n_revisions": 0}, "n_revisions must be >= 1"),
        ({"n_drafts": 2.5}, "n_drafts must be an int"),
    ],
)
def test_bad_sample_counts_fail_when_the_graph_is_built(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_reflection_graph(lambda p: "x", critic=lambda p: "{}", **kwargs)
