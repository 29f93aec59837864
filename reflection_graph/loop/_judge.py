"""One critique, measured: the critic's reply checked into a `Critique`, with the calls and tokens it cost.

Shared by the graph's `critique` node and `ReflectionMiddleware`. A critic that declares `metered = True` (the
package's own critics, and any critic whose calls go through `critics.base.call_model`) has its calls recorded
in the step's meter by reflection_graph/_runtime/_calls.py; any other critic (also inside a composite) is
measured with the `UsageCounter` callback instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from reflection_graph._runtime import Meter, RoleUsage, metering, track_usage
from reflection_graph.critics.base import Critic, CritiqueRequest, is_metered
from reflection_graph.critique import Critique, parse_critique
from reflection_graph.prompts import HISTORY_CHARS

__all__ = ["Judged", "ajudge", "critique_history", "judge"]


CRITIC_HISTORY_CHARS = 4000
"""Each earlier candidate a critic sees is cut to this many characters: a critic that compares (`JudgeCritic`,
`PairwiseCritic`) must see the whole earlier answer, or one cut before its end (an email's sign-off) loses every
comparison for what was cut."""


def critique_history(rounds: Sequence[Mapping[str, Any]], window: int) -> tuple[dict[str, Any], ...]:
    """The earlier rounds a critic sees (`CritiqueRequest.history`): the last `window`, each candidate cut to
    `CRITIC_HISTORY_CHARS` and its feedback to `HISTORY_CHARS`, so the request does not grow with the round
    count."""
    return tuple(
        {
            "candidate": r["candidate"][:CRITIC_HISTORY_CHARS],
            "score": r["score"],
            "feedback": ((r["critique"] or {}).get("feedback") or "")[:HISTORY_CHARS],
        }
        for r in (list(rounds[-window:]) if window > 0 else [])
    )


def checked(critic: Critic, result: Any) -> Critique:
    """A critic's reply as a `Critique`: mappings and pydantic models are parsed, anything else is an error."""
    if isinstance(result, Critique):
        return result
    if isinstance(result, (Mapping, BaseModel)):
        return parse_critique(dict(result) if isinstance(result, Mapping) else result)
    name = getattr(critic, "name", type(critic).__name__)
    raise TypeError(
        f"critic {name!r} returned {type(result).__name__}, expected a Critique: return "
        "reflection_graph.Critique(...) from critique()/acritique()"
    )


Judged = tuple[Critique | None, RoleUsage, BaseException | None]


def judge(critic: Critic, request: CritiqueRequest, config: RunnableConfig | None) -> Judged:
    """One critique (critique, usage, error); shared by the graph and `ReflectionMiddleware`."""
    with metering() as meter, _callback(critic) as counter:
        cfg = config if counter is None else _with_counter(config, counter)
        try:
            result: Critique | None = checked(critic, critic.critique(request, cfg))
            error: BaseException | None = None
        except Exception as exc:
            result, error = None, exc
    return result, _usage_of(meter, counter), error


async def ajudge(
    critic: Critic, request: CritiqueRequest, config: RunnableConfig | None, meter: Meter | None = None
) -> Judged:
    """Async twin of `judge`; `meter` keeps the calls of a critique that is cancelled."""
    with metering(meter) as meter, _callback(critic) as counter:
        cfg = config if counter is None else _with_counter(config, counter)
        try:
            result: Critique | None = checked(critic, await critic.acritique(request, cfg))
            error: BaseException | None = None
        except Exception as exc:
            result, error = None, exc
    return result, _usage_of(meter, counter), error


def _callback(critic: Any) -> Any:
    """The usage callback for a critic that does not declare its calls metered (`metered`), else nothing."""
    return contextlib.nullcontext() if is_metered(critic) else track_usage()


def _usage_of(meter: Any, counter: Any) -> RoleUsage:
    if counter is None:
        return cast(RoleUsage, meter.usage)
    return cast(RoleUsage, {**counter.usage, "seconds": meter.usage["seconds"]})


def _with_counter(config: RunnableConfig | None, counter: Any) -> RunnableConfig:
    """`config` with the usage callback `counter` added (for critics whose calls the package does not make)."""
    merged: dict[str, Any] = dict(config or {})
    callbacks = merged.get("callbacks")
    if callbacks is None:
        merged["callbacks"] = [counter]
    elif isinstance(callbacks, list):
        merged["callbacks"] = [*callbacks, counter]
    else:
        manager = callbacks.copy()
        manager.add_handler(counter, inherit=True)
        merged["callbacks"] = manager
    return cast(RunnableConfig, merged)
