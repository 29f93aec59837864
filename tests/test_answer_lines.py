"""The final answer keeps every line of the candidate judged best: config section headers, T-SQL's bracketed
identifiers, merge fields the task asked for, Markdown reference links and an index such as `scores[Name]` are
the answer's content, not template placeholders, through the Python API and the command line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reflection_graph import cli, create_reflection_graph
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

SQL_TASK = "Write a T-SQL query listing each customer's name and order date from the Sales Orders table."
SQL_BEST = "SELECT\n    [Customer Name],\n    [Order Date]\nFROM [Sales Orders];"
SQL_WORSE = "SELECT CustomerName FROM SalesOrders;"

CASES = [
    pytest.param(
        "Write the setup.cfg section that sets flake8's line length to 100 and excludes .git.",
        "max-line-length: 100",
        "[flake8]\nmax-line-length = 100\nexclude = .git",
        id="ini-section",
    ),
    pytest.param(
        "Write the pyproject.toml tables that set ruff's line length to 100 and select rules E and F.",
        "Set line-length to 100 in pyproject.toml.",
        '[tool.ruff]\nline-length = 100\n\n[tool.ruff.lint]\nselect = ["E", "F"]',
        id="toml-tables",
    ),
    pytest.param(SQL_TASK, SQL_WORSE, SQL_BEST, id="t-sql"),
    pytest.param(
        "Write a short letter inviting a job applicant to an interview. Put the applicant's name in square "
        "brackets so I can mail-merge it.",
        "Dear Applicant,\n\nPlease come to an interview.\n\nDana Lee",
        "Dear [Applicant Name],\n\nThank you for applying. We would like to invite you to an interview next "
        "week.\n\nBest regards,\nDana Lee",
        id="mail-merge",
    ),
    pytest.param(
        "Write a welcome email for new subscribers, with a merge field for the recipient's name.",
        "Hello,\n\nWelcome.\n\nThe Team",
        "Dear [Recipient Name],\n\nWelcome to our newsletter! Your first issue arrives on Monday.\n\nThe Team",
        id="merge-field",
    ),
    pytest.param(
        "Write a short Markdown note that sends readers to the setup guide at https://example.org/guide with a "
        "reference-style link.",
        "Setting up takes five minutes: see https://example.org/guide.",
        "Setting up takes five minutes.\n\n[Read the guide][guide]\n\n[guide]: https://example.org/guide",
        id="markdown-reference-link",
    ),
    pytest.param(
        "Explain in two sentences how to print each student's score from the scores dictionary.",
        "Print the scores.",
        "Loop over the students' names and print scores[Name] for each name. The dictionary maps each name to "
        "its score.",
        id="index",
    ),
]


def _scripted(replies: list[str]) -> Any:
    """A plain generator function that returns `replies` in order."""
    texts: Iterator[str] = iter(replies)
    return lambda prompt: next(texts)


def _judge(scores: list[float]) -> Any:
    """A plain critic function: a JSON verdict with the next of `scores`, never acceptable."""
    given: Iterator[float] = iter(scores)

    def judge(prompt: str) -> str:
        score = next(given)
        return json.dumps(
            {"is_acceptable": False, "score": score, "issues": ["could be better"], "feedback": "-"}
        )

    return judge


@pytest.mark.parametrize(("task", "worse", "best"), CASES)
def test_the_answer_is_the_best_judged_candidate_with_every_line(task: str, worse: str, best: str) -> None:
    graph = create_reflection_graph(_scripted([worse, best]), critic=_judge([4.0, 8.0]), max_iterations=2)
    result = graph.invoke({"task": task})
    rounds = result["trajectory"]
    assert [(r["candidate"], r["score"]) for r in rounds] == [(worse, 4.0), (best, 8.0)]
    assert [r["placeholder"] for r in rounds] == [False, False]  # no line of the best is a template slot
    assert result["candidate"] == best  # selected, and not a line lost or changed


def test_the_command_line_prints_the_t_sql_query_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_resolve(spec: str | None, options: cli.GraphOptions, role: str) -> Any:
        if role == "critic":
            return FakeCriticModel(critiques=[critique(4.0), critique(8.0)])
        return RecordingChatModel(replies=[SQL_WORSE, SQL_BEST])

    monkeypatch.setattr(cli._graph, "_resolve_model", fake_resolve)
    shown = CliRunner().invoke(
        cli.app, ["run", SQL_TASK, "--critic", "fake", "--max-iterations", "2", "--json"]
    )
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [r["score"] for r in data["trajectory"]] == [4.0, 8.0]
    assert data["candidate"] == SQL_BEST
