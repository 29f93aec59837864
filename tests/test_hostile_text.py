"""The readers of a model's reply take a long or hostile one and say "not found", never raise or stall: the code
extractor (`extract_code`), the JSON readers (`extract_json_object`, `parse_critique`) and the whole-sentence
reader of a critique's lines (`whole_line`).

Found by feeding them replies of one repeated piece each:
- Python's parser raises MemoryError, not SyntaxError, for a line of some 3,000 bare words ("the the the ...", as
  a looping model writes): `extract_code` and `is_python` let it through, so a code critic failed on prose;
- JSON nested past Python's recursion limit (`[[[[...`) raised RecursionError out of the JSON readers, so an
  unparsable critique ended the run instead of being reported as one;
- a critique line with no sentence end, or with many abbreviations, took time that grew with the square of its
  length (a search from every place, each to the end).
"""

from __future__ import annotations

import random
import sys

import pytest

from reflection_graph._text import extract_code, extract_json_object, is_python, whole_line
from reflection_graph._text._lines import _SENTENCE
from reflection_graph.critique import CritiqueParseError, parse_critique
from tests._cpu import within_cpu_limit

WORDS = "the " * 3000


def test_a_line_of_thousands_of_words_is_prose_not_a_parser_crash() -> None:
    assert not is_python(WORDS)
    assert extract_code(WORDS) == ""
    assert extract_code(f"```python\ndef f():\n    return 1\n```\n{WORDS}") == "def f():\n    return 1\n"


def test_a_code_reply_with_a_line_of_thousands_of_words_is_read_as_a_short_unparsable_one() -> None:
    """The code loop's reader of a reply (`finish_candidate`) parsed it with the same parser, and raised its
    MemoryError; it now takes such a reply as it takes any that does not parse."""
    from reflection_graph.loop._code import finish_candidate

    stub = 'def f(x):\n    """Twice x."""\n'
    for reply in ("```python\n{}\n```", "def f(x):\n    {}\n"):
        assert finish_candidate(stub, reply.format(WORDS)) == finish_candidate(stub, reply.format("the the"))


def test_json_nested_past_the_recursion_limit_is_skipped_and_what_follows_is_read() -> None:
    deep = "[" * 5000 + "]" * 5000
    assert extract_json_object(deep) is None
    assert extract_json_object(deep + ' then {"score": 7}') == {"score": 7}
    with pytest.raises(CritiqueParseError):
        parse_critique('{"x": ' + deep + "}")
    critique = parse_critique('{"x": ' + deep + '} {"is_acceptable": false, "score": 4}')
    assert critique.score == 4 and not critique.is_acceptable


def _sentences_by_search(text: str) -> list[str]:
    """The reader's sentences as a search for each in turn would give them (abbreviations aside)."""
    return [match.group(0) for match in _SENTENCE.finditer(text)]


def test_whole_line_reads_sentence_by_sentence_as_a_search_would() -> None:
    rng = random.Random(3)
    pieces = ["Fine", " ", ".", "!", "?", '"', ")", "。", "」", "x", "\n", "Add it", "邀"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 20)))
        joined = " ".join(text.split())
        assert whole_line(text, frozenset()) == "".join(_sentences_by_search(joined)).strip(), repr(text)
    assert (
        whole_line("Use e.g. a list. Then stop. 邀请", frozenset({"LATIN"})) == "Use e.g. a list. Then stop."
    )


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_CPU is POSIX")
def test_the_readers_take_long_hostile_replies_in_bounded_cpu_time() -> None:
    results = within_cpu_limit(
        """
        from reflection_graph._text import extract_code, extract_json_object, whole_line
        from reflection_graph.critique import CritiqueParseError, parse_critique
        out = []
        for piece in GIVEN:
            reply = piece * (20_000 // len(piece))  # whole pieces: the last one ends as the others do
            try:
                parse_critique(reply)
                parsed = "parsed"
            except CritiqueParseError:
                parsed = "unparsable"
            kept = whole_line(reply, frozenset({"LATIN"}))
            out.append([extract_code(reply), extract_json_object(reply), parsed, len(kept)])
        print(json.dumps(out))
        """,
        ["Mr. Dr. e.g. ", "word ", "[[[[ ", '{"a": [', "__ ", "((((", "the end. "],
    )
    by_piece = dict(
        zip(
            ["abbreviations", "words", "lists", "objects", "names", "brackets", "sentences"],
            results,
            strict=True,
        )
    )
    assert all(code == "" and found is None and parsed == "unparsable" for code, found, parsed, _ in results)
    assert by_piece["words"][3] == 0  # no sentence end: no whole sentence
    assert by_piece["sentences"][3] > 19_000  # every sentence kept (their last space aside)
    assert by_piece["abbreviations"][3] > 19_000  # "e.g." at the very end ends the one long sentence


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_CPU is POSIX")
def test_line_patterns_read_a_reply_of_blank_lines_in_bounded_cpu_time() -> None:
    """A pattern that opens a line with `^\\s*` under re.M reads every later blank line from each line's start:
    on 30,000 blank lines the placeholder reader's code-line check, the sign-off rule's greeting check, IFBench's
    bullet count and the stub's `def` check each took about a minute of CPU. They now read only the line's own
    spaces, and still find what they found: a code line, a greeting, a bullet after the blank lines."""
    results = within_cpu_limit(
        """
        from reflection_graph._text._placeholders import placeholders
        from reflection_graph._text._rule_revision import bare_sign_off
        from reflection_graph.critics._instruction_details import DETAILS
        from reflection_graph.loop._code import finish_candidate
        bullets = DETAILS["detectable_format:number_bullet_lists"]
        stub = 'def f(x):\\n    \\"\\"\\"Twice x.\\"\\"\\"\\n'
        out = []
        for blank in GIVEN:
            gap = blank * 30_000
            out.append([
                placeholders(gap + "Dear [Name],"),
                placeholders(gap + "def f():\\n    return '[Name]'"),
                bare_sign_off("Hi Sam," + gap + "Sincerely,"),
                bare_sign_off(gap + "Sincerely,"),
                bullets(gap + "* one" + gap + "- two", {"num_bullets": 2}).found,
                finish_candidate(stub, gap + "def f(x):\\n    return 2 * x\\n"),
            ])
        print(json.dumps(out))
        """,
        ["\n", " \n", "\t \r\n"],
    )
    for spoken, code, signed, unsigned, bullets, candidate in results:
        assert spoken == ["[Name]"] and code == []  # prose is read; code is not
        assert signed == "Sincerely," and unsigned is None  # a letter, then no greeting: no letter
        assert bullets == "the answer must have exactly 2 bullet points; it has 2"
        assert candidate.endswith("def f(x):\n    return 2 * x\n")
