"""Faults a rule names beside the model: each one real by construction, each with the critic that named it.

A small judge writes a fault for nearly every answer and misses most real ones; a few faults need no judge at all,
only a reading of the task and the answer. The rules here name those, and only where the check is unambiguous, so a
fault a rule names is a fault:

- **placeholder** (`by="rule:placeholder"`): a template slot (`[Your Name]`, `<name>`) the task and its context do
  not hold (reflection_graph/_text/_placeholders.py), with the placeholder rule's concrete edits as its fix.
- **required** (`by="rule:required"`): the task states a requirement in a form a rule can check, and the answer
  misses it:
  - "with a subject line" (and "include/add a subject line"): no line of the answer opens with `Subject:`;
  - "sign it as Priya Shah": the name is nowhere in the answer;
  - "in 30 words or fewer" ("at most", "no more than", "no longer than", "under", "fewer than", "a limit of",
    "a 30-word limit", "at least"): the count is past the limit however the words are counted (split at spaces,
    or runs of letters and digits); "a 60-word description": more than a quarter over;
  - "exactly 3 bullet points" ("in 4 bullet points", "exactly 5 steps", "in five numbered steps"): the answer's
    list items, bullets or numbered, at their outermost level, are not that many (steps the answer writes as
    prose or under "Step 1" headings are not counted);
  - "include/mention/use the phrase "..."" (quoted): the words are nowhere in the answer, case and spacing
    aside; "end/start it with "..."": the answer does not end (start) with them, its closing punctuation aside;
  - "all in lowercase" ("all in capital letters"): a letter of the other case; "without commas": a comma;
  - "in one paragraph": two blocks of prose apart from a greeting line and a short sign-off; "in two (or more)
    paragraphs": fewer lines than paragraphs; "in one (two, ...) sentences" ("at most", "no more than", "or
    fewer"): more sentences than that (split only at `.`, `!` or `?` before a capital, not after an abbreviation
    or an initial).
  A requirement after "not", "never" or "without", offered as one of alternatives ("X" or "Y"), or scoped to a
  part ("5 words for the title"; not "60 words for the Trailhead backpack"), is not read.
- **passed on** (`by="rule:required"`, reflection_graph/critics/_rule_given.py): a phone number, email address,
  date or time a task sentence plainly asks to pass on ("give him my number, 07911 482305", "questions go to ...
  on ...", "remind them it is due by Friday 28 June", "ask them to reply by ...", "announcing ...: 10 am to 1 pm")
  that the answer holds in no form (digits with spacing aside; a date by day and month, or its weekday); not in a
  summary, in quotes, after "not", or where the sentence moves the date or leaves it to the writer.
- **facts** (`by="rule:facts"`, reflection_graph/critics/_rule_facts.py): a weekday, date, clock time, amount or
  percentage the task gives, said otherwise in the answer (one of the task's missing, a value it does not give in
  its place, where the task leaves no such value to the writer); a code or number the task gives after a word
  ("order 4417", "flat 12B", "TP 1357", "spring 2027") that the answer holds in no form, with a variant of the
  same shape after the same word in its place (two characters swapped or one changed: "order 4471"; any variant
  after a word that is not a small one: "Room 2A" for "Room 4B"; reflection_graph/critics/_rule_codes.py); a
  count the answer announces for the list under it ("three reasons:") that the list does not hold.
- **script** (`by="rule:script"`): the answer's letters are mostly in one script (Cyrillic, say) that is neither
  the task's nor its context's, nor the script of a language the task names ("Reply in Russian"). A task that
  speaks of translating, a language, a script or an alphabet is left to the judge.
- **language** (`by="rule:language"`, reflection_graph/critics/_rule_language.py): a sentence, or the whole answer,
  in another language of the same script (German in an English email; English where the task asks for French), by
  a language detector (the `[language]` extra; without it the rule names nothing), read only where it is sure.
- **arithmetic** (`by="rule:arithmetic"`, reflection_graph/critics/_rule_arithmetic.py): a sum the answer works
  out wrong: an equation in symbols or words ("3 x 4 = 13", "12 plus 15 is 28", "20% of 80 is 18"), or a quantity
  at a price and its total in one clause ("4 tickets at £12.50 each come to £45.00"), a result rounded or cut to
  the decimals it shows counting as right; not read in code, quotes, dates, times, ranges, or a sentence that shows
  the sum as wrong or guesses it.
- **recipient** (`by="rule:recipient"`, reflection_graph/critics/_rule_recipient.py): the answer's greeting names
  someone the task nowhere names where the task writes to one person ("Dear Mr Brenan," for "my landlord, Mr
  Brennan"; "Hi Tomasz," for "a message to Fatima"), or the name under its closing is not the one the task says
  signs ("sign it Priyanka Rao", "from Tom"); not read where the task names several people or none, for a generic
  greeting ("Dear team", "Dear Hiring Manager"), a title, a role or a short form of the name ("Rob" for Robert).

Each rule's fix is a concrete edit that quotes the text it concerns. Every function here is a pure function of its
strings; none calls a model.
"""

from __future__ import annotations

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_arithmetic import arithmetic_faults
from reflection_graph.critics._rule_facts import facts_faults
from reflection_graph.critics._rule_given import given_faults
from reflection_graph.critics._rule_language import language_faults
from reflection_graph.critics._rule_placeholder import placeholder_fault, placeholder_faults, sign_off_fault
from reflection_graph.critics._rule_reading import (
    RULE_ARITHMETIC,
    RULE_FACTS,
    RULE_LANGUAGE,
    RULE_PLACEHOLDER,
    RULE_RECIPIENT,
    RULE_REQUIRED,
    RULE_SCRIPT,
)
from reflection_graph.critics._rule_recipient import recipient_faults
from reflection_graph.critics._rule_required import required_faults
from reflection_graph.critics._rule_script import script_faults

__all__ = [
    "RULE_ARITHMETIC",
    "RULE_FACTS",
    "RULE_LANGUAGE",
    "RULE_PLACEHOLDER",
    "RULE_RECIPIENT",
    "RULE_REQUIRED",
    "RULE_SCRIPT",
    "arithmetic_faults",
    "facts_faults",
    "given_faults",
    "language_faults",
    "placeholder_fault",
    "placeholder_faults",
    "read_faults",
    "recipient_faults",
    "required_faults",
    "rule_faults",
    "script_faults",
    "sign_off_fault",
]


def rule_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """Every fault the rules name in `answer`: placeholders, missed requirements and values to pass on, changed facts, another script,
    another language, wrong sums, another recipient or signer (in that order).

    Args:
        answer: the candidate answer.
        task: the task it answers.
        context: the task's context, if any.
    """
    return [
        *placeholder_faults(answer, task=task, context=context),
        *read_faults(answer, task=task, context=context),
    ]


def read_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The faults the rules name by reading the task and the answer, the placeholder rule's apart: missed
    requirements, values to pass on left out, changed facts, another script, another language, wrong sums, another
    recipient or signer (in that order). `JudgeCritic` adds the placeholder fault from its own judgement.

    Args:
        answer: the candidate answer.
        task: the task it answers.
        context: the task's context, if any.
    """
    return [
        *required_faults(answer, task=task, context=context),
        *given_faults(answer, task=task, context=context),
        *facts_faults(answer, task=task, context=context),
        *script_faults(answer, task=task, context=context),
        *language_faults(answer, task=task, context=context),
        *arithmetic_faults(answer, task=task, context=context),
        *recipient_faults(answer, task=task, context=context),
    ]
