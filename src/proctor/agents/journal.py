"""Steps of a trajectory journaled in the run store, so a resumed run replays the steps a killed run had
finished (their model outputs and observations) instead of paying for them again.

The journal is found through the model-call scope: the step runner opens a scope per unit of work with the
unit's key and the run store as recorder. Outside a run (no store) nothing is journaled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from proctor.agents.trace import AgentStep
from proctor.models.recording import current_scope
from proctor.store import RunStore

KIND = "agent_step"


class Journal:
    def __init__(self, trajectory: str) -> None:
        scope = current_scope()
        self.store = scope.recorder if isinstance(scope.recorder, RunStore) else None
        self.prefix = f"{scope.item_key or 'no-item'}|{trajectory}"

    def key(self, index: int | str) -> str:
        return f"{self.prefix}#{index}"

    async def step(
        self,
        index: int | str,
        run: Callable[[], Awaitable[AgentStep]],
        replay: Callable[[AgentStep], Awaitable[object]] | None = None,
    ) -> AgentStep:
        """The stored step `index`, or `run()`'s result, stored once it has completed. A replayed step's
        `replay` runs its tool call again (result unused) so that stateful tools — Lookup's current
        document, say — are where they were when the step first ran."""
        if self.store is not None:
            found = self.store.get_item(self.key(index))
            if found is not None and found.get("status") == "done":
                step = AgentStep.model_validate(found["data"])
                if replay is not None:
                    await replay(step)
                return step
        step = await run()
        if self.store is not None:
            self.store.put_item(self.key(index), KIND, step.model_dump(mode="json"))
        return step
