"""A verifier for verifiable instructions: IFEval's and IFBench's checkers, run offline.

`InstructionCritic` takes instructions the way IFEval and IFBench write them (`instruction_id_list` plus one
`kwargs` dict per instruction) and judges a candidate with the checkers of the `if-verifiable` package (the IFEval
and IFBench checker code, kept on PyPI without spaCy): each instruction the candidate does not follow is an issue,
every one followed is acceptance, and `checks_passed`/`checks_total` make it a verifier for the loop's selection
and stop rules. Nothing here re-implements a checker; the verdicts are the library's own (strict mode: the answer
as written, the prompt-level strict measure of both benchmarks).

Offline: the library tries to download NLTK data when it is imported; that download is switched off here (nothing
is fetched at import or at run time). The few checkers that need NLTK data (`NEEDS_NLTK_DATA`) run only where that
data is already installed (`nltk.data.find`, a local look-up); elsewhere they are refused when the critic is built,
with `InstructionUnavailableError` naming them and the data they need.

Install with `pip install "reflection-graph[instructions]"`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import random
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from reflection_graph.critics._instruction_details import DETAILS
from reflection_graph.critics.base import CritiqueRequest, InlineCritic
from reflection_graph.critique import Critique, Finding
from reflection_graph.settings import frozen, thawed

__all__ = [
    "NEEDS_NLTK_DATA",
    "InstructionCritic",
    "InstructionUnavailableError",
    "supported_instructions",
    "unavailable_instructions",
]

_PUNKT = "tokenizers/punkt_tab/english/"
NEEDS_NLTK_DATA: dict[str, tuple[str, ...]] = {
    # IFBench
    "format:title_case": (_PUNKT,),
    "ratio:stop_words": ("corpora/stopwords",),
    "words:keywords_specific_position": (_PUNKT,),
    "words:start_verb": (_PUNKT, "taggers/averaged_perceptron_tagger_eng/"),
    "words:words_position": (_PUNKT,),
    # IFEval
    "change_case:capital_word_frequency": (_PUNKT,),
    "length_constraints:number_sentences": (_PUNKT,),
}
"""The checkers that need NLTK data (instruction id -> the NLTK resources it loads). No PyPI package ships that
data, and nothing here downloads it: these run only where it is installed already (`nltk.download(...)` run by the
user beforehand), and are refused elsewhere. Every other checker of both libraries runs with no data at all."""

_IMPORT_LOCK = threading.Lock()


class InstructionUnavailableError(ValueError):
    """An instruction whose checker cannot run offline here (its NLTK data is not installed)."""


@functools.cache
def _registry() -> dict[str, Any]:
    """Both checker registries, merged (their ids do not overlap), imported with NLTK's downloader switched off."""
    try:
        import nltk
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise ImportError(
            'InstructionCritic needs the checker library: pip install "reflection-graph[instructions]"'
        ) from exc
    with _IMPORT_LOCK:
        original = nltk.download

        def _no_download(*args: Any, **kwargs: Any) -> bool:
            return False  # what nltk.download returns when it could not fetch: nothing is fetched

        nltk.download = _no_download
        try:
            ifeval = importlib.import_module("if_verifiable.ifeval.instructions_registry")
            ifbench = importlib.import_module("if_verifiable.ifbench.instructions_registry")
        except ImportError as exc:
            raise ImportError(
                f"InstructionCritic needs the checker library ({exc}): "
                'pip install "reflection-graph[instructions]"'
            ) from exc
        finally:
            nltk.download = original
    return {**ifeval.INSTRUCTION_DICT, **ifbench.INSTRUCTION_DICT}


def supported_instructions() -> list[str]:
    """Every instruction id the checker library knows (IFEval's and IFBench's), sorted."""
    return sorted(_registry())


def _missing_data(resources: Sequence[str]) -> list[str]:
    import nltk

    missing = []
    for resource in resources:
        try:
            nltk.data.find(resource)
        except LookupError:
            missing.append(resource)
    return missing


def unavailable_instructions() -> dict[str, list[str]]:
    """The instructions refused on this machine: id -> the NLTK resources it needs that are not installed."""
    _registry()
    found = {iid: _missing_data(resources) for iid, resources in NEEDS_NLTK_DATA.items()}
    return {iid: missing for iid, missing in found.items() if missing}


