"""Every setting of the loop, declared once: its default, bounds, choices and description.

`Settings` is the single source of truth. From its fields:
- every factory (`create_reflection_graph`, `ReflectionMiddleware`, `create_gleaning_graph`) takes them the same
  way: one `Settings` as it is (`settings=`) and/or the fields as keyword arguments over it, checked by one
  function, `chosen_settings` (with one check of names, `refuse_unknown`);
- the runtime `Context` (reflection_graph/context.py) offers the fields marked `runtime=True` as per-run
  overrides, with the same description (Studio shows it);
- the CLI (reflection_graph/cli/) turns the fields marked `cli=True` into typer options with typer's own
  `min`/`max` and choices, and builds one `Settings` of those given on the command line;
- `ReflectionMiddleware` takes only the fields marked `agent=True` (the others shape drafting or budget the whole
  run, which the agent does itself);
- `SettingsKwargs` names every field with its type for `**values: Unpack[SettingsKwargs]` (PEP 692), so editors
  and mypy see them; tests/test_settings.py proves it agrees with `Settings`.

Choices come from the `Literal` types below through `typing.get_args`, never from repeated literals. `strategy` is a
`str` checked against the strategy registry (`STRATEGIES`, filled by reflection_graph/strategies/), so a strategy
registered from user code is a valid value for mypy, the factory and the CLI alike, and adding one touches no line
here.

The imports go one way. Strategies import `Settings` when they load (what they force, their call bound, their
answers to the nodes); this module imports nothing of the package and holds the registry they fill (`Registry`,
`STRATEGIES`), so the two never import each other (tests/test_rooms.py checks that the package has no import
cycle).

A `Settings` remembers which fields its caller set (`given`). Defaults that depend on the setup (the code
focus's with a `CodeTestCritic`, reflection_graph/loop/_code.py) are a layer under those (`with_defaults`),
applied the same way whether the `Settings` came from keyword arguments, the CLI or a server's graph. Every
value is validated once, when it enters: a layer or an override validates only the fields it changes (and the
checks across fields). The check of one value against its field, and the largest values some settings accept, are
in `_checks` (`choices` and the largest values are exported here).

Every value is also frozen when it enters (`frozen`): `prompts` is held as a `FrozenDict`, a read-only copy of the
mapping given, so editing that mapping (or the graph's `settings.prompts`) after the build changes nothing the
graph does; an edit of the frozen copy raises `TypeError`. Critics keep their options the same way.
"""

from __future__ import annotations

import copy
import functools
import threading
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Generic, Literal, TypeVar

from typing_extensions import TypedDict

from reflection_graph.settings._checks import (
    MAX_DRAFTS,
    MAX_ITERATIONS,
    MAX_TOKEN_BUDGET,
    check_value,
    choices,
)

__all__ = [
    "MAX_DRAFTS",
    "MAX_ITERATIONS",
    "MAX_TOKEN_BUDGET",
    "PROMPT_ROLES",
    "Focus",
    "FrozenDict",
    "ParseErrorPolicy",
    "Select",
    "Settings",
    "SettingsKwargs",
    "allowed_values",
    "choices",
    "chosen_settings",
    "frozen",
    "refuse_unknown",
    "setting_fields",
    "thawed",
]

Select = Literal["best", "last"]
Focus = Literal["general", "code", "reasoning", "format"]
ParseErrorPolicy = Literal["feedback", "raise"]
PROMPT_ROLES: tuple[str, ...] = ("generate", "critique", "revise")

T = TypeVar("T")


