"""Prefix reuse and prompt lookup of the embedded model, their bookkeeping on fakes (no model is loaded).

The real model runs them in tests/models/test_prefix_reuse.py (marked `embedded`)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from reflection_graph.critics import CritiqueRequest
from reflection_graph.critics.judge import Fault, JudgeCritic
from reflection_graph.models import _lookup
from reflection_graph.models._reuse import (
    Plan,
    PrefixStates,
    evaluate,
    phase_key,
    plan,
    section_offsets,
    token_bounds,
)
from reflection_graph.prompts import revise_messages
from tests.fakes import FakeCriticModel

# -- where phases end -------------------------------------------------------------------------------------------


def _render(messages: list[BaseMessage]) -> str:
    """A chat template in miniature: one `<role>text</>` block per message, then the generation prompt."""
    return "".join(f"<{m.type}>{m.text}</>" for m in messages) + "<ai>"


def _judge() -> JudgeCritic:
    return JudgeCritic(FakeCriticModel(messages=iter([])))


TASK = "Write a polite email declining a job offer."
ANSWER = "Dear Sam,\n\nThank you for the offer. I decline it.\n\nBest,\nAl"
EARLIER = "Hi Sam, no thanks."


def _text(messages: list[BaseMessage]) -> str:
    assert len(messages) == 1 and isinstance(messages[0], HumanMessage)
    return messages[0].text


def test_the_judges_prompts_share_the_task_and_the_critique_shares_the_verdicts_answer() -> None:
    """Every reading of a run starts with the task; the written critique starts with the verdict's whole text up
    to its closing question (the critique's instructions come after the answer); both orders of the comparison
    end a phase after their first answer, which a later comparison with the same first answer shares."""
    judge, request = _judge(), CritiqueRequest(task=TASK, candidate=ANSWER)
    verdict = _text(judge.verdict_messages(request))
    critique = _text(judge.critique_messages(request))
    as_a, as_b = (_text(m) for m in judge.preference_messages(request, EARLIER))

    v, c = section_offsets(verdict), section_offsets(critique)
    assert len(v) == 2 and v == c[:2] and verdict[: v[1]] == critique[: c[1]]
    for check in judge.fault_messages(request, Fault(issue="It does not thank the team.", fix="Thank them.")):
        assert section_offsets(_text(check))[:2] == v and _text(check)[: v[1]] == verdict[: v[1]]
    assert verdict[: v[1]].endswith(ANSWER + "\n\n") and verdict[: v[0]] == f"Task:\n{TASK}\n\n"
    a, b = section_offsets(as_a), section_offsets(as_b)
    assert as_a[: a[0]] == as_b[: b[0]] == verdict[: v[0]]
    assert as_a[: a[1]].endswith(f"Answer A:\n{ANSWER}\n\n") and as_b[: b[1]].endswith(
        f"Answer A:\n{EARLIER}\n\n"
    )
    assert len(a) == 3 and as_a[a[2] :].startswith("Which answer")


def test_a_message_not_built_like_the_judges_prompts_is_one_phase() -> None:
    assert section_offsets(TASK) == []
    assert section_offsets("Please review.\n\nAnswer:\nfoo\n\nIs it right?") == []  # no `Task:` line first
    assert section_offsets("Task:\nno other section") == []


def test_a_first_draft_is_one_phase_whose_state_is_kept_and_a_revision_starts_with_it() -> None:
    draft = [HumanMessage(TASK)]
    critique = {"issues": ["too short"], "suggestions": ["add a reason"]}
    revision = revise_messages(
        TASK, None, ANSWER, critique, [], focus="general", preserve_correct=True, template=None, chat=True
    )
    first = plan(draft, _render(draft), _render, chat=True, generation=True)
    again = plan(revision, _render(revision), _render, chat=True, generation=True)
    assert first == Plan(prefixes=(), keep_end=True, lookup=False)
    assert again.prefixes == (_render(draft),) and not again.keep_end and again.lookup
    # a base model (no chat template) keeps no first-turn state; readings never keep or look up
    assert plan(draft, _render(draft), _render, chat=False, generation=True) == Plan()
    assert plan(revision, _render(revision), _render, chat=True, generation=False).lookup is False
    # prompt lookup switched on or off explicitly
    assert plan(draft, _render(draft), _render, chat=True, generation=True, lookup=True).lookup
    assert not plan(revision, _render(revision), _render, chat=True, generation=True, lookup=False).lookup


def test_a_system_message_and_a_judge_question_plan_their_sections_in_the_rendered_prompt() -> None:
    judge, request = _judge(), CritiqueRequest(task=TASK, candidate=ANSWER)
    messages: list[BaseMessage] = [SystemMessage("Be brief."), *judge.verdict_messages(request)]
    prompt = _render(messages)
    prefixes = plan(messages, prompt, _render, chat=True, generation=False).prefixes
    head = f"<system>Be brief.</><human>Task:\n{TASK}\n\n"
    assert prefixes == (head, f"{head}Answer:\n{ANSWER}\n\n")
    assert all(prompt.startswith(p) for p in prefixes)


def test_token_bounds_are_the_common_prefix_with_the_prompts_tokens_inside_it() -> None:
    def tokenize(text: str) -> list[int]:  # one token per character, and "ab" merged into one
        return [
            0 if text[i : i + 2] == "ab" else ord(c)
            for i, c in enumerate(text)
            if text[i - 1 : i + 1] != "ab"
        ]

    ids = tokenize("xyabz")
    assert token_bounds(["xy"], ids, tokenize) == (2,)
    assert token_bounds(["xya"], ids, tokenize) == (
        2,
    )  # "a" merges with the next "b": the phase ends before it
    assert (
        token_bounds(["xyabz", "", "q"], ids, tokenize) == ()
    )  # the whole prompt, nothing, no common prefix
    assert token_bounds(["xy", "x", "xy"], ids, tokenize) == (1, 2)


# -- saved states -----------------------------------------------------------------------------------------------


class _Blob:
    def __init__(self, nbytes: int, name: str = "") -> None:
        self.nbytes, self.name = nbytes, name


def test_states_are_least_recently_used_out_within_their_count_and_bytes() -> None:
    states = PrefixStates(max_states=2)
    states.put(b"a", _Blob(10), max_bytes=100)
    states.put(b"b", _Blob(10), max_bytes=100)
    assert states.lookup([b"a"])[0] == 0  # "a" is now the most recently used
    states.put(b"c", _Blob(10), max_bytes=100)
    assert len(states) == 2 and states.lookup([b"b"]) == (-1, None)
    states.put(b"d", _Blob(85), max_bytes=100)  # 10 + 10 + 85 > 100: the oldest goes
    assert states.nbytes == 95 and states.lookup([b"a"])[1] is None
    states.put(b"e", _Blob(101), max_bytes=100)  # larger than the whole budget: not kept
    assert states.lookup([b"e"])[1] is None and len(states) == 2
    states.put(b"f", _Blob(1), max_bytes=0)  # 0 MB: nothing is kept
    assert states.lookup([b"f"])[1] is None
    assert (states.hits, states.misses) == (1, 4)
    with pytest.raises(ValueError, match="max_states"):
        PrefixStates(max_states=-1)


def test_lookup_finds_the_deepest_saved_phase() -> None:
    states = PrefixStates()
    states.put(b"k1", _Blob(1, "one"), max_bytes=10)
    states.put(b"k2", _Blob(1, "two"), max_bytes=10)
    assert states.lookup([b"k1", b"k2", b"k3"])[0] == 1
    assert states.lookup([]) == (-1, None) and states.misses == 0  # a call with no phases is no miss


def test_a_states_key_names_its_phases_not_only_its_tokens() -> None:
    ids = list(range(20))
    assert phase_key(ids, (5, 10)) != phase_key(ids, (10,))  # same tokens, other batches: another state
    assert phase_key(ids, (10,)) == phase_key([*ids[:10], 99], (10,))  # what follows the state does not count


class _FakeLlama:
    """Tracks how its context was computed: the batches evaluated since the last reset, state loads included."""

    def __init__(self) -> None:
        self.history: tuple[tuple[int, ...], ...] = ()
        self.evals: list[list[int]] = []
        self.resets = 0
        self.n_tokens = 0
        self.input_ids: list[int] = [0] * 64

    def reset(self) -> None:
        self.resets += 1
        self.history, self.n_tokens = (), 0

    def eval(self, tokens: list[int]) -> None:
        self.evals.append(tokens)
        self.history += (tuple(tokens),)
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)


class _FakeIO:
    def __init__(self) -> None:
        self.saves = self.loads = 0

    def save(self, llama: _FakeLlama) -> Any:
        self.saves += 1
        blob = _Blob(llama.n_tokens)
        blob.history = llama.history  # type: ignore[attr-defined]
        return blob

    def load(self, llama: _FakeLlama, state: Any, ids: list[int]) -> None:
        self.loads += 1
        assert len(ids) == sum(len(b) for b in state.history)
        llama.history, llama.n_tokens = state.history, len(ids)
        llama.input_ids[: len(ids)] = ids


def _run(
    llama: _FakeLlama, states: PrefixStates, ids: list[int], bounds: tuple[int, ...], **kw: Any
) -> tuple[int, _FakeIO]:
    io = _FakeIO()
    llama.evals.clear()
    evaluated = evaluate(llama, ids, bounds, states, kw.pop("max_bytes", 1000), io=io, **kw)
    return evaluated, io


def test_cached_or_not_a_prompt_is_computed_in_the_same_phases() -> None:
    llama, states = _FakeLlama(), PrefixStates()
    ids = list(range(1, 13))
    cold, io = _run(llama, states, ids, (4, 8))
    assert cold == 12 and llama.evals == [ids[:4], ids[4:8], ids[8:]] and (io.saves, io.loads) == (2, 2)
    computed = llama.history
    assert computed == (tuple(ids[:4]), tuple(ids[4:8]), tuple(ids[8:]))

    _run(llama, states, [50, 51], ())  # something else in between
    warm, io = _run(llama, states, ids, (4, 8))
    assert warm == 4 and llama.evals == [ids[8:]] and (io.saves, io.loads) == (0, 1)
    assert llama.history == computed and llama.n_tokens == 12

    sibling = [*ids[:8], 70, 71]  # shares both phases: only its own tail is evaluated
    assert _run(llama, states, sibling, (4, 8))[0] == 2
    other_split = [*ids[:8], 80]  # the same tokens split otherwise: nothing of the other split is loaded
    evaluated, _ = _run(llama, states, other_split, (8,))
    assert evaluated == 9 and llama.evals == [ids[:8], [80]]
    assert states.hits == 2 and states.misses == 2 and states.restored_tokens == 16


def test_without_memory_the_phases_are_the_same_and_nothing_is_kept() -> None:
    llama, states = _FakeLlama(), PrefixStates()
    ids = list(range(1, 10))
    for _ in range(2):
        evaluated, io = _run(llama, states, ids, (3, 6), max_bytes=0)
        assert evaluated == 9 and llama.evals == [ids[:3], ids[3:6], ids[6:]] and io.loads == 2
    assert len(states) == 0 and (states.hits, states.misses) == (0, 0)


def test_a_first_turns_state_is_loaded_by_the_next_turn() -> None:
    llama, states = _FakeLlama(), PrefixStates()
    draft = list(range(1, 8))
    evaluated, io = _run(llama, states, draft, (), keep_end=True)
    assert evaluated == 7 and io.saves == 1 and io.loads == 0  # the draft samples from its live context
    revision = [*draft, 20, 21, 22]
    cached, _ = _run(llama, states, revision, (len(draft),))
    assert cached == 3 and llama.history == (tuple(draft), (20, 21, 22))
    states.clear()
    uncached, _ = _run(llama, states, revision, (len(draft),))
    assert uncached == 10 and llama.history == (tuple(draft), (20, 21, 22))


# -- prompt lookup ----------------------------------------------------------------------------------------------


class _Batch:
    def __init__(self) -> None:
        self.calls: list[tuple[list[int], int, bool]] = []

    def set_batch(self, batch: list[int], n_past: int, logits_all: bool) -> None:
        self.calls.append((batch, n_past, logits_all))


class _Ctx:
    def __init__(self) -> None:
        self.removed: list[int] = []
        self.decodes = 0

    def kv_cache_seq_rm(self, seq: int, p0: int, p1: int) -> bool:
        self.removed.append(p0)
        return True

    def decode(self, batch: _Batch) -> None:
        self.decodes += 1


class _DraftingLlama:
    def __init__(self, n_tokens: int) -> None:
        self._ctx, self._batch, self.n_batch = _Ctx(), _Batch(), 4
        self.n_tokens, self.input_ids = n_tokens, [0] * 64
        self.draft_model: Any = None
        self._requires_eval = True

    def eval(self, tokens: list[int]) -> None:  # the class's own, replaced within `prompt_lookup`
        raise AssertionError("not replaced")


def test_prompt_lookup_asks_for_every_logit_of_generated_tokens_only() -> None:
    llama = _DraftingLlama(n_tokens=5)
    with _lookup.prompt_lookup(llama, prompt_len=5) as stats:
        assert llama.draft_model is not None
        llama.eval([])  # the prompt is evaluated already: nothing to do
        llama.eval([7, 8, 9])  # a generated token and two proposed ones
        llama.n_tokens = 6  # the sampler rejected the first proposal
        llama.eval([8])
    assert llama._batch.calls == [([7, 8, 9], 5, True), ([8], 6, True)]
    assert llama._ctx.removed == [5, 5, 6] and llama.n_tokens == 7 and not llama._requires_eval
    assert (stats.steps, stats.proposed) == (2, 2)
    assert llama.draft_model is None and "eval" not in vars(llama)  # switched off again


def test_prompt_lookup_leaves_a_prompt_token_without_all_its_logits() -> None:
    llama = _DraftingLlama(n_tokens=3)
    with _lookup.prompt_lookup(llama, prompt_len=5) as stats:
        llama.eval([1, 2, 3, 4, 5, 6])  # two prompt tokens (an unfinished prompt), then batches of n_batch
    assert llama._batch.calls == [([1, 2, 3, 4], 3, False), ([5, 6], 7, True)]
    assert stats.steps == 1


# -- the embedded model's calls, wired to a fake llama.cpp ------------------------------------------------------


class _FakeCompletionLlama(_FakeLlama):
    """Tokenizes one token per character; `create_completion` notes how much of its prompt was evaluated."""

    def __init__(self) -> None:
        super().__init__()
        self.input_ids = [0] * 4096
        self.completions: list[tuple[Any, int, Any]] = []
        self.draft_model: Any = None

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return ([1] if add_bos else []) + list(text)

    def create_completion(self, prompt: Any, grammar: Any = None, **args: Any) -> dict[str, Any]:
        self.completions.append((prompt, self.n_tokens, self.draft_model))
        return {"choices": [{"text": " reply", "finish_reason": "stop"}], "usage": {"completion_tokens": 1}}


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> tuple[Any, _FakeCompletionLlama]:
    import threading

    from reflection_graph.models import _reuse, embedded
    from reflection_graph.models._llama import _Loaded

    path = tmp_path / "fake.gguf"
    path.write_bytes(b"GGUF")
    llama = _FakeCompletionLlama()
    loaded = _Loaded(llama=llama, lock=threading.Lock())
    monkeypatch.setattr(embedded, "_load", lambda *args: loaded)
    monkeypatch.setattr(embedded, "has_chat_template", lambda path: False)
    monkeypatch.setattr(_reuse, "LlamaStateIO", _FakeIO)
    model = embedded.EmbeddedChatModel(model_path=str(path), n_ctx=2048, max_tokens=16, temperature=0.0)
    return model, llama


def test_an_embedded_call_evaluates_its_phases_then_completes_its_whole_evaluated_prompt(wired: Any) -> None:
    from reflection_graph.models._record import recording

    model, llama = wired
    judge = _judge()
    verdict = judge.verdict_messages(CritiqueRequest(task=TASK, candidate=ANSWER))
    critique = judge.critique_messages(CritiqueRequest(task=TASK, candidate=ANSWER))
    with recording(model) as calls:
        model.invoke(verdict)
        model.invoke(critique)
    first, second = calls
    assert first.evaluated == len(first.ids) and len(llama.completions) == 2
    prompt, evaluated_before, drafting = llama.completions[1]
    assert (
        prompt == model.render_prompt(critique) and evaluated_before == len(second.ids) and drafting is None
    )
    shared = len(llama.tokenize(f"Task:\n{TASK}\n\nAnswer:\n{ANSWER}\n\n".encode()))
    assert (
        second.evaluated == len(second.ids) - shared
    )  # the task and the answer came from the verdict's phases
    assert second.args["temperature"] == 0.0 and not second.lookup
    assert model._loaded().states.hits == 1


def test_a_call_option_switches_prompt_lookup_on_for_one_call(wired: Any) -> None:
    from reflection_graph.models._record import recording

    model, llama = wired
    with recording(model) as calls:
        model.invoke("Copy: abc abc", prompt_lookup=True)
        model.invoke("Copy: abc abc")
    assert [c.lookup for c in calls] == [True, False]
    assert (
        llama.completions[0][2] is not None and llama.completions[1][2] is None
    )  # a draft model for one call
    assert llama.draft_model is None and "eval" not in vars(llama)
    with pytest.raises(TypeError, match="does not take"):
        model.invoke("x", prompt_lookups=True)
