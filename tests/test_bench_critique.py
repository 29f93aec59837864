"""The critique benchmark's set and bookkeeping, with a fake judge: every case is well formed, each fault's keyword
rule names the fault as the set itself words it, a resumed run reads nothing twice, and the figures count what
they say."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from reflection_graph._text._placeholders import placeholders
from reflection_graph.critics import JudgeCritic
from tests._bench import bench_module
from tests.fakes import LogprobModel, answer_of

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.fixture
def bench() -> Any:
    with bench_module("bench_critique") as module:
        yield module


def test_the_set_has_good_answers_and_answers_with_known_faults(bench: Any) -> None:
    cases = bench.load_cases(ROOT / bench.CASES)
    good = [c for c in cases if not c["faults"]]
    bad = [c for c in cases if c["faults"]]
    assert len(cases) >= 30 and len(good) >= 10 and len(bad) >= 10
    assert len({c["id"] for c in cases}) == len(cases)
    for case in bad:
        for fault in case["faults"]:  # the rule names the fault as written in the set
            assert re.search(fault["match"], fault["fault"], re.I), (case["id"], fault)
    kinds = " ".join(f["fault"] for c in bad for f in c["faults"]).casefold()
    for kind in ("instead of declining", "placeholder", "rude", "not the capital", "not 24"):
        assert kind in kinds
    assert not any(placeholders(c["answer"]) for c in good)  # no good answer holds a template slot


def test_the_new_set_is_apart_well_formed_and_holds_the_kinds_it_promises(bench: Any) -> None:
    old = bench.load_cases(ROOT / bench.CASES)
    cases = bench.load_cases(ROOT / bench.NEW_CASES)
    good = [c for c in cases if not c["faults"]]
    assert len(cases) - len(good) >= 20 and len(good) >= 10
    assert not {c["id"] for c in cases} & {c["id"] for c in old}  # one cache holds both sets
    assert {c["set"] for c in cases} == {"critique_cases_new.jsonl"}
    assert not {c["task"] for c in cases} & {c["task"] for c in old}  # new tasks, not the old ones again
    for case in cases:
        for fault in case["faults"]:
            assert re.search(fault["match"], fault["fault"], re.I), (case["id"], fault)
    faults = " ".join(f["fault"] for c in cases for f in c["faults"]).casefold()
    for kind in (
        "subject line",
        "placeholder",
        "30-word",
        "bullet",
        "russian",
        "chinese",
        "off by one",
        "1989",
    ):
        assert kind in faults, kind


def test_two_cases_with_one_id_are_refused(bench: Any, tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    row = {"id": "x", "task": "t", "answer": "a", "faults": []}
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="share an id"):
        bench.load_cases(path)


def test_a_case_without_a_match_rule_is_refused(bench: Any, tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"id": "x", "task": "t", "answer": "a", "faults": [{"fault": "f"}]}) + "\n")
    with pytest.raises(ValueError, match="needs 'fault' and 'match'"):
        bench.load_cases(path)


def _fake(cases: list[dict[str, Any]]) -> LogprobModel:
    """A judge that writes one invented fault for every answer, and the first real fault too for a bad one; it
    confirms only the real ones. Its `before` critique is a line cut mid-sentence."""
    by_answer = {c["answer"]: c for c in cases}

    def written(prompt: str) -> str:
        if '"issues"' in prompt or '("issues")' in prompt:
            return json.dumps({"issues": ["The email does not give the reason, which is important to"]})
        case = by_answer[answer_of(prompt)]
        faults = [{"issue": "The answer is too short.", "fix": "Add more detail."}]
        faults += [{"issue": f["fault"], "fix": "Fix it."} for f in case["faults"][:1]]
        return json.dumps({"faults": faults})

    def fault(answer: str, issue: str) -> float:
        return 0.9 if any(f["fault"] == issue for f in by_answer[answer]["faults"]) else 0.1

    return LogprobModel(
        yes=lambda a: 0.9, better=lambda a, b: 0.5, written=written, fault=fault, yes_bias=3.0
    )


def test_a_run_is_resumed_and_the_figures_count_claims_faults_and_broken_lines(
    bench: Any, tmp_path: Path, capsys: Any
) -> None:
    cases = bench.load_cases(ROOT / bench.CASES)[:6]
    out = tmp_path / "critique.jsonl"
    model = _fake(cases)
    saved = bench.run(JudgeCritic(model), cases, out, "k1", before=True)
    calls = len(model.calls)
    assert len(out.read_text().splitlines()) == len(cases)
    with out.open("a") as handle:
        handle.write('{"id": "cut by a ki')  # a line cut by a kill is skipped
    again = bench.run(JudgeCritic(model), cases, out, "k1", before=True)
    assert len(model.calls) == calls and again.keys() == saved.keys()  # nothing read twice
    assert bench.saved_records(out, "other prompts", before=False) == {}  # new prompts: read again

    rows = {r[0]: r for v in bench.VARIANTS if (r := bench.figures(cases, saved, v)) is not None}
    n_good = sum(1 for c in cases if not c["faults"])
    n_faults = sum(len(c["faults"]) for c in cases)
    named = sum(1 for c in cases if c["faults"])  # the fake writes each bad case's first fault
    # before: one cut line per answer, naming nothing
    assert rows["before (issue 37)"][1].startswith(f"{100:.1f}%") and rows["before (issue 37)"][5].startswith(
        "100.0%"
    )
    # whole lines: the invented fault is shown everywhere
    assert rows["new, whole lines"][1].startswith("100.0%") and rows["new, whole lines"][5].startswith("0.0%")
    # precision: of the invented claims (one per case) and the real ones (one per bad case), the real ones
    n_bad = len(cases) - sum(1 for c in cases if not c["faults"])
    assert rows["new, as written"][2].endswith(f"({n_bad} of {len(cases) + n_bad})")
    # asked once, the yes-saying fake (+3 to Yes) confirms the invented fault; asked both ways it does not
    assert rows["checked once"][1].startswith("100.0%")
    both = rows["checked both ways (default)"]
    assert both[1].startswith("0.0%") and f"({0} claims)" in both[1] and both[4] == "0"
    assert both[2].startswith("100.0%")  # only the confirmed real faults are shown: every one is real
    assert both[3].startswith(f"{named / n_faults:.1%}") and both[3].endswith(f"({named} of {n_faults})")
    assert n_good > 0
    # the rules alone: the placeholder of email-readme-placeholder, real by construction, and nothing else
    assert rows["rules alone (no model)"][2].endswith("(1 of 1)") and rows["rules alone (no model)"][
        1
    ].startswith("0.0%")
    assert bench.by_critic(cases, saved)["rules"] == (1, 1)
    bench.report(cases, saved, "fake")
    printed = capsys.readouterr().out
    assert "seconds per case" in printed and "rules 1 real of 1 shown" in printed


def test_report_only_prints_the_saved_readings_without_a_model(
    bench: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = bench.load_cases(ROOT / bench.CASES)[:4]
    out = tmp_path / "critique.jsonl"
    bench.run(JudgeCritic(_fake(cases)), cases, out, bench._key("fake"), before=False)

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("--report-only loaded a model")

    monkeypatch.setattr(bench, "embedded_model", no_model)
    code = bench.main(["--report-only", "--model", "embedded:fake", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert f"fake, {Path(bench.CASES).name}: 4 cases" in printed  # only the saved ones
    assert "not read yet, left out:" in printed and "fake, all sets combined" not in printed


@pytest.mark.parametrize(
    ("line", "broken"),
    [
        ("The email does not thank Dana.", False),
        ("The email does not mention the reason, which is important to", True),
        ("Add a reason. For example: 'I appreciate the邀'.", True),
        ("Sign it [Your Name].", True),
    ],
)
def test_malformed_lines_by_the_benchs_own_rules(bench: Any, line: str, broken: bool) -> None:
    assert bench.malformed(line, answer="Dear Dana, ... Sam") is broken


def test_rules_only_reads_every_case_with_no_model_and_no_saved_reading(
    bench: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = "Write a one-line note to Sam confirming lunch on Friday. Sign it Ana."
    rows = [
        {"id": "good", "task": task, "answer": "Hi Sam, lunch on Friday is confirmed. Ana", "faults": []},
        {
            "id": "slot",
            "task": task,
            "answer": "Hi Sam, lunch on Friday is confirmed. [Your Name]",
            "faults": [{"fault": "A placeholder.", "match": r"\[your name\]|placeholder"}],
        },
        {
            "id": "rude",
            "task": task,
            "answer": "Hi Sam, lunch on Friday is confirmed, if you can manage to be on time. Ana",
            "faults": [{"fault": "A rude line.", "match": "rude|on time"}],
        },
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("--rules-only loaded a model")

    monkeypatch.setattr(bench, "embedded_model", no_model)
    assert bench.main(["--rules-only", "--cases", str(path)]) == 0
    printed = capsys.readouterr().out
    table = next(line for line in printed.splitlines() if line.startswith("| cases.jsonl"))
    assert (
        "(0 claims)" in table and "(1 of 1)" in table and "(1 of 2)" in table
    )  # the placeholder, not the rude line