def _clean_kwargs(kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """IFEval/IFBench rows carry every argument name with None for the unused ones; the checkers take the rest.
    A whole number stored as a float (IFBench's data file writes `27.0`) is given as an int, so the instruction the
    reviser reads says "the 27-th sentence", not "the 27.0-th"."""
    return {
        k: int(v) if isinstance(v, float) and v.is_integer() else v
        for k, v in (kwargs or {}).items()
        if v is not None
    }


_TEXT, _TEXTS, _COUNT = "text", "texts", "count"
_ARGUMENT_KINDS: dict[str, str] = {
    **dict.fromkeys(
        "capital_relation end_phrase first_word keyword keyword1 keyword2 keyword3 keyword4 keyword5 language "
        "let_relation letter options postscript_marker prompt_to_repeat reference_text relation section_spliter "
        "sep word".split(),
        _TEXT,
    ),
    **dict.fromkeys(["forbidden_words", "keywords"], _TEXTS),
    **dict.fromkeys(
        "N capital_frequency frequency let_frequency m max_words min_words n n_end n_start nth_paragraph "
        "num_bullets num_highlights num_paragraphs num_placeholders num_sections num_sentences num_words "
        "percentage small_n".split(),
        _COUNT,
    ),
}
"""What each argument of the checkers' `build_description` holds, as their docstrings say (an argument name means
the same everywhere in both libraries): text, a list of texts (`keywords`, `forbidden_words`) or a count. A test
checks that every argument of the installed checkers is listed here."""

_EXPECTED = {
    _TEXT: "a non-empty string",
    _TEXTS: "a non-empty list of non-empty strings",
    _COUNT: "a whole number >= 0 (an int, or a float such as 5.0 as the benchmark files write it)",
}


def _fits(kind: str, value: Any) -> bool:
    if kind == _TEXT:
        return isinstance(value, str) and bool(value.strip())
    if kind == _TEXTS:
        return (
            isinstance(value, (list, tuple))
            and bool(value)
            and all(isinstance(v, str) and v.strip() for v in value)
        )
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and float(value).is_integer()
        and value >= 0
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _declared_arguments(checker: Any) -> tuple[str, ...]:
    """The named arguments of a checker's `build_description` (none for the ones taking only `**kwargs`)."""
    parameters = inspect.signature(checker.build_description).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in parameters if p.kind in named and p.name != "self")


def _checked_ids(instruction_id_list: Any) -> list[str]:
    """The ids as a list of strings, or a one-line error naming the item that is not one."""
    if isinstance(instruction_id_list, str):
        raise ValueError(
            f"instruction_id_list must be a list of ids, not one string; write [{instruction_id_list!r}]"
        )
    if isinstance(instruction_id_list, (bytes, Mapping)) or not isinstance(instruction_id_list, Iterable):
        raise ValueError(
            f"instruction_id_list must be a list of id strings, not {_shown(instruction_id_list)}"
        )
    ids = list(instruction_id_list)
    if not ids:
        raise ValueError("InstructionCritic needs at least one instruction id")
    for index, iid in enumerate(ids):
        if not isinstance(iid, str):
            raise ValueError(
                f"instruction_id_list[{index}] must be an instruction id string, not {_shown(iid)}"
                + (f"; write {iid[0]!r}" if isinstance(iid, (list, tuple)) and len(iid) == 1 else "")
            )
    return ids


def _checked_kwargs(kwargs: Any, ids: Sequence[str]) -> list[dict[str, Any]]:
    """One dict of arguments per id (None entries and None values dropped), or a one-line error naming the
    instruction and what to change."""
    if kwargs is None:
        return [{} for _ in ids]
    if isinstance(kwargs, Mapping):
        fix = (
            f"write [{kwargs!r}]"
            if len(ids) == 1
            else f"give a list of {len(ids)} dicts (or None), in id order"
        )
        raise ValueError(
            f"kwargs must be a list with one dict of arguments per instruction, not one dict, for {', '.join(ids)}; "
            + fix
        )
    if isinstance(kwargs, (str, bytes)) or not isinstance(kwargs, Iterable):
        raise ValueError(
            f"kwargs must be a list with one dict (or None) per instruction, not {_shown(kwargs)}"
        )
    args = list(kwargs)
    if len(args) != len(ids):
        raise ValueError(
            f"kwargs has {len(args)} entries for {len(ids)} instruction ids; give one dict (or None) per id"
        )
    for index, (iid, entry) in enumerate(zip(ids, args, strict=True)):
        if entry is not None and not isinstance(entry, Mapping):
            raise ValueError(
                f"kwargs[{index}], the arguments of instruction {iid!r}, must be a dict (or None), "
                f"not {_shown(entry)}"
            )
    return [_clean_kwargs(entry) for entry in args]


