"""The `Critic` protocol every critic implements, and the bases a new critic starts from.

- `BaseCritic`: implement `critique`; `acritique` runs it in a worker thread.
- `ModelCritic`: a critic that judges with a chat model: the model at temperature 0, the package's call layer with
  the critic's retries and time limit (`_call` / `_acall`), a copy for a run with another model (`for_run`).
- `InlineCritic`: a critic with cheap checks and no model call (rules, verifiable instructions): `acritique` runs
  `critique` inline.

A critic needs two methods, `critique` and `acritique`, and a `name`. What else it needs from the graph, it says
itself (`BaseCritic` has the defaults), so a new critic, the package's or your own, works without edits elsewhere:
- `metered`: True when every model call it makes goes through `call_model` / `acall_model` (the package's one call
  layer: retries, timeouts, the run's token and time budget, and the usage it records per role). False (the
  default for your own critic): the graph counts its calls with a LangChain usage callback in the `config` it
  hands the critic, so pass that `config` on to your model calls.
- `for_run(model=..., prompt=...)`: this critic for one run that names another critic model
  (`Context.critic_model`) or another critique prompt (`Context.critique_prompt`). The default keeps the critic
  for a new prompt and returns None for a new model, meaning "no model to swap": the run is then judged by an
  `LLMCritic` on the named model. A critic that judges with a model returns a copy on the new one.
- `verifier` and `focus`: what the setup defaults to with it (reflection_graph/loop/_defaults.py reads them, for
  the package's critics and yours alike). `verifier = True`: its verdict is ground truth for the loop (tests,
  instruction checkers: it counts checks in `checks_passed` / `checks_total`), so it can pick the best of several
  fresh drafts, and the graph defaults to them (`VERIFIER_DEFAULTS`) for what its caller did not set. `focus`: the
  focus whose candidates it checks (`"code"` for tests); a verifier's defaults then apply under that focus only
  (None, the default: under any focus).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from typing_extensions import Self, TypedDict, Unpack

from reflection_graph._runtime import acall, call, is_transient
from reflection_graph.critique import Critique
from reflection_graph.models import at_temperature_zero, run_detached

__all__ = [
    "BaseCritic",
    "CallLimits",
    "Critic",
    "CritiqueRequest",
    "InlineCritic",
    "ModelCritic",
    "acall_model",
    "call_model",
    "for_run",
    "is_metered",
    "is_refusal",
]


@dataclass(frozen=True)
class CritiqueRequest:
    """What a critic is asked to judge.

    Attributes:
        task: what the candidate should achieve.
        candidate: the text being judged.
        context: optional extra material (source documents, constraints).
        iteration: 1-based round number.
        score_threshold: the acceptance bar on the 0-10 scale, when one is set.
        history: a bounded window of earlier rounds (each a dict with `candidate`, `score`, `feedback`).
    """

    task: str
    candidate: str
    context: str | None = None
    iteration: int = 1
    score_threshold: float | None = None
    history: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@runtime_checkable
class Critic(Protocol):
    """Anything that judges a candidate. Implement both methods (or subclass `BaseCritic`)."""

    name: str

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique: ...

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique: ...


class BaseCritic:
    """Base class: subclasses implement `critique`; `acritique` runs it in a daemon thread that a cancelled run
    abandons (`run_detached`: neither the event loop nor the process waits for it).

    Attributes:
        name: the critic's name in findings.
        metered: every model call goes through `call_model` / `acall_model` (see the module doc); False: the
            graph counts the calls with a usage callback.
        verifier: its verdict is ground truth for the loop (see the module doc): the setup then defaults to fresh
            drafts, the verifier picking.
        focus: the focus whose candidates it checks (e.g. `"code"`); a verifier's defaults apply under it only
            (None: under any focus).
    """

    name: str = "critic"
    metered: bool = False
    verifier: ClassVar[bool] = False
    focus: ClassVar[str | None] = None

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        raise NotImplementedError

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return await run_detached(self.critique, request, config)

    def for_run(self, *, model: Any = None, prompt: Any = None) -> Critic | None:
        """This critic for a run that names another critic `model` (a chat model, already at temperature 0)
        and/or another critique `prompt` (None: keep). The default: kept for a new prompt; None for a new model
        (this critic has no model to swap)."""
        return None if model is not None else self


class InlineCritic(BaseCritic):
    """Base for critics whose checks are cheap and call no model (rules, verifiable instructions): subclasses
    implement `critique`, and `acritique` runs it inline instead of in a worker thread."""

    metered = True  # no model calls

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Same as `critique`; the checks are cheap, so they run inline."""
        return self.critique(request, config)


