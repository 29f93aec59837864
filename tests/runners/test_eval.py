"""`evaluate` / `reflection-graph eval`: every round scored against ground truth, the figures, the files, bad input.

A scripted quiz: four questions, three rounds each (min = max = 3). The generator's answers and the critic's
scores are fixed per question, so every figure of the report can be worked out by hand (see `EXPECTED`).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from reflection_graph import cli, create_reflection_graph, evaluate
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critique import Critique
from reflection_graph.models import resolve_model
from reflection_graph.runners.scorers import ScorerError, make_scorer
from tests.fakes import RecordingChatModel

PIL = pytest.importorskip("PIL.Image", reason='needs pip install "reflection-graph[eval]"')

# question id -> (reference, answers of rounds 1..3); each revision differs from its input (a revision that
# repeats it is no round)
QUIZ: dict[str, tuple[str, list[str]]] = {
    "Q1": ("Paris", ["Berlin", "Paris", "It is Paris"]),  # wrong -> right
    "Q2": ("Rome", ["Milan", "Rome", "Naples"]),  # gets it, loses it; the critic keeps Rome
    "Q3": ("Madrid", ["Madrid", "Madrid.", "It is Madrid"]),  # right throughout
    "Q4": ("Lisbon", ["Lisbon", "Porto", "Porto, I think"]),  # right -> wrong: the critic prefers Porto
}
# candidate -> (critic score, critic accepts)
VERDICTS = {
    "Berlin": (2, False),
    "Paris": (9, True),
    "It is Paris": (9, True),
    "Milan": (4, False),
    "Rome": (8, True),
    "Naples": (5, True),
    "Madrid": (7, True),
    "Madrid.": (7, True),
    "It is Madrid": (7, True),
    "Lisbon": (3, False),
    "Porto": (6, False),
    "Porto, I think": (6, False),
}
RECORDS = [
    {"id": q, "task": f"[{q}] Name the capital city.", "reference": ref} for q, (ref, _) in QUIZ.items()
]


class QuizCritic(BaseCritic):
    name = "quiz"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        self.seen.append(request.candidate)
        score, ok = VERDICTS[request.candidate.strip()]
        return Critique(issues=[] if ok else [f"not {request.candidate}"], is_acceptable=ok, score=score)


def quiz_generator() -> RecordingChatModel:
    calls: dict[str, int] = {}

    def reply(messages: list[BaseMessage]) -> str:
        text = "\n".join(str(m.content) for m in messages)
        match = re.search(r"\[(Q\d)\]", text)
        assert match, text
        q = match.group(1)
        calls[q] = calls.get(q, 0) + 1
        return QUIZ[q][1][calls[q] - 1]

    return RecordingChatModel(replies=[reply])


def quiz_graph() -> tuple[Any, RecordingChatModel, QuizCritic]:
    generator, critic = quiz_generator(), QuizCritic()
    graph = create_reflection_graph(generator, critic=critic, max_iterations=3, min_iterations=3)
    return graph, generator, critic


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_round_is_scored_and_the_figures_add_up(tmp_path: Path) -> None:
    graph, generator, critic = quiz_graph()
    report = evaluate(
        RECORDS, out_dir=tmp_path, graph=graph, scorer="contains", progress=False, concurrency=2
    )

    assert (report.records, report.scored, report.errors) == (4, 4, 0)
    assert len(generator.received) == 12 and len(critic.seen) == 12
    # round k: the round's own answer; "selected" = what max_iterations=k returns (best critic score, ties later)
    assert [(r.round, r.ran, r.mean_score, r.pass_share, r.mean_selected) for r in report.rounds] == [
        (1, 4, 0.5, 0.5, 0.5),
        (2, 4, 0.75, 0.75, 0.75),
        (3, 4, 0.5, 0.5, 0.75),
    ]
    assert report.comparison == {
        "first": {"mean_score": 0.5, "pass_share": 0.5},
        "selected": {"mean_score": 0.75, "pass_share": 0.75},
        "last": {"mean_score": 0.5, "pass_share": 0.5},
        "oracle": {"mean_score": 1.0, "pass_share": 1.0},
    }
    assert report.flips == {"right_to_wrong": 1, "wrong_to_right": 2}
    # accepted & passed: Paris x2, Rome, Madrid x3; accepted & failed: Naples; rejected & passed: Lisbon
    assert report.agreement == {"precision": 0.8571, "recall": 0.8571, "tp": 6, "fp": 1, "fn": 1, "tn": 4}
    # rounds 2 and 3 reach the same selected score; round 2 costs fewer tokens
    assert report.best_max_iterations == 2
    assert report.recommendation.startswith("Use max_iterations=2: the mean score rises from 0.500 to 0.750")

    rows = read_rows(tmp_path / "rounds.jsonl")
    assert [(r["id"], r["round"]) for r in rows] == [(q, k) for q in QUIZ for k in (1, 2, 3)]
    by_id = {q: [r for r in rows if r["id"] == q] for q in QUIZ}
    assert [r["candidate"] for r in by_id["Q2"]] == ["Milan", "Rome", "Naples"]
    assert [r["score"] for r in by_id["Q2"]] == [0.0, 1.0, 0.0]
    assert [r["critic_score"] for r in by_id["Q2"]] == [4, 8, 5]
    assert [r["critic_accepted"] for r in by_id["Q2"]] == [False, True, True]
    assert [r["selected"] for r in by_id["Q2"]] == [False, True, False]
    runs = {e["id"]: e for e in read_rows(tmp_path / "runs.jsonl")}
    for q, group in by_id.items():
        assert all(r["tokens"] > 0 and r["tokens"] == r["tokens_in"] + r["tokens_out"] for r in group)
        running = 0
        for r in group:
            running += r["tokens"]
            assert r["cum_tokens"] == running
        # the rounds' tokens add up to the whole run's usage, and the selected answer is what the graph returned
        assert group[-1]["cum_tokens"] == runs[q]["usage"]["total"]["total_tokens"]
        assert next(r for r in group if r["selected"])["candidate"] == runs[q]["candidate"]


def test_output_files(tmp_path: Path) -> None:
    graph, _, _ = quiz_graph()
    report = evaluate(RECORDS, out_dir=tmp_path, graph=graph, scorer="contains", progress=False)

    with (tmp_path / "summary.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == len(report.rounds) == 3  # one row per round
    assert [int(r["round"]) for r in table] == [1, 2, 3]
    assert [float(r["mean_selected"]) for r in table] == [0.5, 0.75, 0.75]
    assert float(table[2]["cum_tokens"]) > float(table[1]["cum_tokens"]) > float(table[0]["cum_tokens"]) > 0

    png = (tmp_path / "gain.png").read_bytes()
    image = PIL.open(io.BytesIO(png))
    image.load()  # decodes the whole image
    assert image.format == "PNG" and image.size[0] > 400 and image.size[1] > 200
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # a drawn figure, not a blank canvas

    page = (tmp_path / "report.html").read_text()
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in page  # this very PNG, embedded
    assert not re.search(r"""(src|href)=["'](?!data:)""", page)  # nothing to fetch: self-contained
    assert report.recommendation.replace("+", "") in page.replace("+", "")
    # the worst flip (Q4, right -> wrong) side by side: first draft Lisbon, selected Porto
    assert re.search(r"Q4.*first draft.*Lisbon.*selected, round 3.*Porto", page, re.S)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["flips"] == report.flips and len(summary["rounds"]) == 3
    assert set(report.files) >= {"rounds", "summary_csv", "plot", "html", "runs"}


