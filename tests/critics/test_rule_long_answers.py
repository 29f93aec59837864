"""The rules read a long or hostile answer in bounded work: no pattern is tried in exponentially many ways, and none
grows with the square of the answer's length.

Found by feeding the rules long answers of one repeated piece each: a sum of 20 ones that ends in no result ("1 + 1
+ ... + 1 and") took the arithmetic rule 7 s, each further term doubling it; 16,000 characters of "20% of 80 is 18"
took 9 s, of unclosed brackets and of abbreviations ("Mr. Dr. e.g.") seconds more. A critic runs its rules on every
candidate, so such an answer stalled the loop.

The guard is a child process under a CPU-time limit (tests/_cpu.py), not a clock: it reads CPU seconds the child
spent, which another process on the machine does not add to, and its limit is some 50 times what the whole check
takes here (about 1 s), while the old patterns needed minutes to years for the same answers.
"""

from __future__ import annotations

import random
import re
import sys

import pytest

from reflection_graph.critics._rule_arithmetic import arithmetic_faults
from reflection_graph.critics._rule_faults import rule_faults
from reflection_graph.critics._rule_reading import blank_quotes, split_sentences
from tests._cpu import within_cpu_limit

TASK = (
    "Write an email to my landlord, Mr Brennan, in 30 words or fewer with a subject line, in exactly 3 bullet points, "
    'include the phrase "thanks a lot", all in lowercase, sign it as Priya Shah. Give him my number, 07911 482305, '
    "and remind them it is due by Friday 28 June at 10 am. Order 4417 costs £12.50."
)

HOSTILE = [
    "1 + ",  # a sum with no result: each of its terms could be read two ways
    "20% of 80 is 18 ",  # a wrong sum in a sentence that never ends
    "4 x 5 = 21 and ",
    "1 + 1 + 1 = 4 and 1 + 1 = 3 and ",
    "(((( [[[[ “ ",  # openers with no closer on their line
    "Mr. Dr. e.g. i.e. ",  # abbreviations: one sentence that never ends
    "£12.50 each at 4 tickets come to £45.00 ",
    "Dear Mr Dear Ms Hi ",
    "order 4417 flat 12B ",
    "10 am to 1 pm on Friday 28 June ",
    "          \n",
]
LENGTH = 20_000


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_CPU is POSIX")
def test_every_rule_reads_long_hostile_answers_in_bounded_cpu_time() -> None:
    counts = within_cpu_limit(
        """
        from reflection_graph.critics._rule_faults import rule_faults
        task, pieces, length = GIVEN
        counts = []
        for piece in pieces:
            answer = (piece * (length // len(piece) + 1))[:length]
            counts.append(len(rule_faults(answer, task=task)) + len(rule_faults(answer, task=answer[:3000])))
        print(json.dumps(counts))
        """,
        [TASK, HOSTILE, LENGTH],
    )
    read = dict(zip(HOSTILE, counts, strict=True))
    # the rules still read these answers: the task's subject line and its signer are missing from each; a blank
    # answer is not read
    assert read.pop("          \n") == 0
    assert all(count >= 2 for count in read.values()), read


def test_a_sum_with_no_result_is_not_read_and_a_wrong_one_far_into_a_long_answer_is() -> None:
    assert arithmetic_faults("1 + " * 60 + "1 and so on.", task="Add them up.") == []
    filler = "The plan is fine, and we keep going. " * 600  # about 22,000 characters of sentences before it
    (fault,) = arithmetic_faults(filler + "In all, 3 x 4 = 13 seats.", task="Count the seats.")
    assert fault.fix == 'Replace "13" with "12".'
    # a sentence with no end is read up to 600 characters each side of the sum: "not" is in reach, then out of it
    near = "It is not true that " + "so " * 150 + "3 x 4 = 13"
    far = "It is not true that " + "so " * 250 + "3 x 4 = 13"
    assert arithmetic_faults(near, task="x") == []
    assert [f.fix for f in arithmetic_faults(far, task="x")] == ['Replace "13" with "12".']


def test_sums_of_up_to_twelve_numbers_are_read_longer_ones_are_not() -> None:
    twelve = " + ".join(["1"] * 12) + " = 13"
    thirteen = " + ".join(["1"] * 13) + " = 14"
    assert [f.fix for f in arithmetic_faults(twelve, task="x")] == ['Replace "13" with "12".']
    assert arithmetic_faults(thirteen, task="x") == []


QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|\([^)\n]*\)|\[[^\]\n]*\]')
"""What `blank_quotes` blanks, as one pattern: the definition it is checked against."""


def test_blanking_quotes_in_one_pass_is_the_quote_pattern() -> None:
    rng = random.Random(5)
    marks = ['"', "“", "”", "(", ")", "[", "]", "\n", "a", " ", "3"]
    for _ in range(5000):
        text = "".join(rng.choice(marks) for _ in range(rng.randint(0, 40)))
        assert blank_quotes(text) == QUOTED.sub(lambda m: " " * len(m.group(0)), text), repr(text)


def test_splitting_sentences_keeps_abbreviations_in_long_runs() -> None:
    text = "Mr. Dr. e.g. " * 3000 + "Done. Next one."
    parts = split_sentences(text)
    assert len(parts) == 2
    assert parts[0].startswith("Mr. Dr.") and parts[0].endswith("Done.")
    assert parts[1] == "Next one."


def test_the_rules_still_name_the_faults_of_a_short_answer() -> None:
    faults = rule_faults("Hi Mr Brennan, 4 tickets at £12.50 each come to £45.00. Thanks", task=TASK)
    assert {f.by for f in faults} >= {"rule:arithmetic", "rule:required"}