class Registry(Generic[T]):
    """Strategies by name. `register` adds one (an instance of the required class with a `name`), `get` finds
    one, `names` and `descriptions` list them in the order they were registered."""

    def __init__(self) -> None:
        self._strategies: dict[str, T] = {}
        self._lock = threading.Lock()
        self._kind: type = object

    def require(self, kind: type) -> None:
        """Accept only instances of `kind` from now on (the strategies package names its `Strategy` class)."""
        self._kind = kind

    def register(self, strategy: T, *, replace: bool = False) -> T:
        """Add `strategy` under its `name` and return it; `ValueError` when the name is taken (unless
        `replace`) or the object is no `Strategy`."""
        name = getattr(strategy, "name", None)
        if not isinstance(strategy, self._kind) or not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"a strategy must be a reflection_graph.strategies.Strategy instance whose name is an identifier, "
                f"got {strategy!r}"
            )
        with self._lock:
            if name in self._strategies and not replace:
                raise ValueError(f"a strategy named {name!r} is registered already; pass replace=True")
            self._strategies[name] = strategy
        return strategy

    def unregister(self, name: str) -> None:
        """Remove the strategy named `name` (nothing when there is none)."""
        with self._lock:
            self._strategies.pop(name, None)

    def get(self, name: str) -> T:
        """The strategy named `name`; `ValueError` naming the registered ones when there is none."""
        try:
            return self._strategies[name]
        except KeyError:
            raise ValueError(f"strategy must be one of {self.names()}, got {name!r}") from None

    def names(self) -> tuple[str, ...]:
        """The registered names, in the order they were registered."""
        return tuple(self._strategies)

    def descriptions(self) -> dict[str, str]:
        """Each registered name with its strategy's one-line `description`."""
        return {
            name: str(getattr(strategy, "description", "")) for name, strategy in self._strategies.items()
        }


STRATEGIES: Registry[Any] = Registry()
"""The one registry: the strategies package fills it, `settings` reads it."""


class FrozenDict(Mapping[Any, Any]):
    """A read-only mapping holding a deep-frozen copy of the items it was made from (see `frozen`).

    It reads as a dict does (`[]`, `get`, `in`, iteration, `len`, `{**frozen_dict}`), compares equal to any mapping
    with the same content (a tuple inside equal to a list inside, as JSON sees them), hashes when its values do,
    and pickles and copies as LangGraph's checkpoints and `copy.deepcopy` need (a `types.MappingProxyType` does
    neither). Setting or deleting an item raises `TypeError`.

    Args:
        items: a mapping, or (key, value) pairs; each value is frozen (`frozen`), so a later edit of a nested list
            or dict of `items` does not reach the copy.

    Example:
        >>> prompts = {"generate": "Task: {task}"}
        >>> held = FrozenDict(prompts)
        >>> prompts["generate"] = "changed"
        >>> held["generate"]
        'Task: {task}'
    """

    __slots__ = ("_items",)
    _items: dict[Any, Any]

    def __init__(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        object.__setattr__(self, "_items", {key: frozen(value) for key, value in dict(items).items()})

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return bool(thawed(self) == thawed(other))

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._items,))

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} is read-only")

    def __delattr__(self, name: str) -> None:
        raise TypeError(f"{type(self).__name__} is read-only")


def frozen(value: Any) -> Any:
    """A read-only copy of `value`, all the way down: a mapping becomes a `FrozenDict`, a list or tuple a tuple, a
    set a frozenset; anything else (strings, numbers, None, callables, other objects) is kept as it is."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict(value)
    if isinstance(value, (list, tuple)):
        return tuple(frozen(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(frozen(item) for item in value)
    return value


def thawed(value: Any) -> Any:
    """A fresh plain copy of `value`, all the way down: a mapping becomes a dict, a list or tuple a list (a JSON
    array), a set a set; for code that wants plain JSON-like values (jsonschema, a checker library), and that
    may keep or change what it gets without reaching the frozen original."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return {thawed(item) for item in value}
    return value