def test_resume_runs_nothing_twice(tmp_path: Path) -> None:
    graph, generator, _ = quiz_graph()
    first = evaluate(RECORDS[:2], out_dir=tmp_path, graph=graph, scorer="contains", progress=False)
    assert len(generator.received) == 6
    records = tmp_path / "more.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    again = evaluate(records, out_dir=tmp_path, graph=graph, scorer="contains", progress=False)
    assert len(generator.received) == 12  # only Q3 and Q4 ran
    assert again.scored == 4 and again.rounds[0].mean_score == 0.5 and first.scored == 2


def test_tests_scorer_runs_the_record_tests_in_the_sandbox(tmp_path: Path) -> None:
    tests = (
        "from solution import add\n\n"
        "def test_small():\n    assert add(1, 2) == 3\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n\n"
        "def test_negative():\n    assert add(-1, -1) == -2\n\n"
        "def test_big():\n    assert add(10, 5) == 15\n"
    )
    drafts = [
        "```python\ndef add(a, b):\n    return a * b + 1\n```",  # passes test_small only... 1*2+1 = 3
        "```python\ndef add(a, b):\n    return a + b\n```",
    ]
    generator = RecordingChatModel(replies=drafts)

    class Half(BaseCritic):
        def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
            return Critique(is_acceptable=False, score=5)

    graph = create_reflection_graph(generator, critic=Half(), max_iterations=2)
    report = evaluate(
        [{"id": "add", "task": "Write add(a, b).", "tests": tests}],
        out_dir=tmp_path,
        graph=graph,
        scorer="tests",
        progress=False,
    )
    rows = read_rows(tmp_path / "rounds.jsonl")
    # round 1: add(1,2)=3 passes, add(0,0)=1 fails, add(-1,-1)=2 fails, add(10,5)=51 fails -> 1 of 4
    assert [r["score"] for r in rows] == [0.25, 1.0]
    assert [r["passed"] for r in rows] == [False, True]
    assert report.flips == {"right_to_wrong": 0, "wrong_to_right": 1}
    assert report.recommendation.startswith("Use max_iterations=2")


