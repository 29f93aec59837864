"""The recipient rule (`by="rule:recipient"`): the answer greets, or signs as, another person than the task names.

- **The greeting.** The task names one person to write to ("an email to my landlord, Mr Brennan", "write to Dr
  Okafor", "reply to Sarah", "a text to my neighbour Greg"), and the answer's greeting line ("Dear Mr Brenan,",
  "Hi Sara,", "Hello Dr Okonkwo") names someone the task nowhere names, in the same form (a title and surname
  against a title and surname or a full name; a first name against a first name).
- **The sign-off.** The task says who signs ("sign it Priyanka Rao", "a note to Sarah from Tom"), and the name
  under the answer's closing ("Best regards,"), or after it on the last line ("Thanks, Tim"), is another
  person's, with the signer's name nowhere in the lines from there to the end. Where the task asks for
  a signature the answer lacks altogether, the required rule names it instead.

Not read where the task names more than one person the answer could greet (or sign as), where it names no
recipient, where the greeting is generic ("Dear team", "Hi all", "Dear Hiring Manager") or the differing word is a
title or a role, where the answer's name is a short form of the task's ("Rob" for Robert, "Liz" for Elizabeth, an
initial), or where a family word greets a relative the task speaks of ("Hi Mum" when the task says "my mother").

Each fault's fix quotes the line concerned and its correction ('Replace "Dear Mr Brenan," with "Dear Mr
Brennan,".'). Every function here is a pure function of its strings; none calls a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import QUOTED, RULE_RECIPIENT, SUBJECT_LINE, answer_lines
from reflection_graph.critics._rule_required import signature_fault

__all__ = ["recipient_faults"]

_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Professor|Sir|Dame|Rev|Revd)"
_WORD = r"(?:[A-Z]['’])?[A-Z][a-z](?:[A-Za-z]|['’-](?!s\b)[A-Za-z])*"
"""A capitalised name ("Sarah", "O'Brien", "Anne-Marie"), not a possessive ("Sarah's")."""
_NAME = rf"{_WORD}(?:\s+{_WORD}){{0,2}}"
_NOT_NAMES = {
    *"monday tuesday wednesday thursday friday saturday sunday".split(),
    *"january february march april may june july august september october november december".split(),
    *"english french german spanish italian portuguese dutch chinese japanese russian arabic hindi".split(),
    "i",
    "slack",
    "teams",
    "whatsapp",
    "linkedin",
}
_GENERIC = {
    *"team all everyone everybody there sir sirs madam gentlemen ladies manager managers hiring customer".split(),
    *"customers colleague colleagues friend friends member members parent parents neighbour neighbours".split(),
    *"neighbor neighbors landlord landlady committee board staff support folks guys residents tenants".split(),
    *"students class partners valued recruiter recruiters recruitment admissions director officer".split(),
    *"coordinator editor owner host organiser organizer applicant candidate client clients chef doctor".split(),
    *"professor teacher coach captain boss council department shareholders investors supporters".split(),
    *"volunteers hr it whom concern love darling honey sweetheart dear friends mate mates buddy y'all".split(),
    *"morning afternoon evening again both you".split(),
}
"""Words of a greeting that name a role or a group, not a person."""
_FAMILY_GREETING = {
    *"mum mom mam mummy mommy mother ma dad daddy father pa papa grandma granny gran nan nana nanna".split(),
    *"grandad granddad grandpa grandmother grandfather auntie aunty aunt uncle sis bro".split(),
}
_FAMILY = re.compile(
    r"\b(?:mum|mom|mam|mummy|mommy|mother|dad|daddy|father|parents?|grand\w+|gran|granny|nan|nana|aunt\w*|uncle|"
    r"sister|brother|sibling|son|daughter|cousin|niece|nephew|wife|husband|family|in-law)\b",
    re.I,
)
"""Words of a task that speak of a relative, whom a family word may greet."""
_SHORT_FORMS = {
    short: full
    for short, full in (
        pair.split(":")
        for pair in (
            "bob:robert bobby:robert rob:robert robbie:robert bill:william billy:william will:william liz:elizabeth "
            "lizzie:elizabeth beth:elizabeth betty:elizabeth jim:james jimmy:james jack:john johnny:john dick:richard "
            "rick:richard ted:edward ned:edward harry:henry peggy:margaret maggie:margaret meg:margaret sue:susan "
            "suzy:susan tony:anthony jenny:jennifer kate:katherine katie:katherine kathy:katherine chuck:charles "
            "charlie:charles becky:rebecca bella:isabella sandy:alexandra sasha:alexander mike:michael mick:michael "
            "nick:nicholas steve:stephen andy:andrew drew:andrew pat:patrick matt:matthew dave:david joe:joseph "
            "jo:joanna sam:samuel alex:alexander chris:christopher tom:thomas dan:daniel ben:benjamin ed:edward "
            "fred:frederick greg:gregory larry:lawrence len:leonard lou:louis nat:nathan nate:nathan pete:peter "
            "phil:philip ron:ronald russ:russell tim:timothy vicky:victoria val:valerie"
        ).split()
    )
}
"""Common short forms of first names that are not the opening of the full one ("Bob" for Robert)."""

_WRITE = (
    r"\b(?:write|writing|draft|drafting|compose|reply|replying|respond|responding|send|sending|e-?mails?|"
    r"messages?|letters?|notes?|texts?|cards?|memos?|dms?|invitations?|responses?|answer|thank-you|postcards?)\b"
)
_BETWEEN = (
    r"(?:\s+(?!(?:about|on|regarding|re|for|from|with|in|at|of|asking|telling|that|and|or)\b)[\w'’-]+){0,5}?"
)
_DETERMINED = (
    r"(?:(?:my|our|the|your|his|her|their)\s+"
    r"(?:(?!(?:about|at|in|on|for|of|from|with|and|or|to|that|who|which|asking|telling|regarding)\b)[a-z][a-z-]*"
    r"\s+){0,3}?,?\s*)?"
)
_RECIPIENT = re.compile(
    rf"(?i:{_WRITE}{_BETWEEN}\s+to|\b(?:e-?mail|message|text|dm))\s+(?i:{_DETERMINED})"
    rf"(?:(?P<title>{_TITLE})\.?\s+)?(?P<name>{_NAME})\b(?!['’]s\b)"
    rf"(?P<more>\s*,?\s*(?:and|or|&|/|,)\s*(?:{_TITLE}\.?\s+)?[A-Z]\w+)?"
)
"""A person the task writes to: "an email to my landlord, Mr Brennan", "reply to Sarah", "email Tom"."""
_TITLED = re.compile(rf"\b(?P<title>{_TITLE})\.?\s+(?P<name>{_WORD}(?:\s+{_WORD})?)")
_SIGNER = re.compile(
    rf"(?:\b[Ss]ign(?:\s+(?:it|off|the\s+\w+|this))?(?:\s+(?:as|with|from))?|\b[Ss]igned\s+as)\s*[:,]?\s+"
    rf"(?:{_TITLE}\.?\s+)?(?:{QUOTED}|(?P<name>{_NAME}))(?P<more>\s*(?:and|&|,)\s+[A-Z]\w+)?"
)
"""The task's word on who signs: "sign it Priyanka Rao", "sign off as Tom" (not "the letter signed by ...")."""
_FROM = re.compile(rf"\s*,?\s*from\s+(?P<name>{_NAME})(?P<more>\s*(?:and|&|,)\s+[A-Z]\w+)?")
_GREETING = re.compile(
    r"^\W{0,2}(?P<hello>Dear|Hi|Hello|Hey|Hiya|Howdy|Greetings|Good\s+(?:morning|afternoon|evening)|Morning)"
    rf"\s*,?\s+(?P<who>(?:(?P<title>{_TITLE})\.?\s+)?(?P<name>{_NAME}))\s*(?P<end>[,!:;.]|\s[-–—]|$)",
    re.I,
)
_CLOSING = (
    r"(?:(?:best|kind|warm|warmest|many|with|yours|all\s+the)\b[\w\s]{0,25}|regards|thanks|thank\s+you|cheers|"
    r"sincerely|yours\s+(?:sincerely|faithfully|truly)|love|take\s+care|best\s+wishes|respectfully|talk\s+soon|"
    r"see\s+you(?:\s+soon)?|speak\s+soon|x+)"
)
_CLOSING_LINE = re.compile(rf"^{_CLOSING}\s*[,.!]?$", re.I)
_SIGNED_LINE = re.compile(
    rf"^(?:(?P<title>{_TITLE})\.?\s+)?(?P<name>{_WORD}(?:\s+(?:{_WORD}|[A-Z]\.)){{0,2}})\.?$"
)
_SIGNED_INLINE = re.compile(rf"^{_CLOSING}\s*,\s*(?P<name>{_WORD}(?:\s+{_WORD}){{0,2}})\s*[.!]?$", re.I)