def _setting(
    default: Any,
    description: str,
    *,
    min: float | None = None,
    max: float | None = None,
    runtime: bool = False,
    cli: bool = True,
    agent: bool = True,
    flag: str | None = None,
    short: str | None = None,
    allowed: Any = None,
) -> Any:
    """A dataclass field carrying its bounds and description in `metadata` (`allowed`: a function giving the
    accepted values and a line on each, for a `str` setting whose values are registered, not a `Literal`)."""
    metadata = {
        "allowed": allowed,
        "description": description,
        "min": min,
        "max": max,
        "runtime": runtime,
        "cli": cli,
        "agent": agent,
        "flag": flag,
        "short": short,
    }
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The validated settings a reflection graph is built with.

    Fields marked `runtime` can be overridden per run through `Context`; the others shape the graph itself.
    Construction validates every field (`ValueError` naming the setting and the fix) and remembers the ones
    passed (`given`); `with_defaults` puts a layer of defaults under them, `apply` and `override` set more.
    `dataclasses.replace` counts every field as given.
    """

    max_iterations: int = _setting(
        3,
        "Hard limit on critique rounds; the loop stops after this many critiques.",
        min=1,
        max=MAX_ITERATIONS,
        runtime=True,
        short="-n",
    )
    min_iterations: int = _setting(
        1,
        "Rounds always run before an accept or plateau can stop the loop (1 to max_iterations).",
        min=1,
        max=MAX_ITERATIONS,
    )
    score_threshold: float | None = _setting(
        None,
        "Accept when score >= this (0-10), whatever the verdict says; unset: the critic's verdict decides.",
        min=0,
        max=10,
        runtime=True,
        flag="--threshold",
    )
    min_improvement: float = _setting(
        0.5, "Smallest score gain over the earlier best that counts as progress.", min=0, runtime=True
    )
    patience: int | None = _setting(
        2,
        "Stop with 'plateau' after this many rounds without progress; unset: no plateau stop.",
        min=1,
        runtime=True,
    )
    stop_on_no_new_issues: bool = _setting(
        True, "Also stop with 'plateau' when a round raises no issue that was not raised before."
    )
    select: Select = _setting(
        "best", "Return the best-scoring candidate (ties go to the later one) or the last one.", runtime=True
    )
    strategy: str = _setting(
        "loop",
        "How the rounds run: a strategy registered in reflection_graph.strategies.",
        agent=False,
        allowed=STRATEGIES.descriptions,
    )
    n_drafts: int = _setting(
        1,
        "First drafts sampled in parallel (distinct seeds); each is critiqued and the best is kept.",
        min=1,
        max=MAX_DRAFTS,
        runtime=True,
        agent=False,
    )
    n_revisions: int = _setting(
        1,
        "Revisions (with strategy resample: fresh drafts) sampled in parallel per later round; the best by the "
        "critic is kept.",
        min=1,
        max=MAX_DRAFTS,
        runtime=True,
        agent=False,
    )
    preserve_correct: bool = _setting(True, "Tell the reviser to keep what the critique did not object to.")
    focus: Focus = _setting(
        "general", "Targeted revision prompt: general, code, reasoning or format.", agent=False
    )
    history_window: int = _setting(
        1, "Earlier rounds shown to the reviser (bounded, so prompts do not grow).", min=0, max=20
    )
    parse_retries: int = _setting(1, "Extra critic calls when its reply cannot be parsed.", min=0, max=10)
    on_parse_error: ParseErrorPolicy = _setting(
        "feedback",
        "An unparsable critique: 'feedback' (round not acceptable, raw text as feedback) or 'raise' (error).",
    )
    retries: int = _setting(
        2,
        "Retries of one model call on transient errors or an empty reply, with backoff.",
        min=0,
        max=10,
        flag="--call-retries",
    )
    timeout_s: float | None = _setting(
        None,
        "Time limit of one model call in seconds (async calls are cancelled).",
        min=0.001,
        flag="--call-timeout",
    )
    token_budget: int | None = _setting(
        None,
        "Tokens the whole run may use, all roles together (not one reply's --max-tokens); at the budget the run "
        "stops with 'budget' and returns its best candidate. Unset: no token budget.",
        min=1,
        max=MAX_TOKEN_BUDGET,
        runtime=True,
        agent=False,
    )
    time_budget_s: float | None = _setting(
        None,
        "Seconds the whole run may take (not one call's --call-timeout); at the budget the run stops with "
        "'budget' and returns its best candidate. Unset: no time budget.",
        min=0.001,
        runtime=True,
        agent=False,
        flag="--time-budget",
    )
    prompts: Mapping[str, Any] = _setting(
        {},
        "Prompt overrides keyed by role (generate, critique, revise): strings or callables; held as a read-only "
        "copy.",
        cli=False,
    )

    def __post_init__(self) -> None:
        self._validate(Settings.__dataclass_fields__)

    def _validate(self, names: Any) -> None:
        """Freeze the fields `names` (`frozen`: later edits of what the caller passed change nothing), check
        them, then the rules across fields."""
        hints = _hints()
        for name in names:
            value = getattr(self, name)
            if name == "prompts" and not isinstance(value, Mapping):
                raise ValueError(
                    f"prompts must be a mapping of role to template, such as {{'generate': 'Task: {{task}}'}}, "
                    f"got {type(value).__name__}"
                )
            object.__setattr__(self, name, frozen(value))
            check_value(Settings.__dataclass_fields__[name], getattr(self, name), hints[name])
        if self.min_iterations > self.max_iterations:
            raise ValueError(
                f"min_iterations must be between 1 and max_iterations ({self.max_iterations}), "
                f"got {self.min_iterations}"
            )
        unknown = set(self.prompts) - set(PROMPT_ROLES)
        if unknown:
            raise ValueError(f"unknown prompt role(s) {sorted(unknown)}; use {list(PROMPT_ROLES)}")
        for role, template in self.prompts.items():
            if not (isinstance(template, str) or callable(template)):
                raise ValueError(f"prompt {role!r} must be a template string or a callable")

    def __new__(cls, *args: Any, **values: Any) -> Settings:
        """A new `Settings` that notes which fields the caller passed (`given`); the dataclass's own `__init__`
        then sets and checks them. A copy (`copy.copy`, pickle) is made with no values and gets its `given` back
        with the rest of its state."""
        self = super().__new__(cls)
        object.__setattr__(self, "_given", frozenset(values))
        return self

    @property
    def given(self) -> frozenset[str]:
        """The fields the caller set (passed to the constructor, `apply` or `override`); the others hold their
        default or a default layer's value (`with_defaults`)."""
        return self._given  # type: ignore[no-any-return,attr-defined]

    def apply(self, values: Mapping[str, Any]) -> Settings:
        """A copy with `values` set as the caller's own (they join `given`); only they are validated again.

        Raises:
            TypeError: a name that is no setting.
            ValueError: a value out of range.
        """
        return self._changed(values, given=True)

    def override(self, **values: Any) -> Settings:
        """A copy with the given non-None values set (a run's `Context`: None means "as built")."""
        return self.apply({name: value for name, value in values.items() if value is not None})

    def with_defaults(self, defaults: Mapping[str, Any]) -> Settings:
        """A copy with `defaults` for the fields the caller did not set: a layer under the caller's values (the
        code focus's defaults with a `CodeTestCritic`); what the caller set always wins."""
        return self._changed({k: v for k, v in defaults.items() if k not in self.given}, given=False)

    def forced(self, values: Mapping[str, Any]) -> Settings:
        """A copy with `values` whatever the caller set (a strategy's forced settings): they hold, but they are
        the strategy's choice, not the caller's, so they do not join `given`; only they are validated again."""
        return self._changed(values, given=False)

    def _changed(self, values: Mapping[str, Any], *, given: bool) -> Settings:
        refuse_unknown(values, "setting(s)")
        if not values:
            return self
        new = copy.copy(self)
        for name, value in values.items():
            object.__setattr__(new, name, value)
        object.__setattr__(new, "_given", self.given | set(values) if given else self.given)
        new._validate(values)
        return new