def test_humaneval_style_records_through_field_mapping(tmp_path: Path) -> None:
    stub = 'def add(a, b):\n    """Return a + b.\n\n    >>> add(2, 3)\n    5\n    """\n'
    rows = [
        {
            "task_id": "code/0",
            "entry_point": "add",
            "prompt": stub,
            "tests": "def test_a():\n    assert add(1, 1) == 2\n",
        },
        {
            "task_id": "code/1",
            "entry_point": "add",
            "prompt": stub,
            "tests": "def test_b():\n    assert add(2, 2) == 5\n",
        },
        "not json",
    ]
    data = tmp_path / "code.jsonl"
    data.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    generator = RecordingChatModel(replies=["```python\ndef add(a, b):\n    return a + b\n```"])

    class Yes(BaseCritic):
        def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
            return Critique(is_acceptable=True, score=9)

    graph = create_reflection_graph(generator, critic=Yes(), max_iterations=1)
    report = evaluate(
        data,
        out_dir=tmp_path / "o",
        graph=graph,
        scorer="tests",
        fields={"task": "prompt", "id": "task_id"},
        progress=False,
    )
    out = read_rows(tmp_path / "o" / "rounds.jsonl")
    assert [(r["id"], r.get("score"), r.get("error_type")) for r in out] == [
        ("code/0", 1.0, None),
        ("code/1", 0.0, None),
        (3, None, "input"),  # the bad line keeps its line number
    ]
    assert stub in str(generator.received[0][-1].content)  # the stub was the task
    assert report.agreement["fp"] == 1 and report.agreement["tp"] == 1
    with pytest.raises(ValueError, match="unknown record key 'prompt'"):
        evaluate(data, out_dir=tmp_path / "x", graph=graph, fields={"prompt": "task"})