@dataclass(frozen=True)
class _Person:
    """A person the task names: a title, a first name and a surname, as far as the task gives them."""

    title: str
    first: str
    last: str

    def key(self) -> str:
        return (self.last or self.first).casefold()


def _person(title: str | None, name: str) -> _Person | None:
    """The person `name` (after `title`, if any) is, or None when its first word names no person."""
    words = name.split()
    if not words or words[0].casefold() in _NOT_NAMES or words[0].casefold() in _GENERIC:
        return None
    if title:
        return _Person(title, "", words[-1])
    return _Person("", words[0], words[-1] if len(words) > 1 else "")


def _recipients(task: str, signers: set[str]) -> list[_Person] | None:
    """The people `task` names whom its answer may greet (None when it names several in one breath)."""
    people: dict[str, _Person] = {}
    for match in _RECIPIENT.finditer(task):
        if match.group("more"):
            return None  # "to Sarah and Tom"
        person = _person(match.group("title"), match.group("name"))
        if person and person.key() not in signers:
            people.setdefault(person.key(), person)
    for match in _TITLED.finditer(task):
        person = _person(match.group("title"), match.group("name"))
        if person and person.key() not in signers:
            known = people.get(person.key())
            people[person.key()] = known if known and known.first else person
    return list(people.values())


