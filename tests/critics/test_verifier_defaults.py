"""A critic declares what it is (`verifier`, `focus`), and the setup's defaults follow from that alone: a user's own
verifier gets the settings the package's verifiers get, and a critic that declares nothing gets none."""

from __future__ import annotations

from typing import Any

import pytest

from reflection_graph import Settings
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.rules import RuleCritic
from reflection_graph.critique import Critique, Finding
from reflection_graph.graph import build_reflection_graph
from reflection_graph.loop import setup_of
from tests.fakes import RecordingChatModel

VERIFIER_SETTINGS = {"strategy": "resample", "n_drafts": 1, "n_revisions": 2, "max_iterations": 3}
"""What a verifier critic's setup defaults to (`InstructionCritic`'s today)."""


class NoComma(RuleCritic):
    """A user's rule: the reply has no comma. Not declared a verifier."""

    name = "no_comma"

    def check(self, text: str) -> list[tuple[Finding, str]]:
        if "," in text:
            return [(self._finding("the reply has a comma", "major"), "Drop the commas.")]
        return []


class NoCommaVerifier(NoComma):
    """The same rule, declared ground truth for the loop."""

    verifier = True


class CodeOnlyVerifier(NoComma):
    """A verifier of code answers only."""

    verifier = True
    focus = "code"


class PlainVerifier:
    """A critic of the `Critic` protocol alone (no package base), declared a verifier."""

    name = "plain"
    verifier = True

    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        ok = "," not in request.candidate
        return Critique(is_acceptable=ok, score=10 if ok else 0, checks_passed=int(ok), checks_total=1)

    async def acritique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        return self.critique(request, config)


def _built(critic: Any, **values: Any) -> Settings:
    """The settings a graph is built with for `critic` and the caller's `values`."""
    return setup_of(
        build_reflection_graph(RecordingChatModel(replies=["x"]), critic=critic, **values)
    ).overrides.settings


def _chosen(settings: Settings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in VERIFIER_SETTINGS}


@pytest.mark.parametrize(
    "critic", [NoCommaVerifier(), PlainVerifier()], ids=["rule-subclass", "protocol-only"]
)
def test_a_users_own_verifier_gets_the_verifier_defaults(critic: Any) -> None:
    settings = _built(critic)
    assert _chosen(settings) == VERIFIER_SETTINGS
    assert not settings.given & set(VERIFIER_SETTINGS)  # a layer under the caller's values
    assert _built(critic, strategy="loop").strategy == "loop"  # what the caller sets wins
    assert _built(critic, human_review=True).strategy == "loop"  # a person reviews revisions


def test_a_users_verifier_gets_what_the_instruction_critic_gets() -> None:
    from reflection_graph.critics import InstructionCritic

    try:
        packaged = InstructionCritic(["punctuation:no_comma"])
    except ImportError:
        pytest.skip('needs pip install "reflection-graph[instructions]"')
    assert _chosen(_built(NoCommaVerifier())) == _chosen(_built(packaged))


def test_a_critic_that_declares_no_verifier_gets_no_verifier_defaults() -> None:
    assert _chosen(_built(NoComma())) == _chosen(Settings())
    assert _built(NoComma()).strategy == "loop"


def test_a_verifier_with_a_focus_gets_its_defaults_under_that_focus_only() -> None:
    assert _chosen(_built(CodeOnlyVerifier())) == _chosen(Settings())
    assert _chosen(_built(CodeOnlyVerifier(), focus="code")) == VERIFIER_SETTINGS


def test_a_users_verifier_draws_fresh_drafts_of_the_task_and_picks() -> None:
    """The defaults at work: one greedy draft, then rounds of 2 fresh drafts of the task itself (no critique shown
    to the model), the verifier keeping the one without a comma."""
    from reflection_graph import create_reflection_graph

    generator = RecordingChatModel(replies=["One, two.", "Three, four.", "Five six", "Seven, eight."])
    result = create_reflection_graph(generator, critic=NoCommaVerifier()).invoke(
        {"task": "Reply without commas."}
    )
    assert result["stop_reason"] == "accepted" and result["candidate"] == "Five six"
    assert [len(r.get("samples", [r])) for r in result["trajectory"]] == [1, 2]
    assert len(set(generator.prompts)) == 1  # every draft from the task alone