def refuse_unknown(names: Iterable[str], kind: str, listed: Iterable[str] | None = None) -> None:
    """The one check of setting names: `TypeError` naming those of `names` that are no `Settings` field.

    Args:
        names: the names given.
        kind: what they were given as, for the message ("argument(s)", "setting(s)").
        listed: the settings the caller takes, listed in the message (None: every setting).
    """
    unknown = sorted(set(names) - set(Settings.__dataclass_fields__))
    if unknown:
        shown = sorted(Settings.__dataclass_fields__ if listed is None else listed)
        raise TypeError(f"unknown {kind} {unknown}; the settings are {shown}")


def chosen_settings(
    settings: Settings | None,
    values: Mapping[str, Any],
    *,
    taken: Iterable[str] | None = None,
    refusal: str = "",
) -> Settings:
    """The settings a factory was given, validated in this one place for every factory: `settings` as it is
    (the fields it was given count as set) with the keyword `values` over it, or `Settings(**values)`.

    Args:
        settings: a `Settings` made ahead, or None.
        values: the factory's keyword settings.
        taken: the settings this factory honours (None: all); one outside them, in `values` or among
            `settings.given`, is refused.
        refusal: the message of that refusal, formatted with `names` (those refused) and `taken`.

    Raises:
        TypeError: a name that is no setting, `settings` is no `Settings`, or a setting this factory does not
            take.
        ValueError: a value out of range.
    """
    refuse_unknown(values, "argument(s)", taken)
    if taken is not None:
        names = sorted(
            (set(values) | (settings.given if isinstance(settings, Settings) else set())) - set(taken)
        )
        if names:
            raise TypeError(refusal.format(names=names, taken=sorted(taken)))
    if settings is None:
        chosen = Settings(**values)
    elif isinstance(settings, Settings):
        chosen = settings.apply(values)
    else:
        raise TypeError(
            f"settings must be a reflection_graph.Settings (or pass each setting as a keyword), "
            f"got {type(settings).__name__}"
        )
    return chosen


