"""The script rule (`by="rule:script"`): the answer's letters are mostly in one script that is neither the task's
nor its context's, nor the script of a language the task names. A task that speaks of translating, a language, a
script or an alphabet is left to the judge."""

from __future__ import annotations

import re
from collections import Counter

from reflection_graph._text import script_of, scripts
from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import CODE, RULE_SCRIPT, answer_lines, clip

__all__ = ["script_faults"]


_LANGUAGE_SCRIPTS = {
    "english": "LATIN",
    "french": "LATIN",
    "spanish": "LATIN",
    "german": "LATIN",
    "italian": "LATIN",
    "portuguese": "LATIN",
    "dutch": "LATIN",
    "russian": "CYRILLIC",
    "ukrainian": "CYRILLIC",
    "bulgarian": "CYRILLIC",
    "serbian": "CYRILLIC",
    "belarusian": "CYRILLIC",
    "kazakh": "CYRILLIC",
    "mongolian": "CYRILLIC",
    "greek": "GREEK",
    "chinese": "CJK",
    "mandarin": "CJK",
    "cantonese": "CJK",
    "japanese": "CJK",
    "korean": "HANGUL",
    "arabic": "ARABIC",
    "persian": "ARABIC",
    "farsi": "ARABIC",
    "urdu": "ARABIC",
    "hebrew": "HEBREW",
    "yiddish": "HEBREW",
    "hindi": "DEVANAGARI",
    "marathi": "DEVANAGARI",
    "nepali": "DEVANAGARI",
    "thai": "THAI",
    "bengali": "BENGALI",
    "tamil": "TAMIL",
    "georgian": "GEORGIAN",
    "armenian": "ARMENIAN",
}
_LANGUAGE_TALK = re.compile(
    r"translat|transliterat|romani[sz]|language|script|alphabet|characters|kanji|kana|pinyin|how (?:do you|to) say",
    re.I,
)
_MIN_LETTERS = 4


def _script_name(script: str) -> str:
    return "Chinese or Japanese (Han or kana)" if script == "CJK" else script.title()


def script_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The answer written mostly in a script that neither `task`, `context` nor a language `task` names uses (see
    the module doc).

    Args:
        answer: the candidate answer (its code, fenced or in backticks, is not read).
        task: the task.
        context: the task's context; its scripts are allowed too.
    """
    if _LANGUAGE_TALK.search(task):
        return []
    letters = Counter(s for ch in CODE.sub(" ", answer) if (s := script_of(ch)) is not None)
    total = sum(letters.values())
    if total < _MIN_LETTERS:
        return []
    main, count = letters.most_common(1)[0]
    allowed = set(scripts(task, context))
    allowed |= {script for name, script in _LANGUAGE_SCRIPTS.items() if re.search(rf"\b{name}\b", task, re.I)}
    if count * 2 <= total or main in allowed or not allowed:
        return []
    first = answer_lines(CODE.sub(" ", answer))[0]
    theirs = " or ".join(sorted(_script_name(s) for s in scripts(task, context))) or "another"
    return [
        Fault(
            issue=f"The answer is written in the {_script_name(main)} script, not in the task's language "
            f"(the task is in the {theirs} script).",
            fix=f'Write the whole answer again in the task\'s language, starting with its first line "{clip(first)}".',
            by=RULE_SCRIPT,
        )
    ]
