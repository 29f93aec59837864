"""The named prompt templates, one per role, and the texts they are built from (the worked examples, the rules
and focus lines a revision adds, the cue lines every completion-style template ends with). Their placeholders are
listed in the door of `reflection_graph.prompts`; the functions that fill them are in `_requests.py`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

CUE_LINES: tuple[str, ...] = (
    "Task:",
    "Draft:",
    "Candidate answer:",
    "Critique of the previous answer:",
    "Revised answer:",
    "JSON verdict:",
)
"""The section and cue lines of the completion-style templates below. A model that writes one again on a line of its
own has finished its answer and starts the next prompt: the embedded model stops there (`DEFAULT_STOP` of
reflection_graph/models/_prompting.py for a base model; through a chat template, the cue its prompt ends with)."""

PromptOverride = str | Callable[[Mapping[str, Any]], str]
"""A prompt override: a template string with the placeholders above, or a callable that gets them as a dict."""

GENERATE_SYSTEM = """Each task below is followed by a complete answer that does exactly what the task asks.

Task: Write a polite email declining an invitation to speak at the Python meetup in May.
Draft:
Dear Priya,

Thank you for inviting me to speak at the Python meetup in May. I am sorry, but I must decline the invitation, as I will be travelling that month. Thank you again for thinking of me.

Best regards,
Tom

Task: Explain in two sentences why the sky is blue.
Draft:
Sunlight is scattered by the molecules of the air, and blue light, with its short wavelength, is scattered much more than red light. So blue light reaches our eyes from every part of the sky.
"""
"""Completion-style worked examples: a base model (the embedded Gemma 3 270M) continues the pattern with an answer
of the same shape; an instruction-tuned model reads them as examples of the expected output."""

GENERATE_PROMPT = """Task: {task}
{context}{lessons}Draft:
"""

CRITIQUE_SYSTEM = (
    "You are a strict reviewer. You judge a candidate answer against its task and reply with JSON only, "
    'with the keys "issues", "suggestions", "is_acceptable", "score" and "feedback".'
)

THRESHOLD_RULE = "A candidate is acceptable only if it deserves a score of at least {threshold} out of 10."

CRITIQUE_PROMPT = """Task: {task}
{context}
Candidate answer:
{candidate}

Review the candidate. List concrete issues and concrete suggestions. Score it from 0 to 10.
{threshold_rule}{guidelines}
JSON verdict:
"""

JUDGE_EXAMPLES = """Task: What is 2 + 3?
Answer: 2 + 3 = 5.
Correct: Yes

Task: Name a primary colour.
Answer: A bicycle has two wheels.
Correct: No
Problem: The answer is off topic; it should name a colour such as red.

Task: Write a short, friendly greeting for a neighbour.
Answer: Good morning! I hope you have a lovely day.
Correct: Yes

Task: What is the capital of Italy?
Answer: The capital of Italy is Madrid.
Correct: No
Problem: Madrid is the capital of Spain; the capital of Italy is Rome.

Task: Write a Python function double(x) that returns x times two.
Answer: def double(x):
    return x * 2
Correct: Yes

Task: Write a polite note asking a colleague to review a document.
Answer: Read my document now, I don't have all day.
Correct: No
Problem: The note is rude; it should ask politely and thank the colleague.
"""
"""Few-shot examples of the `LogprobCritic`: a verdict line after each answer, and a problem line after a No."""

JUDGE_PROMPT = """{examples}
Task: {task}
{context}Answer: {candidate}
Correct:"""
"""The `LogprobCritic`'s verdict signal reads the next-token probabilities of " Yes" and " No" after this prompt."""

PAIRWISE_PROMPT = """Task: {task}
{context}
Answer A:
{a}

Answer B:
{b}

Which answer does the task better, A or B? Reply with the single letter A or B.
Better answer:"""
"""The `PairwiseCritic`'s question; it is asked twice, with the answers swapped."""

LIKELIHOOD_PROMPT = """Task: {task}
{context}Answer: {candidate}"""
"""The `LogprobCritic`'s likelihood signal: the mean log-probability of the candidate's tokens after `Answer:`."""

CHAT_ANSWER_OPENING = """Task:
{task}
{context}
Answer:
{candidate}

"""
"""How every `JudgeCritic` prompt about one answer opens (its verdict, its written critique, its checks of a fault):
the same text each time, so a model that keeps a shared prefix evaluates the task and the answer once."""

CHAT_VERDICT_PROMPT = (
    CHAT_ANSWER_OPENING + "Is this answer correct, and does it do what the task asks? Reply with Yes or No."
)
"""The `JudgeCritic`'s yes/no question: it reads P(Yes) and P(No) of the reply's first token."""

CHAT_PREFERENCE_PROMPT = """Task:
{task}
{context}
Answer A:
{a}

Answer B:
{b}

Which answer does the task better, A or B? Reply with the single letter A or B."""
"""The `JudgeCritic`'s comparison: it reads P(A) and P(B) of the reply's first token, in both orders."""