def _check_arguments(iid: str, args: Mapping[str, Any], checker: Any) -> None:
    """Refuse an argument the checker of `iid` does not take, or one of the wrong kind (see `_ARGUMENT_KINDS`)."""
    declared = _declared_arguments(checker)
    for name, value in args.items():
        if name not in declared:
            takes = f"its arguments are {', '.join(declared)}" if declared else "it takes none"
            raise ValueError(
                f"arguments {dict(args)!r} do not fit instruction {iid!r}: no argument {name!r} ({takes})"
            )
        kind = _ARGUMENT_KINDS.get(name)
        if kind is not None and not _fits(kind, value):
            fix = (
                f"; write [{value!r}]" if kind == _TEXTS and isinstance(value, str) and value.strip() else ""
            )
            raise ValueError(
                f"argument {name!r} of instruction {iid!r} must be {_EXPECTED[kind]}, not {_shown(value)}{fix}"
            )


class InstructionCritic(InlineCritic):
    """Judge a candidate against verifiable instructions with IFEval's and IFBench's own checkers.

    Each instruction is one check. One `major` finding per instruction not followed, its message the instruction
    and, for most kinds, what the answer has instead, measured as its checker measures it ("the word 'whisper'
    must appear 3 times; it appears 1"); its suggestion names the change that measure asks for ("Cut the answer to
    at most 120 words (it has 164).") followed by the instruction's own wording. Score = 10 x the share of instructions followed; acceptable
    when all are followed; `checks_passed`/`checks_total` count them, so the loop treats the critic as a verifier
    (the candidate that follows more instructions is selected; a plateau does not stop it while one fails).

    Strict mode, as both benchmarks score it: the answer as written (an empty answer follows nothing). A checker
    that raises on an answer counts as not followed, and the finding says so.

    Args:
        instruction_id_list: the instruction ids, e.g. `["keywords:frequency", "count:word_count_range"]`
            (`supported_instructions()` lists them all).
        kwargs: one dict of arguments per instruction, as the benchmarks write them (arguments set to None are
            dropped); None or omitted when no instruction takes arguments. Both are copied read-only
            (`critic.kwargs` holds `settings.FrozenDict`s): a later edit of the lists given (a `keywords` list)
            changes nothing.
        name: the critic's name.

    Raises:
        ValueError: one line naming the instruction and the argument to change: an id that is not a string or
            is unknown (the message suggests the closest ones); `kwargs` given as one dict, or with an entry that
            is not a dict, or of the wrong length; an argument the checker does not take, or of the wrong kind
            (text, a list of texts such as `keywords`, or a whole number >= 0), or one it is not given or does
            not take the value of (its checker would pick it at random).
        InstructionUnavailableError: an instruction whose checker needs NLTK data that is not installed here
            (`NEEDS_NLTK_DATA`); the message names them and how to install the data or drop them.
        ImportError: the `instructions` extra is not installed.

    Example:
        >>> critic = InstructionCritic(["keywords:frequency"], [{"keyword": "whisper", "frequency": 3, "relation": "at least"}])
        >>> critic.critique(CritiqueRequest(task="t", candidate="a whisper")).issues
        ["keywords:frequency: the word 'whisper' must appear at least 3 times; it appears 1"]
    """

    verifier = True  # the checkers decide: fresh drafts by default, under any focus

    def __init__(
        self,
        instruction_id_list: Sequence[str],
        kwargs: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        name: str = "instructions",
    ) -> None:
        ids = _checked_ids(instruction_id_list)
        args = _checked_kwargs(kwargs, ids)
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        registry = _registry()
        for iid in ids:
            if iid not in registry:
                close = difflib.get_close_matches(iid, registry, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else "; see supported_instructions()"
                raise ValueError(f"unknown instruction id {iid!r}{hint}")
        for iid, given in zip(ids, args, strict=True):
            _check_arguments(iid, given, registry[iid])
        refused = {iid: _missing_data(NEEDS_NLTK_DATA[iid]) for iid in ids if iid in NEEDS_NLTK_DATA}
        refused = {iid: missing for iid, missing in refused.items() if missing}
        if refused:
            listed = "; ".join(f"{iid} needs {', '.join(missing)}" for iid, missing in refused.items())
            raise InstructionUnavailableError(
                f"these checkers need NLTK data that is not installed and is never downloaded here: {listed}. "
                "Install the data once (python -m nltk.downloader punkt_tab averaged_perceptron_tagger_eng "
                "stopwords) or drop these instructions"
            )
        # read-only copies all the way down: a later edit of the caller's lists (a `keywords` list) changes nothing
        self.instruction_id_list: tuple[str, ...] = tuple(ids)
        self.kwargs: tuple[Mapping[str, Any], ...] = tuple(frozen(entry) for entry in args)
        self.name = name
        self.descriptions: list[str] = []
        for index, iid in enumerate(ids):
            state = random.getstate()
            checker, description = self._build(index)
            drew = random.getstate() != state
            self.descriptions.append(description)
            # A checker fills an argument it was not given, or one whose value it does not take (n=0 for a
            # position counted from 1, a letter "ab"), with a random value: refuse that, so a critic never checks
            # an instruction nobody asked for.
            resolved = checker.get_instruction_args() or {}
            unset = sorted(k for k, v in resolved.items() if v is not None and k not in self.kwargs[index])
            if unset:
                raise ValueError(
                    f"instruction {iid!r} needs the arguments {', '.join(unset)} (its checker would pick them at "
                    f"random); got {thawed(self.kwargs[index])!r}"
                )
            picked = self._picked_at_random(index, resolved) if drew else []
            if picked:
                raise ValueError(
                    f"instruction {iid!r} does not take the value given for {', '.join(picked)} (its checker "
                    f"would pick one at random instead); got {thawed(self.kwargs[index])!r}"
                )

    def _picked_at_random(self, index: int, resolved: Mapping[str, Any], tries: int = 8) -> list[str]:
        """The arguments a fresh build of checker `index` resolves differently from `resolved` (drawn at random).

        Builds again, up to `tries` times, only after the first build drew from `random` (a value given but not
        taken); the global random state is read, never seeded, so no other code's random numbers change.
        """
        for _ in range(tries):
            again = self._build(index)[0].get_instruction_args() or {}
            picked = sorted(k for k in resolved if again.get(k) != resolved[k])
            if picked:
                return picked
        return []

    def _build(self, index: int) -> tuple[Any, str]:
        """A fresh checker for instruction `index` and its description (checkers keep state: one per critique)."""
        iid = self.instruction_id_list[index]
        checker = _registry()[iid](iid)
        try:
            description = checker.build_description(**thawed(self.kwargs[index]))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ValueError(
                f"arguments {thawed(self.kwargs[index])!r} do not fit instruction {iid!r} ({type(exc).__name__}: {exc}); "
                "pass the arguments its checker takes"
            ) from exc
        return checker, str(description)

    def _missed(self, index: int, checker: Any, text: str) -> tuple[str, str]:
        """The finding's message and the suggestion for instruction `index`, which `text` does not follow.

        The message measures the miss where a detail for the instruction exists (`DETAILS`); the suggestion names
        the change that detail measures, followed by the instruction's own wording.
        """
        iid = self.instruction_id_list[index]
        wording = f"Follow this instruction exactly: {self.descriptions[index].strip()}"
        detail = DETAILS.get(iid)
        if detail is not None:
            try:
                miss = detail(text, checker.get_instruction_args() or {})
            except (TypeError, ValueError, IndexError, re.error):  # odd arguments: the wording says enough
                miss = None
            if miss is not None and miss.found:
                return f"{iid}: {miss.found}", f"{miss.change} {wording}" if miss.change else wording
        return f"{iid}: not followed: {self.descriptions[index].strip()}", wording

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Run every checker on the candidate (strict: the answer as written) and report the ones not followed."""
        text = request.candidate
        findings: list[Finding] = []
        suggestions: list[str] = []
        for index, iid in enumerate(self.instruction_id_list):
            checker, _ = self._build(index)
            try:
                followed = bool(text.strip()) and bool(checker.check_following(text))
            except Exception as exc:  # a checker's own bug on odd input: not followed, and said so
                message = f"{iid}: its checker failed on this answer ({type(exc).__name__}: {exc}); counted as not followed"
                suggestion = f"Follow this instruction exactly: {self.descriptions[index].strip()}"
                followed = None
            else:
                message, suggestion = ("", "") if followed else self._missed(index, checker, text)
            if not followed:
                findings.append(Finding(message=message, severity="major", source=self.name))
                suggestions.append(suggestion)
        total = len(self.instruction_id_list)
        passed = total - len(findings)
        if findings:
            feedback = f"{len(findings)} of {total} instructions not followed: " + "; ".join(
                f.message for f in findings
            )
        else:
            feedback = f"All {total} instructions followed."
        return Critique(
            issues=[f.message for f in findings],
            suggestions=list(dict.fromkeys(suggestions)),
            is_acceptable=not findings,
            score=10.0 * passed / total,
            feedback=feedback,
            findings=findings,
            checks_passed=passed,
            checks_total=total,
        )