def test_exact_regex_json_schema_and_user_function_scorers() -> None:
    import asyncio

    async def score(name: str, record: dict[str, Any], candidate: str) -> float:
        return await make_scorer(name).ascore(record, candidate)

    record = {"task": "t", "reference": ["Paris", "paris, France"]}
    assert asyncio.run(score("exact", record, "  Paris\n")) == 1.0
    assert asyncio.run(score("exact", record, "It is Paris")) == 0.0
    assert asyncio.run(score("contains", record, "It is   PARIS, france.")) == 1.0
    assert asyncio.run(score("contains", record, "It is Lyon")) == 0.0
    assert asyncio.run(score("contains", record, "Parisian cafés")) == 0.0  # whole words only
    assert asyncio.run(score("contains", {"task": "t", "reference": "4"}, "It is 14.")) == 0.0
    assert asyncio.run(score("contains", {"task": "t", "reference": "4"}, "It is 4.")) == 1.0
    assert asyncio.run(score("contains", {"task": "t", "reference": "H₂O"}, "Water is h₂o!")) == 1.0
    assert asyncio.run(score("regex", {"task": "t", "reference": r"\b1[45]4\b"}, "it is 144")) == 1.0
    assert asyncio.run(score("regex", {"task": "t", "reference": r"\b1[45]4\b"}, "it is 124")) == 0.0
    schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    assert asyncio.run(score("json-schema", {"task": "t", "schema": schema}, '{"name": "Ada"}')) == 1.0
    assert asyncio.run(score("json-schema", {"task": "t", "schema": schema}, '{"name": 3}')) == 0.0
    assert asyncio.run(make_scorer(lambda r, c: len(c) / 10).ascore({"task": "t"}, "abcde")) == 0.5


def test_judge_scorer_asks_a_separate_model_with_the_rubric_and_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from reflection_graph.runners import scorers

    prompts: list[str] = []

    def judge_model(prompt: str) -> str:
        prompts.append(prompt)
        verdict = "Paris" in prompt.split("Candidate answer:")[-1]
        return json.dumps(
            {
                "issues": [],
                "suggestions": [],
                "is_acceptable": verdict,
                "score": 9 if verdict else 1,
                "feedback": "",
            }
        )

    seen: list[str] = []

    def fake_resolve(spec: Any, **kwargs: Any) -> Any:
        seen.append(spec)
        return resolve_model(judge_model, role="critic")

    monkeypatch.setattr(scorers, "resolve_model", fake_resolve)
    scorer = make_scorer("judge:openai:some-model")
    assert seen == ["openai:some-model"] and scorer.pass_mark == 0.7
    record = {"task": "Capital of France?", "reference": "Paris"}
    assert asyncio.run(scorer.ascore(record, "It is Paris.")) == 0.9
    assert asyncio.run(scorer.ascore(record, "It is Lyon.")) == pytest.approx(0.1)
    assert "Reference answer: Paris" in prompts[0] and "grading an answer for correctness" in prompts[0]


# ------------------------------------------------------------------------------------------------ bad input


def boom(record: dict[str, Any], candidate: str) -> float:
    if record["id"] == "Q2":
        raise RuntimeError("the scorer broke on Q2")
    return 1.0


def too_big(record: dict[str, Any], candidate: str) -> float:
    return 1.5 if record["id"] == "Q3" else 0.0