CHAT_CRITIQUE_SYSTEM = (
    "You review answers. You list only real faults: a wrong fact, number or result, something the task asks "
    "for that is missing, something the task did not ask for, or a tone that does not fit. You never invent a "
    "fault: an answer that does the task gets an empty list. You never suggest a template placeholder such as "
    "[Your Name]."
)
"""The reviewer's instructions, in the closing paragraph of `CHAT_CRITIQUE_PROMPT`: after the task and the answer,
so the critique's prompt starts with the very text of the verdict's (the embedded model evaluates it once)."""

CHAT_CRITIQUE_PROMPT = (
    CHAT_ANSWER_OPENING
    + CHAT_CRITIQUE_SYSTEM.replace("{", "{{").replace("}", "}}")
    + """ List the answer's real faults, each with how to fix it, as JSON: {{"faults": [{{"issue": "...", \
"fix": "..."}}]}}.
Write each issue and each fix as one short, whole sentence in the language of the task. Name the most important \
fault first."""
)
"""The `JudgeCritic`'s written critique (JSON through the model's grammar); it names faults, it does not score."""

CHAT_FAULT_PROMPT = (
    CHAT_ANSWER_OPENING
    + """Does this answer have this fault: {fault}
Reply with Yes or No."""
)
"""The `JudgeCritic`'s check of one written fault: it reads P(Yes) and P(No) of the reply's first token."""

CHAT_NO_FAULT_PROMPT = (
    CHAT_ANSWER_OPENING
    + """Is this answer free of this fault: {fault}
Reply with Yes or No."""
)
"""The same check asked the other way round (`JudgeCritic(confirm="both")`): a judge that says Yes to any
question adds as much to one as to the other, so the difference of the two readings is free of it."""

CHAT_FAULT_CHOICE_PROMPT = (
    CHAT_ANSWER_OPENING
    + """A reviewer wrote about this answer: {fault}
Which is true?
A: {a}
B: {b}
Reply with A or B."""
)
"""The check of one written fault as a choice between "the reviewer is right" and "the reviewer is wrong"
(`JudgeCritic(confirm="choice")`), asked with each in place A in turn: a judge that picks a position adds as much
to one reading as it takes from the other, as in `CHAT_PREFERENCE_PROMPT`."""

FAULT_HELD = "The reviewer is right: the answer has this fault."
"""The choice that confirms a written fault (`CHAT_FAULT_CHOICE_PROMPT`)."""
FAULT_NOT_HELD = "The reviewer is wrong: the answer does not have this fault."
"""The choice that rejects a written fault (`CHAT_FAULT_CHOICE_PROMPT`)."""

REVISE_SYSTEM = """Each task below is followed by an earlier answer, a critique of it, and a revised answer that fixes
what the critique found and keeps what was right.

Task: Write a short note thanking a neighbour for watering my plants while I was away.
Previous answer:
thanks for the plants
Critique of the previous answer:
Score: 2.0/10. Acceptable: False.
Issues:
- Too short and too casual.
Suggestions:
- Greet the neighbour, say what they did, and sign off.
Revised answer:
Hi Maria,

Thank you so much for watering my plants while I was away. They are green and healthy, and it was a real help.

Best wishes,
Tom
"""
"""A completion-style worked example of a revision (see `GENERATE_SYSTEM`)."""

PRESERVE_CORRECT_RULE = (
    "Keep every part of the previous answer that the critique did not object to unchanged."
)

FOCUS_PROMPTS: dict[str, str] = {
    "general": "",
    "code": (
        "Return only the complete corrected code. Fix the failing tests and reported errors first; "
        "do not change function names or signatures the tests rely on."
    ),
    "reasoning": (
        "Re-check each reasoning step the critique questions, fix the wrong step and everything that "
        "depends on it, and state the final answer clearly at the end."
    ),
    "format": (
        "Fix the format problems exactly as reported (structure, required fields, length) "
        "without changing the content that is already right."
    ),
}

FOCUS_CUES: dict[str, str] = {"code": "```python\n"}
"""Appended after the cue line of the default draft and revise prompts: small base models write prose for code
tasks unless the prompt already opens a code fence (instruction-tuned models simply continue the fence)."""

REVISE_PROMPT = """Task: {task}
{context}{history}{preserve_rule}{focus}Previous answer:
{candidate}
Critique of the previous answer:
{critique}
Revised answer:
"""

CHAT_REVISE_PROMPT = """A review of your answer:
{critique}

{preserve_rule}{focus}Write the revised answer only, with nothing before or after it."""
"""A revision asked of a model prompted through its chat template, after its own previous answer."""

FRESH_DRAFT_PROMPT = """{request}

An earlier answer to this request had these faults. Write a new, complete answer without them:
{faults}"""
"""A fresh draft that is told the faults a critique found (the `fresh_draft` tactic, after revisions that changed
nothing)."""