def _held(word: str, text: str) -> bool:
    """`text` holds `word` as a whole word, case aside."""
    return bool(re.search(rf"(?<![\w'’-]){re.escape(word)}(?![\w'’-])", text, re.I))


def _short_form(said: str, given: str) -> bool:
    """`said` is a short form, an initial or a longer form of `given` ("Rob" for "Robert", "Tom" for "Tomasz")."""
    a, b = said.casefold().rstrip("."), given.casefold()
    if a == b or (len(a) == 1 and b.startswith(a)):
        return True
    short, full = sorted((a, b), key=len)
    if full.startswith(short) and len(full) - len(short) >= 2:
        return True
    return (
        _SHORT_FORMS.get(a) == b
        or _SHORT_FORMS.get(b) == a
        or _SHORT_FORMS.get(a, a) == _SHORT_FORMS.get(b, b)
    )


def _greeting(answer: str, given: str, people: list[_Person]) -> Fault | None:
    """The answer's greeting line naming someone `given` (the task and context) does not, where `people` is one."""
    lines = [line for line in answer_lines(answer)[:2] if not SUBJECT_LINE.match(line)]
    greeted = _GREETING.match(lines[0]) if lines else None
    if not greeted or len(people) != 1:
        return None
    words = greeted.group("name").split()
    if any(w.casefold() in _GENERIC or re.fullmatch(_TITLE, w) for w in words):
        return None
    if all(_held(w, given) for w in words):
        return None
    if words[0].casefold() in _FAMILY_GREETING and _FAMILY.search(given):
        return None  # "Hi Mum" where the task writes to "my mother"
    person, title = people[0], greeted.group("title")
    if title:
        said, right = words[-1], person.last
        if not right or _held(said, given) or _short_form(said, right):
            return None
        who = f"{person.title or title} {right}"
    else:
        said, right = words[0], person.first
        if not right or _held(said, given) or _short_form(said, right):
            return None
        who = (
            " ".join([right, *words[1:]]) if len(words) == 1 or not person.last else f"{right} {person.last}"
        )
    line = greeted.group(0).strip()
    fixed = f"{greeted.group('hello')} {who}{greeted.group('end').strip()}"
    return Fault(
        issue=f'The answer greets "{greeted.group("who")}", but the task\'s recipient is '
        f"{(person.title + ' ' if person.title else '') + ' '.join(p for p in (person.first, person.last) if p)}.",
        fix=f'Replace "{line}" with "{fixed}".',
        by=RULE_RECIPIENT,
    )


