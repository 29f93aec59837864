"""Examples written as prose in a docstring become tests; anything not read for sure is skipped."""

from __future__ import annotations

import pytest

from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.loop._examples import prose_examples
from reflection_graph.loop._stub_tests import docstring_tests

ARROWS = '''def scale(values, factor):
    """Multiply every value by factor.

    Examples:
        scale([1, 2], 3) ==> [3, 6]
        scale([], 3) => []
        scale([2], 0) == [0]
        scale([1], -1) -> [-1]
        scale([5], 2) \u279e [10]
        scale([4], 1)   # returns [4]
        scale([0], 9) should return [0].
    """
'''


def test_every_arrow_and_phrase_gives_one_example() -> None:
    found = prose_examples(ARROWS.split('"""')[1], "scale", ["values", "factor"])
    assert found == [
        ("scale([1, 2], 3)", "[3, 6]"),
        ("scale([], 3)", "[]"),
        ("scale([2], 0)", "[0]"),
        ("scale([1], -1)", "[-1]"),
        ("scale([5], 2)", "[10]"),
        ("scale([4], 1)", "[4]"),
        ("scale([0], 9)", "[0]"),
    ]


def test_booleans_worked_sums_for_lines_and_input_output_pairs() -> None:
    doc = """Say whether n is even.
    is_even(4) => true
    is_even(3) => False
    left(10, 3) -> 10 - 3 = 7
    For n = 6 the output should be True.
    Example 1:
        Input: 8
        Output: True
    """
    assert prose_examples(doc, "is_even", ["n"]) == [
        ("is_even(4)", "True"),
        ("is_even(3)", "False"),
        ("is_even(n=6)", "True"),
        ("is_even(8)", "True"),
    ]
    assert prose_examples("left(10, 3) -> 10 - 3 = 7", "left", ["a", "b"]) == [("left(10, 3)", "7")]


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("is_even(x) => True", "is_even"),  # an argument that is not a literal
        ("is_even(4) => an even number", "is_even"),  # an expected value that is not a literal
        ("other(4) => True", "is_even"),  # another function's example
        ("is_even(4) == True == False", "is_even"),  # not one value
        ("For m = 4 the output should be True", "is_even"),  # not a parameter of the function
        ("is_even(*[4]) => True", "is_even"),
        ("left(10, 3) == 10 - 3 = 7", "left"),  # a worked sum is read only after an arrow
    ],
)
def test_what_cannot_be_read_for_sure_is_skipped(line: str, name: str) -> None:
    assert prose_examples(line, name, ["n"]) == []


def test_a_docstring_with_prose_examples_gets_tests_that_judge_code() -> None:
    tests = docstring_tests(ARROWS)
    assert tests.startswith("from solution import scale\n")
    assert tests.count("def test_example_") == 7
    critic = CodeTestCritic(tests, isolation="off")
    good = ARROWS + "    return [v * factor for v in values]\n"
    bad = ARROWS + "    return [v + factor for v in values]\n"
    assert critic.critique(CritiqueRequest(task=ARROWS, candidate=good)).is_acceptable
    verdict = critic.critique(CritiqueRequest(task=ARROWS, candidate=bad))
    assert not verdict.is_acceptable and verdict.checks_passed == 1  # only scale([], 3) holds by chance
    assert any("scale([1, 2], 3)" in issue for issue in verdict.issues)


def test_doctest_examples_come_first_and_prose_is_only_read_without_them() -> None:
    both = '''def f(x):
    """Twice x.

    >>> f(2)
    4

    f(3) ==> 6
    """
'''
    tests = docstring_tests(both)
    assert "assert f(2) == 4" in tests and "f(3)" not in tests
    with pytest.raises(ValueError, match="no example with an expected output"):
        docstring_tests('def f(x):\n    """Twice x, as in f(x) ==> 2x."""\n')