def test_bad_records_and_scorers_become_error_rows_and_nothing_else_is_lost(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    lines = [json.dumps(r) for r in RECORDS] + [json.dumps({"id": "no-task", "reference": "x"})]
    data.write_text("\n".join(lines) + "\n")

    graph, _, _ = quiz_graph()
    report = evaluate(data, out_dir=tmp_path / "raises", graph=graph, scorer=boom, progress=False)
    rows = read_rows(tmp_path / "raises" / "rounds.jsonl")
    errors = {r["id"]: r for r in rows if r["status"] == "error"}
    assert errors["Q2"]["error_type"] == "scorer"
    assert "raised RuntimeError: the scorer broke on Q2" in errors["Q2"]["error"]
    assert errors["no-task"]["error_type"] == "input" and errors["no-task"]["line"] == 5
    assert "line 5: missing `task`" in errors["no-task"]["error"]
    assert {r["id"] for r in rows if r["status"] == "ok"} == {"Q1", "Q3", "Q4"}
    assert report.scored == 3 and report.errors == 2 and report.errors_by_type == {"input": 1, "scorer": 1}

    graph, _, _ = quiz_graph()
    report = evaluate(data, out_dir=tmp_path / "range", graph=graph, scorer=too_big, progress=False)
    errors = {r["id"]: r for r in read_rows(tmp_path / "range" / "rounds.jsonl") if r["status"] == "error"}
    assert "returned 1.5, outside [0, 1]" in errors["Q3"]["error"]
    assert report.scored == 3


def test_a_record_whose_graph_fails_is_an_error_row(tmp_path: Path) -> None:
    graph, _, _ = quiz_graph()

    class Flaky:
        async def ainvoke(self, input: Any, config: Any = None) -> Any:
            if "[Q3]" in input["task"]:
                raise ConnectionError("model server went away")
            return await graph.ainvoke(input, config)

    report = evaluate(RECORDS, out_dir=tmp_path, graph=Flaky(), progress=False)
    rows = read_rows(tmp_path / "rounds.jsonl")
    assert [r["error"] for r in rows if r["status"] == "error"] == ["ConnectionError: model server went away"]
    assert report.errors_by_type == {"exception": 1} and report.scored == 3
    assert len([r for r in rows if r["status"] == "ok"]) == 9

    empty = evaluate(RECORDS[:1], out_dir=tmp_path / "none", graph=Flaky(), scorer="tests", progress=False)
    assert empty.scored == 0 and empty.rounds == [] and not (tmp_path / "none" / "gain.png").exists()
    assert "No plot: no record was scored." in (tmp_path / "none" / "report.html").read_text()
    assert "Nothing was scored" in empty.recommendation


def test_tests_scorer_on_a_record_without_tests_is_refused_before_the_graph_runs(tmp_path: Path) -> None:
    graph, generator, _ = quiz_graph()
    records = [
        dict(RECORDS[0], tests="from solution import x\n\ndef test_x():\n    assert x == 1\n"),
        RECORDS[1],
    ]
    report = evaluate(records, out_dir=tmp_path, graph=graph, scorer="tests", progress=False)
    rows = read_rows(tmp_path / "rounds.jsonl")
    error = next(r for r in rows if r["status"] == "error")
    assert error["id"] == "Q2" and error["error_type"] == "scorer"
    assert error["error"] == "scorer 'tests': record has no `tests`; add it or pick another scorer"
    assert len(generator.received) == 3  # only Q1 ran (3 rounds)
    assert report.scored == 1 and [r["score"] for r in rows if r["status"] == "ok"] == [0.0, 0.0, 0.0]


def test_unknown_scorer_fails_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scorer 'bleu'"):
        evaluate(RECORDS, out_dir=tmp_path, graph=object(), scorer="bleu")
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        make_scorer("no_such_module_xyz:score")
    with pytest.raises(ScorerError, match="record has no `reference`"):
        make_scorer("contains").check({"task": "t"})
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------------- CLI

runner = CliRunner()


class CliQuiz:
    """A plain `fn(prompt) -> str` model for the CLI seam: drafts and revises the quiz, critiques as JSON."""

    def __init__(self) -> None:
        self.generate = quiz_generator()

    def __call__(self, prompt: str) -> str:
        if "JSON verdict:" in prompt:
            candidate = prompt.split("Candidate answer:")[1].strip().split("\n")[0].strip()
            score, ok = VERDICTS[candidate]
            return json.dumps(
                {"issues": ["x"], "suggestions": [], "is_acceptable": ok, "score": score, "feedback": ""}
            )
        return str(self.generate.invoke(prompt).content)


@pytest.fixture
def cli_quiz(monkeypatch: pytest.MonkeyPatch) -> CliQuiz:
    model = CliQuiz()
    monkeypatch.setattr(
        cli._graph, "_resolve_model", lambda spec, options, role: resolve_model(model, role=role)
    )
    return model


def write_quiz(path: Path, records: list[dict[str, Any]] = RECORDS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_cli_eval_prints_the_table_and_writes_the_files(cli_quiz: CliQuiz, tmp_path: Path) -> None:
    data = write_quiz(tmp_path / "quiz.jsonl")
    out = tmp_path / "out"
    result = runner.invoke(
        cli.app,
        [
            "eval",
            str(data),
            "--out",
            str(out),
            "--max-iterations",
            "3",
            "--min-iterations",
            "3",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "eval per round (contains, pass mark 1)" in result.output
    assert "Use max_iterations=2" in result.output and "right->wrong 1, wrong->right 2" in result.output
    for name in ("rounds.jsonl", "summary.csv", "gain.png", "report.html", "summary.json", "runs.jsonl"):
        assert (out / name).is_file(), name
    assert len(read_rows(out / "rounds.jsonl")) == 12  # --max-iterations/--min-iterations reached the graph


def test_cli_resumes_only_with_the_same_graph_options(cli_quiz: CliQuiz, tmp_path: Path) -> None:
    data = write_quiz(tmp_path / "quiz.jsonl")
    out = str(tmp_path / "out")
    first = runner.invoke(
        cli.app, ["eval", str(data), "--out", out, "--max-iterations", "3", "--no-progress"]
    )
    assert first.exit_code == 0, first.output
    calls = len(cli_quiz.generate.received)
    # another scorer re-scores the stored runs: no model calls
    again = runner.invoke(
        cli.app,
        ["eval", str(data), "--out", out, "--max-iterations", "3", "--scorer", "exact", "--no-progress"],
    )
    assert again.exit_code == 0, again.output
    assert len(cli_quiz.generate.received) == calls
    other = runner.invoke(cli.app, ["eval", str(data), "--out", out, "--max-iterations", "2"])
    assert other.exit_code == 2
    assert other.output.startswith(
        f"error: --out {out} holds runs made with other options (settings.max_iterations)"
    )


def test_cli_user_function_scorer_from_the_working_directory(
    cli_quiz: CliQuiz, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_quiz_scorer.py").write_text(
        "def first_letter(record, candidate):\n    return float(candidate[:1] == record['reference'][:1])\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    data = write_quiz(tmp_path / "quiz.jsonl")
    result = runner.invoke(
        cli.app,
        [
            "eval",
            str(data),
            "--out",
            "o",
            "--scorer",
            "my_quiz_scorer:first_letter",
            "--no-progress",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["scorer"] == "my_quiz_scorer:first_letter" and report["pass_mark"] == 0.5
    assert report["scored"] == 4


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        ("bleu", "error: --scorer: unknown scorer 'bleu': use exact, contains, regex, json-schema, tests"),
        ("nope_mod_xyz:f", "error: --scorer: scorer 'nope_mod_xyz:f': cannot import module 'nope_mod_xyz'"),
        ("json:loads_missing", "error: --scorer: scorer 'json:loads_missing': json has no function"),
    ],
)
def test_cli_unknown_scorer_is_one_line_exit_2(
    cli_quiz: CliQuiz, tmp_path: Path, scorer: str, message: str
) -> None:
    data = write_quiz(tmp_path / "quiz.jsonl")
    result = runner.invoke(cli.app, ["eval", str(data), "--out", str(tmp_path / "o"), "--scorer", scorer])
    assert result.exit_code == 2
    assert result.output.startswith(message) and result.output.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_cli_bad_records_exit_1_with_error_rows(cli_quiz: CliQuiz, tmp_path: Path) -> None:
    data = write_quiz(tmp_path / "quiz.jsonl", [*RECORDS[:2], {"id": "x", "reference": "y"}])
    out = tmp_path / "o"
    result = runner.invoke(
        cli.app, ["eval", str(data), "--out", str(out), "--scorer", "tests", "--no-progress"]
    )
    assert result.exit_code == 1
    assert "3 error rows (input 1, scorer 2)" in result.output
    rows = read_rows(out / "rounds.jsonl")
    assert [(r["id"], r["error_type"]) for r in rows] == [("Q1", "scorer"), ("Q2", "scorer"), ("x", "input")]


def test_missing_matplotlib_says_how_to_install_it(
    cli_quiz: CliQuiz, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    data = write_quiz(tmp_path / "quiz.jsonl")
    result = runner.invoke(cli.app, ["eval", str(data), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert (
        result.output
        == "error: the eval plot (gain.png) needs matplotlib: pip install 'reflection-graph[eval]'\n"
    )
    with pytest.raises(ImportError, match=r"pip install 'reflection-graph\[eval\]'"):
        evaluate(RECORDS, out_dir=tmp_path / "p", graph=object())
    report = evaluate(RECORDS, out_dir=tmp_path / "p", graph=quiz_graph()[0], plot=False, progress=False)
    assert report.scored == 4 and not (tmp_path / "p" / "gain.png").exists()
    assert "pip install" in (tmp_path / "p" / "report.html").read_text()


def test_cli_eval_into_an_out_dir_another_run_is_writing_is_one_line_exit_2(
    cli_quiz: CliQuiz, tmp_path: Path
) -> None:
    from reflection_graph.runners._lock import OutputLock

    data = write_quiz(tmp_path / "quiz.jsonl")
    out = tmp_path / "out"
    out.mkdir()
    held = OutputLock(out / "runs.jsonl")
    held.acquire()  # a second open file description: flock refuses it as it would another process
    try:
        result = runner.invoke(cli.app, ["eval", str(data), "--out", str(out), "--no-progress"])
    finally:
        held.release()
    assert result.exit_code == 2, result.output
    assert "is being written by another batch run" in result.output
    assert "Traceback" not in result.output and cli_quiz.generate.received == []


def test_a_lone_surrogate_in_a_record_loses_nothing(tmp_path: Path) -> None:
    """Valid JSON "\\ud800" has no UTF-8 form: a task with one is an input error row naming its place (issue 20,
    fault 9); one in another field is kept; every file is still written and every other record is scored."""
    records = [dict(r, task=r["task"] + " \ud800") if r["id"] in ("Q1", "Q3") else r for r in RECORDS]
    records[1] = dict(records[1], note="a \ud800 note")  # Q2: not sent to the graph, kept as metadata
    report = evaluate(records, out_dir=tmp_path, graph=quiz_graph()[0], scorer="contains", progress=False)
    assert (report.records, report.scored, report.errors, report.errors_by_type) == (4, 2, 2, {"input": 2})
    rows = read_rows(tmp_path / "rounds.jsonl")
    errors = [r for r in rows if r["status"] == "error"]
    assert [(r["id"], r["line"]) for r in errors] == [("Q1", 1), ("Q3", 3)]
    position = len("[Q1] Name the capital city. ")  # 28: where the surrogate stands
    assert errors[0]["error"].startswith(
        f"line 1: 'task' has a character with no UTF-8 form at position {position}"
    )
    assert len(rows) == 2 + 3 + 3 and {r["id"] for r in rows if r["status"] == "ok"} == {"Q2", "Q4"}
    notes = [json.loads(line).get("note") for line in (tmp_path / "input.jsonl").read_text().splitlines()]
    assert notes[1] == "a \ud800 note"  # escaped on disk, the same string read back
    assert "<img" in (tmp_path / "report.html").read_text(encoding="utf-8")