def _signer(task: str) -> tuple[str, ...] | None:
    """The name the task says the answer is signed with, as words (None when it names none, or several)."""
    names = []
    for match in _SIGNER.finditer(task):
        if match.group("more"):
            return None
        names.append(match.group("x") or match.group("name"))
    for match in _RECIPIENT.finditer(task):
        after = _FROM.match(task, match.end())
        if after:
            if after.group("more"):
                return None
            names.append(after.group("name"))
    words = {
        tuple(w for w in name.split() if not re.fullmatch(rf"{_TITLE}\.?", w))
        for name in names
        if name and re.match(_WORD, name.strip())
    }
    words.discard(())
    return words.pop() if len(words) == 1 else None


def _sign_off(answer: str, task: str, signer: tuple[str, ...]) -> Fault | None:
    """The name under the answer's closing, where it is not `signer` nor a short form of it."""
    lines = answer_lines(answer)
    below = next(
        (i for i in range(max(1, len(lines) - 3), len(lines)) if _SIGNED_LINE.match(lines[i])),
        None,
    )
    found: tuple[str, str] | None = None
    if below is not None and _CLOSING_LINE.match(lines[below - 1]):
        signed_line = _SIGNED_LINE.match(lines[below])
        found = (signed_line.group("name"), lines[below]) if signed_line else None
        block = " ".join(lines[below:])
    elif lines and (inline := _SIGNED_INLINE.match(lines[-1])) and not _held(inline.group("name"), task):
        found, block = (
            (inline.group("name"), lines[-1]),
            lines[-1],
        )  # "Thanks, Sarah!" may thank the recipient
    if found is None or _held(" ".join(signer), block):
        return None  # "Anita, for Priyanka Rao": the signer is there
    signed = found[0].split()
    if any(w.casefold() in _GENERIC for w in signed):
        return None
    pairs = (
        list(zip(signed, signer, strict=True))
        if len(signed) == len(signer)
        else [(signed[0], signer[0])]
        if len(signed) > len(signer)
        else [(w, next((s for s in signer if _short_form(w, s)), signer[0])) for w in signed]
    )
    if all(_short_form(said, right) for said, right in pairs):
        return None
    name = " ".join(signer)
    return Fault(
        issue=f'The answer is signed "{found[0]}", but the task says it is from {name}.',
        fix=f'Replace "{found[1]}" with "{found[1].replace(found[0], name)}".',
        by=RULE_RECIPIENT,
    )


def recipient_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The answer's greeting or sign-off naming another person than the task does (the module doc).

    Args:
        answer: the candidate answer.
        task: the task it answers.
        context: the task's context, if any (a name it holds counts as named).
    """
    if not answer.strip():
        return []
    given = f"{task}\n{context or ''}"
    signer = _signer(task)
    signers = {signer[-1].casefold()} if signer else set()
    people = _recipients(task, signers)
    faults = []
    greeted = _greeting(answer, given, people) if people else None
    if greeted:
        faults.append(greeted)
    if signer and signature_fault(task, answer) is None:
        signed = _sign_off(answer, task, signer)
        if signed:
            faults.append(signed)
    return faults