class SettingsKwargs(TypedDict, total=False):
    """Every `Settings` field as an optional keyword argument, with its type (for `Unpack`, PEP 692).

    Defaults, bounds and descriptions live on `Settings` alone; tests/test_settings.py checks that the names and
    types here are `Settings`' own.
    """

    max_iterations: int
    min_iterations: int
    score_threshold: float | None
    min_improvement: float
    patience: int | None
    stop_on_no_new_issues: bool
    select: Select
    strategy: str
    n_drafts: int
    n_revisions: int
    preserve_correct: bool
    focus: Focus
    history_window: int
    parse_retries: int
    on_parse_error: ParseErrorPolicy
    retries: int
    timeout_s: float | None
    token_budget: int | None
    time_budget_s: float | None
    prompts: Mapping[str, Any]


@functools.cache
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(Settings)


def allowed_values(name: str) -> dict[str, str]:
    """The values setting `name` accepts, each with a line on what it does ("" where there is none): a
    registry's (`strategy`) or its `Literal` type's; {} for a setting that takes a number, a flag or a mapping."""
    f = Settings.__dataclass_fields__[name]
    if f.metadata.get("allowed"):
        return dict(f.metadata["allowed"]())
    return {value: "" for value in choices(_hints()[name])}


def setting_fields(
    *, runtime: bool | None = None, cli: bool | None = None, agent: bool | None = None
) -> Iterator[Field[Any]]:
    """The `Settings` fields, optionally only those overridable per run, shown on the CLI or taken by the agent
    middleware."""
    wanted = {"runtime": runtime, "cli": cli, "agent": agent}
    for f in fields(Settings):
        if all(value is None or f.metadata[key] == value for key, value in wanted.items()):
            yield f


def default(name: str) -> Any:
    """The default value of setting `name`."""
    f = Settings.__dataclass_fields__[name]
    return f.default_factory() if f.default is MISSING and callable(f.default_factory) else f.default
