"""Rule critics: deterministic verdicts, a severity per finding, and suggestions that say how to fix."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from reflection_graph.critics.base import Critic, CritiqueRequest
from reflection_graph.critics.rules import (
    JSONSchemaCritic,
    LengthCritic,
    RequiredTermsCritic,
    extract_json_text,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "role": {"enum": ["admin", "user"]},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def judge(critic: Critic, candidate: str) -> tuple[bool, float, list[str], list[str], list[str]]:
    result = critic.critique(CritiqueRequest(task="t", candidate=candidate))
    return (
        result.is_acceptable,
        result.score,
        result.issues,
        [f.severity for f in result.findings],
        result.suggestions,
    )


# -- JSON schema ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "candidate",
    [
        '{"name": "Ada", "age": 36}',
        '```json\n{"name": "Ada", "age": 36, "role": "admin"}\n```',
        '  {"name":"A","age":0}\n',
    ],
)
def test_json_schema_accepts_valid_json_with_or_without_fence(candidate: str) -> None:
    critic = JSONSchemaCritic(SCHEMA)
    result = critic.critique(CritiqueRequest(task="t", candidate=candidate))
    assert result.is_acceptable and result.score == 10
    assert result.findings == [] and result.severity == "none"
    assert result.feedback == "Valid JSON that matches the schema."


def test_json_schema_reports_each_violation_at_its_path_with_a_fix() -> None:
    ok, score, issues, severities, suggestions = judge(
        JSONSchemaCritic(SCHEMA), '{"age": "36", "role": "root", "extra": 1}'
    )
    assert not ok
    assert severities == ["major"] * 4
    assert score == 0  # 10 - 4 * 3, floored
    assert "$: 'name' is a required property" in issues
    assert any(i.startswith("$.age: '36' is not of type 'integer'") for i in issues)
    assert any(i.startswith("$.role: 'root' is not one of") for i in issues)
    assert any("Additional properties are not allowed ('extra'" in i for i in issues)
    assert "Add the required property 'name' at $." in suggestions
    assert "Make $.age a JSON integer." in suggestions
    assert 'Set $.role to one of ["admin", "user"].' in suggestions
    assert "Remove the properties at $ that the schema does not allow." in suggestions


def test_json_schema_one_violation_scores_seven() -> None:
    ok, score, issues, severities, _ = judge(JSONSchemaCritic(SCHEMA), '{"name": "Ada", "age": -1}')
    assert (ok, score, severities) == (False, 7, ["major"])
    assert issues == ["$.age: -1 is less than the minimum of 0"]


def test_json_schema_invalid_json_is_critical() -> None:
    ok, score, issues, severities, suggestions = judge(JSONSchemaCritic(SCHEMA), "{'name': 'Ada', 'age': 3}")
    assert (ok, score, severities) == (False, 0, ["critical"])
    assert issues[0].startswith(
        "the answer is not valid JSON: Expecting property name enclosed in double quotes"
    )
    assert "double-quoted keys" in suggestions[0]
    assert judge(JSONSchemaCritic(SCHEMA), "")[3] == ["critical"]


def test_json_schema_json_nested_past_the_recursion_limit_is_a_finding_not_a_crash() -> None:
    ok, score, issues, severities, _ = judge(JSONSchemaCritic(SCHEMA), '{"a": ' * 5000)
    assert (ok, score, severities) == (False, 0, ["critical"])
    assert issues == ["the answer is not valid JSON: it nests deeper than Python's recursion limit"]
    # closed, the deepest value Python can read is validated, with the rest as text around it
    ok, _, issues, severities, _ = judge(JSONSchemaCritic(SCHEMA), "[" * 5000 + "]" * 5000)
    assert not ok and severities == ["major", "major"]
    assert issues[0] == "the answer has text around the JSON"


def test_json_schema_prose_around_json_is_major_and_inner_json_still_validated() -> None:
    ok, score, issues, severities, suggestions = judge(
        JSONSchemaCritic(SCHEMA), 'Sure! Here is the JSON: {"name": "Ada"} Hope it helps.'
    )
    assert not ok and severities == ["major", "major"] and score == 4
    assert issues == ["the answer has text around the JSON", "$: 'age' is a required property"]
    assert suggestions[0] == "Return only the JSON, without any explanation before or after it."


def test_json_schema_accepts_pydantic_models_and_json_strings_and_caps_errors() -> None:
    class Person(BaseModel):
        name: str
        age: int

    assert judge(JSONSchemaCritic(Person), '{"name": "Ada", "age": 3}')[0]
    assert not judge(JSONSchemaCritic(Person), '{"name": "Ada"}')[0]
    assert judge(JSONSchemaCritic('{"type": "array"}'), "[1, 2]")[0]
    capped = JSONSchemaCritic({"type": "array", "items": {"type": "integer"}}, max_errors=2)
    _, _, issues, _, _ = judge(capped, '["a", "b", "c", "d"]')
    assert len(issues) == 3 and issues[-1] == "2 more schema violations not shown"


def test_json_schema_validates_the_schema_at_construction() -> None:
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        JSONSchemaCritic({"type": "no-such-type"})
    with pytest.raises(ValueError, match="not JSON"):
        JSONSchemaCritic("{type: object}")
    with pytest.raises(ValueError, match="must be a JSON Schema dict"):
        JSONSchemaCritic(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_errors"):
        JSONSchemaCritic(SCHEMA, max_errors=0)


def test_extract_json_text() -> None:
    assert extract_json_text('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert extract_json_text("```\n[1]\n```") == "[1]"
    assert extract_json_text('  {"a": 1} ') == '{"a": 1}'


# -- length -----------------------------------------------------------------------------------------------------


def test_length_within_bounds_is_accepted() -> None:
    ok, score, issues, _, _ = judge(LengthCritic(min_words=2, max_words=5, max_chars=40), "three short words")
    assert (ok, score, issues) == (True, 10, [])


def test_length_reports_how_far_off_and_how_to_fix() -> None:
    ok, score, issues, severities, suggestions = judge(
        LengthCritic(max_words=3, max_chars=10), "one two three four five"
    )
    assert not ok and severities == ["major", "major"] and score == 4
    assert issues == ["too long: 5 words, the maximum is 3", "too long: 23 characters, the maximum is 10"]
    assert suggestions[0].startswith("Shorten the answer by at least 2 words")
    ok, _, issues, _, suggestions = judge(LengthCritic(min_words=10), "just four words here")
    assert not ok and issues == ["too short: 4 words, the minimum is 10"]
    assert suggestions[0].startswith("Lengthen the answer by at least 6 words")


def test_length_empty_candidate_is_critical() -> None:
    _, score, issues, severities, _ = judge(LengthCritic(min_chars=1), "   ")
    assert (score, issues, severities) == (0, ["the answer is empty"], ["critical"])
    assert judge(LengthCritic(max_words=5), "")[0], "an empty answer is within a pure maximum"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "at least one bound"),
        ({"max_words": -1}, "non-negative int"),
        ({"min_chars": 1.5}, "non-negative int"),
        ({"min_words": 10, "max_words": 5}, "larger than max_words"),
    ],
)
def test_length_validates_bounds(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LengthCritic(**kwargs)  # type: ignore[arg-type]


# -- required / forbidden terms ---------------------------------------------------------------------------------


def test_required_terms_case_insensitive_whole_words_by_default() -> None:
    critic = RequiredTermsCritic(["thank you", "offer"], forbidden_terms=["unfortunately"])
    assert judge(critic, "THANK   you for the Offer.")[0]
    ok, score, issues, severities, suggestions = judge(
        critic, "Thanks for the offering. Unfortunately, no. unfortunately!"
    )
    assert not ok and severities == ["major"] * 3 and score == 1
    assert issues == [
        "missing required term 'thank you'",
        "missing required term 'offer'",
        "uses forbidden term 'unfortunately' (2 times)",
    ]
    assert "Mention 'offer' explicitly, where it fits the content." in suggestions
    assert "Remove or rephrase every use of 'unfortunately'." in suggestions


def test_required_terms_case_sensitive_and_substring_modes() -> None:
    assert not judge(RequiredTermsCritic(["API"], case_sensitive=True), "the api is fine")[0]
    assert judge(RequiredTermsCritic(["API"], case_sensitive=True), "the API is fine")[0]
    assert judge(RequiredTermsCritic(["cat"], whole_words=False), "category")[0]
    assert not judge(RequiredTermsCritic(["cat"]), "category")[0]
    assert judge(RequiredTermsCritic(forbidden_terms=["C++"]), "written in C")[0]
    assert not judge(RequiredTermsCritic(forbidden_terms=["C++"]), "written in C++ today")[0]


def test_required_terms_validation() -> None:
    with pytest.raises(ValueError, match="at least one term"):
        RequiredTermsCritic()
    with pytest.raises(ValueError, match="not one string"):
        RequiredTermsCritic("offer")
    with pytest.raises(ValueError, match="non-empty strings"):
        RequiredTermsCritic(["ok", " "])


async def test_rule_critics_async_path_and_protocol() -> None:
    critics = [JSONSchemaCritic(SCHEMA), LengthCritic(max_words=1), RequiredTermsCritic(["x"])]
    request = CritiqueRequest(task="t", candidate='{"name": "x", "age": 1}')
    for critic in critics:
        assert isinstance(critic, Critic)
        assert (await critic.acritique(request)).model_dump() == critic.critique(request).model_dump()
    assert [c.name for c in critics] == ["json_schema", "length", "required_terms"]
