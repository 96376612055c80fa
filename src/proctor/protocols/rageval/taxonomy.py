"""R-Eval's error taxonomy of one answer, as the paper (Tu et al., KDD '24, §3.4) defines it.

"When the response aligns with the standard answer, if the scratchpad contributes to the final response, we
define this situation as Exact Match (EM). If the information in the scratchpad doesn't relate to the
response, i.e., the system can answer consistently with the standard answer relying on the knowledge stored
within the model, it's considered an Answer Match (AM). As to the situation that the response does not
match the standard answer, if the scratchpad provides useful information, [...] we define this as
Grounded-generation Error (GE). If the scratchpad's information is irrelevant, [...] We then have to
ascertain whether the retrieval process was interrupted. There is an issue with the logic of the retrieval
if the process is halted. We denote this as a Reasoning Error (RE). If the retrieval process was
interrupted, depending on whether the interruption was due to faults in the retrieval tool itself or
improper use of the tool, it is classified as a Model Error (ME) or Tool-using Error (TE), respectively.
Specially, R-Eval uses the F1-Score between system responses and standard answers to determine whether the
response matches the standard answer, and the usefulness of the scratchpad is assessed by checking if the
response is contained within the scratchpad."

So, with `threshold` = 0.05 (the authors' released `error_analysis.py`: `analyser(f1_threshold=0.05)`,
a match is `F1 >= 0.05`) and "gold seen" = the normalised gold answer occurs in the normalised scratchpad:

* F1 >= threshold, gold seen -> EM;  F1 >= threshold, not seen -> AM;
* F1 < threshold, gold seen -> GE;
* F1 < threshold, not seen: ran to its end without interruption -> RE ("halted" there means the process
  came to its own end: a final answer, DFSDT's exhausted tree, a non-agent system that answered); interrupted
  -> ME when a tool itself failed, TE when the interruption came from the system's use of the tools.

The scratchpad is what the system *retrieved and observed* — tool results, a RAG pipeline's contexts —
never its own thoughts or final answer (`Trajectory.scratchpad`). A closed-book system has an empty one, so
its right answers are AM: the paper's signal of an answer from the model's own knowledge.

Where the paper is ambiguous, and what proctor decided: the definition maps "faults in the retrieval tool
itself" to ME and "improper use of the tool" to TE ("respectively"), while §5.2 explains PAL's TE rate as
"the API calling process is often interrupted [...] when encountering a tool execution error", which reads
like a tool fault counted as TE. proctor follows the definition's own sentence: an interruption whose cause
is on the tool side (`tool_fault`: the tool raised on a call it accepted) is ME; every model-side cause
(an unknown tool or invalid arguments, an unparseable action, a failed PAL program, a loop, the step,
context, time or token limits) is TE — the system's use of the tools did not reach an answer. This is also
what the authors' released code does (`halted` = stopped by the step or context limit, counted TE unless the
LLM itself failed to respond, counted ME), and it keeps the shape of the paper's Figure 5, where PAL's
interrupted runs are TE. The cause is recorded on every answer (`RagAnswer.interruption`), so a reader who
reads §5.2 the other way can regroup: `SIDE_CATEGORY` is the one place the mapping lives. A model call that
failed outright (the authors' ME "No response") is not classified here: the answer is a failed unit, listed
by cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from proctor.agents.trace import Interruption, InterruptionSide, Trajectory
from proctor.judging.metrics import f1 as f1_score
from proctor.judging.metrics import normalize_answer

Category = Literal["EM", "AM", "GE", "ME", "TE", "RE"]
CATEGORIES: dict[str, str] = {
    "EM": "right answer, the gold answer was in what the system retrieved",
    "AM": "right answer, not from what it retrieved (the model's own knowledge; any right closed-book one)",
    "GE": "the gold answer was retrieved, then answered wrong (grounded-generation error)",
    "ME": "wrong, interrupted by a fault of a tool itself (model error, as the paper names it)",
    "TE": "wrong, interrupted by the system's use of the tools: invalid call, unparseable action, failed "
    "program, loop, step / context / time / token limit (tool-using error)",
    "RE": "wrong, ran to its end without interruption (reasoning error)",
}
F1_THRESHOLD = 0.05
# The paper's ambiguity, decided in one place (see the module docstring).
SIDE_CATEGORY: dict[InterruptionSide, Category] = {"tool": "ME", "model": "TE"}
NOTE = (
    "ME/TE follow the paper's definition (§3.4: an interruption due to \"faults in the retrieval tool itself "
    "or improper use of the tool [...] is classified as a Model Error (ME) or Tool-using Error (TE), "
    "respectively\"): a tool that failed on a call it accepted is ME; an interruption caused by the system's "
    "use of the tools (invalid call, unparseable action, failed program, loop, step / context / time / token "
    "limit) is TE. §5.2 reads PAL's tool execution errors as TE too; each answer records the interruption's "
    "cause, so the table can be regrouped. RE = wrong after a run that came to its own end."
)


def gold_in(scratchpad: str, gold: str) -> bool:
    """The normalised gold answer occurs, as whole words, in the normalised scratchpad. A gold answer that
    is a comma-separated list (a database question's "cliff erosion, dune morphology, glacier seismology")
    is seen when each item is, in any order: the tools list them in their own order."""
    pad = f" {normalize_answer(scratchpad)} "
    g = normalize_answer(gold)
    if not g:
        return False
    if f" {g} " in pad:
        return True
    items = [normalize_answer(part) for part in gold.split(",")]
    return len(items) > 1 and all(item and f" {item} " in pad for item in items)


def classify(
    f1: float,
    gold_seen: bool,
    interruption: Interruption | InterruptionSide | None,
    threshold: float = F1_THRESHOLD,
) -> Category:
    """The class of one answer from its F1, whether the gold answer was retrieved, and the interruption
    (or its side; None = ran to its end)."""
    if f1 >= threshold:
        return "EM" if gold_seen else "AM"
    if gold_seen:
        return "GE"
    if interruption is None:
        return "RE"
    side = interruption if isinstance(interruption, str) else interruption.side
    return SIDE_CATEGORY[side]


def scratchpad_of(trajectory: Trajectory | None, contexts: Sequence[str] = ()) -> str:
    """What a system retrieved and observed: an agent's successful tool results plus any retrieved contexts
    (a RAG pipeline's passages); empty for a closed-book system. Never the system's answer."""
    parts = [trajectory.scratchpad] if trajectory is not None else []
    parts += [str(c) for c in contexts]
    return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class Classification:
    """One answer's class and the evidence it was decided on."""

    category: Category
    f1: float
    gold_seen: bool
    interruption: Interruption | None


def classify_answer(
    answer: str,
    gold: str,
    *,
    trajectory: Trajectory | None = None,
    contexts: Sequence[str] = (),
    threshold: float = F1_THRESHOLD,
) -> Classification:
    """Classify a system's answer to one question: an agent's `trajectory` (its tool results are the
    scratchpad, its `interruption` the cause when it was cut off), or a non-agent system's retrieved
    `contexts` (none for closed book; such a system that answered ran to its end)."""
    score = f1_score(answer, gold)
    seen = gold_in(scratchpad_of(trajectory, contexts), gold)
    interruption = trajectory.interruption if trajectory is not None else None
    return Classification(classify(score, seen, interruption, threshold), score, seen, interruption)