class ModelCritic(BaseCritic):
    """Base for critics that judge with a chat model.

    It checks and holds `model`, `retries`, `timeout_s` and `name`, and gives its subclasses:
    - `_call` / `_acall`: one model call through the package's call layer (retries, time limit, the run's budget,
      usage per role), so the critic is `metered`;
    - `_at_temperature_zero(**options)`: the model at temperature 0 (where it allows it), bound to `options`;
    - `_with(model, **changes)`: a copy built from the same keyword arguments, with `changes`;
    - `for_run`: the copy for a run with another model or critique prompt. A subclass that takes a critique
      prompt names its argument in `prompt_argument`; one that hands some candidates to another critic names
      that argument in `stand_in_argument`, and that critic is adapted too. When none is given, the stand-in is
      `default_stand_in` built on the same model with the same limits (the built-in critics name `LLMCritic`,
      which builds on this module).

    Args:
        model: the judge (a LangChain chat model; any runnable where `chat_model_only` is False).
        retries: retries of transient model errors.
        timeout_s: time limit of one model call, in seconds (None: no limit).
        name: the critic's name in findings.
    """

    metered = True  # every call goes through reflection_graph/_runtime/_calls.py
    chat_model_only: ClassVar[bool] = True
    prompt_argument: ClassVar[str | None] = None
    stand_in_argument: ClassVar[str | None] = None
    default_stand_in: ClassVar[Callable[..., Critic] | None] = None
    _arguments: tuple[tuple[Any, ...], dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        critic = super().__new__(cls)
        critic._arguments = (args[1:], kwargs)  # what `_with` builds a copy from (the model aside)
        return critic

    def __init__(
        self,
        model: BaseChatModel | Runnable[Any, Any],
        *,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "critic",
    ) -> None:
        if self.chat_model_only and not isinstance(model, BaseChatModel):
            raise TypeError(f"{type(self).__name__} needs a LangChain chat model, got {type(model).__name__}")
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s}")
        self.model = model
        self.retries = retries
        self.timeout_s = timeout_s
        self.name = name

    def for_run(self, *, model: Any = None, prompt: Any = None) -> Self:
        """This critic judging with another `model` and/or with another critique `prompt` (None: keep). A
        critic that takes no prompt ignores one; its stand-in critic, if it has one, gets both."""
        changes: dict[str, Any] = {}
        if prompt is not None and self.prompt_argument is not None:
            changes[self.prompt_argument] = prompt
        if self.stand_in_argument is not None and (model is not None or prompt is not None):
            stand_in = for_run(getattr(self, self.stand_in_argument), model=model, prompt=prompt)
            changes[self.stand_in_argument] = stand_in or self._default_critic(model)
        return self if model is None and not changes else self._with(model, **changes)

    def _with(self, model: Any = None, **changes: Any) -> Self:
        """A copy of this critic built from the same arguments with `changes`, on `model` (None: this one's)."""
        args, kwargs = self._arguments
        settings = {key: value for key, value in kwargs.items() if key != "model"}
        return type(self)(self.model if model is None else model, *args, **{**settings, **changes})

    def _stand_in(self, critic: Critic | None, argument: str) -> Critic:
        """`critic` (checked), or by default `default_stand_in` on this critic's model with its limits."""
        if critic is None:
            return self._default_critic(self.model)
        if not isinstance(critic, Critic):
            raise TypeError(f"{argument} must be a Critic, got {type(critic).__name__}")
        return critic

    def _default_critic(self, model: Any) -> Critic:
        if self.default_stand_in is None:
            raise TypeError(f"{type(self).__name__} names a stand_in_argument but no default_stand_in")
        return self.default_stand_in(model, retries=self.retries, timeout_s=self.timeout_s)

    def _at_temperature_zero(self, **options: Any) -> Runnable[Any, Any]:
        """The model at temperature 0 (`models.at_temperature_zero`: where it allows it) bound to `options`;
        OpenAI-compatible clients also get `max_tokens` in the request body (see reflection_graph/models)."""
        model = at_temperature_zero(self.model)
        fields = type(model).model_fields if isinstance(model, BaseChatModel) else {}
        if "extra_body" in fields and "max_tokens" in options:
            body = dict(getattr(model, "extra_body", None) or {})
            body["max_tokens"] = options["max_tokens"]
            options["extra_body"] = body
        return model.bind(**options) if options else model

    def _call(self, runnable: Runnable[Any, Any], value: Any, config: RunnableConfig | None) -> Any:
        """`runnable.invoke(value, config)` through the call layer, with this critic's retries and time limit."""
        return call(runnable, value, config, retries=self.retries, timeout_s=self.timeout_s)

    async def _acall(self, runnable: Runnable[Any, Any], value: Any, config: RunnableConfig | None) -> Any:
        """Async twin of `_call`."""
        return await acall(runnable, value, config, retries=self.retries, timeout_s=self.timeout_s)


def is_refusal(exc: BaseException, *also: type[BaseException]) -> bool:
    """A server that refuses what was asked (HTTP 400/404/422/500/501, `NotImplementedError`, or one of the
    exception types `also`), not a transient fault worth a retry."""
    if is_transient(exc):
        return False
    if isinstance(exc, (NotImplementedError, *also)):
        return True
    return getattr(exc, "status_code", None) in (400, 404, 422, 500, 501)


def is_metered(critic: Any) -> bool:
    """Whether `critic` declares that its model calls go through the package's call layer."""
    return bool(getattr(critic, "metered", False))


def for_run(critic: Critic, *, model: Any = None, prompt: Any = None) -> Critic | None:
    """`critic.for_run(...)` for a critic that has it; one that has not is kept for a prompt, None for a model."""
    adapt = getattr(critic, "for_run", None)
    if callable(adapt):
        return adapt(model=model, prompt=prompt)  # type: ignore[no-any-return]
    return None if model is not None else critic


class CallLimits(TypedDict, total=False):
    """The limits of one model call: `retries` of transient errors (default 2), `timeout_s` in seconds (None)."""

    retries: int
    timeout_s: float | None


def call_model(
    model: Runnable[Any, Any], value: Any, config: RunnableConfig | None = None, **limits: Unpack[CallLimits]
) -> Any:
    """`model.invoke(value, config)` through the package's call layer: retried on transient errors, admitted by
    the run's budget (its reply limit cut to what is left) and recorded in the critique's usage. A critic whose
    calls all go through here sets `metered = True`."""
    return call(model, value, config, **limits)


async def acall_model(
    model: Runnable[Any, Any], value: Any, config: RunnableConfig | None = None, **limits: Unpack[CallLimits]
) -> Any:
    """Async twin of `call_model`."""
    return await acall(model, value, config, **limits)
