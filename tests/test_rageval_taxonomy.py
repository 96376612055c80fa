"""R-Eval's error taxonomy on hand-made trajectories of every workflow (ReAct, PAL, DFSDT, function calling)
and on systems without a trajectory (RAG, closed book, a Python callable): every class, the interruption
causes and their sides, the scratchpad (what was retrieved, never the system's own answer), the F1 0.05
boundary, and the report's note on the ME / TE decision."""

from __future__ import annotations

from typing import Any

import pytest

from proctor.agents.tools import ToolCall
from proctor.agents.trace import (
    INTERRUPTION_REASONS,
    STOP_REASONS,
    AgentStep,
    Interruption,
    StopReason,
    Trajectory,
    interruption_of,
)
from proctor.protocols.rageval.answers import RagAnswer
from proctor.protocols.rageval.taxonomy import (
    CATEGORIES,
    F1_THRESHOLD,
    NOTE,
    SIDE_CATEGORY,
    classify,
    classify_answer,
    gold_in,
)

GOLD = "1862"
HIT = "(Result 1 / 1) Tidal glass was first made in 1862."
MISS = "(Result 1 / 1) The Sellin Line runs ferries to Port Selwick."


# --- hand-made steps, shaped as each workflow writes them -------------------------------------------------


def react_step(i: int, raw: str, action: str | None, args: dict[str, Any], obs: str | None = None,
               error: str | None = None) -> AgentStep:  # fmt: skip
    return AgentStep(index=i, raw=raw, action=action, arguments=args, observation=obs, error=error)


def search(i: int, obs: str = HIT, error: str | None = None) -> AgentStep:
    return react_step(i, "Thought: look it up\nAction: Search[Tidal glass]", "Search",
                      {"entity": "Tidal glass"}, obs, error)  # fmt: skip


def finish(i: int, answer: str) -> AgentStep:
    return react_step(i, f"Thought: it is {answer}\nAction: Finish[{answer}]", "Finish", {"answer": answer})


def unparseable(i: int) -> AgentStep:
    return react_step(i, "I am not sure.", None, {}, "Invalid action (no 'Action' line).",
                      "parse_error: no 'Action: Name[argument]' line")  # fmt: skip


def traj(workflow: str, stop: StopReason, steps: list[AgentStep], answer: str | None = None,
         **kw: Any) -> Trajectory:  # fmt: skip
    return Trajectory(workflow=workflow, answer=answer, stop=stop, steps=steps, detail="test", **kw)


def program(i: int, calls: list[ToolCall], answer: str | None = None, error: str | None = None) -> AgentStep:
    code = "hits = Search(entity='Tidal glass')\nanswer = ..."
    obs = f"answer = {answer}" if answer is not None and error is None else error
    return AgentStep(index=i, raw=f"```python\n{code}\n```", action="program", arguments={"code": code},
                     tool_calls=calls, observation=obs, error=error)  # fmt: skip


def call(result: str | None = HIT, error: str | None = None) -> ToolCall:
    return ToolCall(name="Search", arguments={"entity": "Tidal glass"}, result=result, error=error)


def fc_turn(i: int, calls: list[ToolCall]) -> AgentStep:
    errors = "; ".join(c.error for c in calls if c.error) or None
    return AgentStep(index=i, raw="", action=calls[0].name, arguments=dict(calls[0].arguments),
                     tool_calls=calls, observation="\n".join(c.observation for c in calls),
                     error=errors)  # fmt: skip


def fc_answer(i: int, text: str) -> AgentStep:
    return AgentStep(index=i, raw=text)


def category(t: Trajectory) -> str:
    return classify_answer(t.answer or "", GOLD, trajectory=t).category


# --- ReAct ------------------------------------------------------------------------------------------------


def test_react_every_class() -> None:
    em = traj("react", "finished", [search(0), finish(1, "1862")], "1862")
    # The answer is in its own thought and Finish action, but no tool returned it: AM, not EM.
    am = traj("react", "finished", [search(0, MISS), finish(1, "1862")], "1862")
    ge = traj("react", "finished", [search(0), finish(1, "1901")], "1901")
    re_ = traj("react", "finished", [search(0, MISS), finish(1, "1901")], "1901")
    te = traj("react", "parse_error", [unparseable(0), unparseable(1), unparseable(2)])
    down = search(1, "Error: tool_exception: RuntimeError: down", "tool_exception: RuntimeError: down")
    me = traj("react", "max_steps", [search(0, MISS), down])
    assert [category(t) for t in (em, am, ge, re_, te, me)] == ["EM", "AM", "GE", "RE", "TE", "ME"]
    assert te.interruption == Interruption(reason="unparseable_action", detail="test")
    assert me.interruption is not None and me.interruption.reason == "tool_fault"
    assert me.interruption.side == "tool"
    assert em.interruption is None and re_.interruption is None and not re_.had_error


def test_react_ran_to_its_end_after_recovered_errors_is_re_not_me() -> None:
    """The old reading: a finished run with an error on the way was ME. A recovered error is no
    interruption; the run came to its own end, wrong, with nothing useful retrieved: RE."""
    t = traj("react", "finished", [unparseable(0), search(1, "Error: unknown_tool: no tool 'Open'",
                                                          "unknown_tool: no tool 'Open'"),
                                   search(2, MISS), finish(3, "1901")], "1901")  # fmt: skip
    assert t.had_error and t.interruption is None and category(t) == "RE"


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("max_steps", "step_limit"), ("context_limit", "context_limit"), ("loop", "loop"),
     ("timeout", "timeout"), ("budget", "budget")],
)  # fmt: skip
def test_react_limits_are_model_side_te(stop: StopReason, reason: str) -> None:
    """The old reading: an interrupted run (step limit, loop, timeout, ...) was RE."""
    t = traj("react", stop, [search(0, MISS), search(1, MISS), search(2, MISS)])
    assert t.interruption is not None and t.interruption.reason == reason
    assert t.interruption.side == "model" and category(t) == "TE"


def test_a_limit_cutting_off_a_failed_call_is_charged_to_that_failure() -> None:
    bad = search(1, "Error: invalid_arguments: entity: field required", "invalid_arguments: entity: ...")
    t = traj("react", "loop", [search(0, MISS), bad])
    assert t.interruption is not None and t.interruption.reason == "invalid_call" and category(t) == "TE"
    fault = search(1, "Error: tool_exception: OSError: index gone", "tool_exception: OSError: index gone")
    t = traj("react", "timeout", [search(0, MISS), fault])
    assert t.interruption is not None and t.interruption.reason == "tool_fault" and category(t) == "ME"


def test_interrupted_but_the_gold_was_retrieved_is_ge() -> None:
    t = traj("react", "max_steps", [search(0), search(1, MISS)])
    assert t.interruption is not None and category(t) == "GE"


# --- PAL --------------------------------------------------------------------------------------------------


def test_pal_every_class() -> None:
    em = traj("pal", "finished", [program(0, [call()], "1862")], "1862")
    # A program that sets `answer` without retrieving anything: its "answer = 1862" is no scratchpad.
    am = traj("pal", "finished", [program(0, [], "1862")], "1862")
    ge = traj("pal", "finished", [program(0, [call()], "1901")], "1901")
    re_ = traj("pal", "finished", [program(0, [call(MISS)], "1901")], "1901")
    failing = [program(i, [call(MISS)], error="program_error: KeyError: 'id'") for i in range(3)]
    te = traj("pal", "max_steps", failing)
    faults = [program(i, [call(None, "tool_exception: RuntimeError: API down")],
                      error="program_error: RuntimeError: API down") for i in range(3)]  # fmt: skip
    me = traj("pal", "max_steps", faults)
    assert [category(t) for t in (em, am, ge, re_, te, me)] == ["EM", "AM", "GE", "RE", "TE", "ME"]
    assert te.interruption is not None and te.interruption.reason == "program_error"
    assert me.interruption is not None and me.interruption.reason == "tool_fault"


def test_pal_programs_misusing_the_tools() -> None:
    fake = program(
        0, [], error="program_error: the program defines Search itself instead of calling the tool"
    )
    bad = program(1, [call(None, "invalid_arguments: entity: field required")], error="program_error: x")
    for step in (fake, bad):
        t = traj("pal", "max_steps", [step])
        assert t.interruption is not None and t.interruption.reason == "invalid_call" and category(t) == "TE"
    nothing = traj(
        "pal", "parse_error", [program(0, [], error="parse_error: no Python program in the reply")]
    )
    assert nothing.interruption is not None and nothing.interruption.reason == "unparseable_action"


def test_a_refused_call_is_improper_use_and_its_hint_is_not_retrieved() -> None:
    """A call the tool refused (`ToolRefusal`: nothing found, Lookup before Search, a name for an id) is
    the system's misuse (TE), not a tool fault (ME); its hint — even one naming the gold among "Similar"
    titles — is not retrieved information."""
    hint = "Could not find [glass]. Similar: ['1862 glass works']. Search one of these titles."
    refused = call(None, f"refused: {hint}")
    assert refused.observation == hint
    t = traj("pal", "max_steps", [program(i, [refused], error=f"program_error: ToolError: {refused.error}")
                                  for i in range(3)])  # fmt: skip
    assert t.interruption is not None and t.interruption.reason == "invalid_call" and category(t) == "TE"
    assert GOLD not in t.scratchpad
    react = traj("react", "loop", [search(i, hint, refused.error) for i in range(3)])
    assert react.interruption is not None and react.interruption.reason == "invalid_call"
    assert category(react) == "TE" and react.scratchpad == ""


# --- DFSDT ------------------------------------------------------------------------------------------------


def test_dfsdt_every_class() -> None:
    em = traj("dfsdt", "finished", [search(0), finish(1, "1862")], "1862")
    am = traj("dfsdt", "finished", [search(0, MISS), finish(1, "1862")], "1862")
    ge = traj("dfsdt", "finished", [search(0), finish(1, "1901")], "1901")
    giveup = react_step(1, "Thought: hopeless\nAction: GiveUp[]", "GiveUp", {})
    re_ = traj("dfsdt", "gave_up", [search(0, MISS), giveup])  # the tree was searched to its end
    te = traj("dfsdt", "budget", [search(i, MISS) for i in range(4)],
              interruption=Interruption(reason="step_limit", detail="4 model calls"))  # fmt: skip
    me = traj("dfsdt", "timeout", [search(0, "Error: tool_exception: x", "tool_exception: x")])
    assert [category(t) for t in (em, am, ge, re_, te, me)] == ["EM", "AM", "GE", "RE", "TE", "ME"]
    assert re_.interruption is None and te.interruption is not None and te.interruption.reason == "step_limit"


def test_a_finished_or_exhausted_run_never_carries_an_interruption() -> None:
    t = traj("dfsdt", "gave_up", [search(0, MISS)], interruption=Interruption(reason="loop"))
    assert t.interruption is None


# --- native function calling ------------------------------------------------------------------------------


def test_function_calling_every_class() -> None:
    em = traj("function_calling", "finished", [fc_turn(0, [call()]), fc_answer(1, "1862")], "1862")
    # The final reply is the answer, not retrieved text: a right answer without the gold in a tool result
    # is AM (before the fix the reply counted as scratchpad and this was EM).
    am = traj("function_calling", "finished", [fc_turn(0, [call(MISS)]), fc_answer(1, "1862")], "1862")
    bare = traj("function_calling", "finished", [fc_answer(0, "It was 1862.")], "It was 1862.")
    ge = traj(
        "function_calling", "finished", [fc_turn(0, [call(MISS), call()]), fc_answer(1, "1901")], "1901"
    )
    re_ = traj("function_calling", "finished", [fc_turn(0, [call(MISS)]), fc_answer(1, "1901")], "1901")
    malformed = ToolCall(name="Search", arguments={"_raw": '{"entity": '},
                         error="invalid_arguments: arguments are not valid JSON")  # fmt: skip
    te = traj("function_calling", "loop", [fc_turn(i, [malformed]) for i in range(3)])
    me = traj("function_calling", "max_steps", [fc_turn(0, [call(MISS), call(None, "tool_exception: E: x")])])
    cats = [category(t) for t in (em, am, bare, ge, re_, te, me)]
    assert cats == ["EM", "AM", "AM", "GE", "RE", "TE", "ME"]
    assert te.interruption is not None and te.interruption.reason == "invalid_call"


# --- systems without a trajectory -------------------------------------------------------------------------


def test_rag_closed_book_and_python_candidates() -> None:
    ctx_hit, ctx_miss = ["Tidal glass was first made in 1862 at Ambry."], ["Ferries run to Port Selwick."]

    def cat(answer: str, contexts: list[str]) -> str:
        return classify_answer(answer, GOLD, contexts=contexts).category

    # RAG: its retrieved passages are the scratchpad.
    assert [cat("1862", ctx_hit), cat("1862", ctx_miss), cat("1901", ctx_hit), cat("1901", ctx_miss)] == [
        "EM", "AM", "GE", "RE"]  # fmt: skip
    # Closed book (and a Python callable that returns only text): an empty scratchpad — a right answer is
    # AM (the model's own knowledge), a wrong or empty one is RE (it answered, nothing interrupted it).
    assert cat("It was 1862.", []) == "AM" and cat("1901", []) == "RE" and cat("", []) == "RE"
    c = classify_answer("1862", GOLD)
    assert c.gold_seen is False and c.interruption is None and c.f1 == 1.0


# --- the 0.05 boundary and the class table ------------------------------------------------------------------


def test_the_f1_threshold_boundary() -> None:
    assert F1_THRESHOLD == 0.05
    gold = " ".join(f"g{i}" for i in range(20))
    at = " ".join(["g0", *(f"x{i}" for i in range(19))])  # 1 of 20 tokens each way: F1 = 0.05
    below = " ".join(["g0", *(f"x{i}" for i in range(20))])  # 1 of 21 against 1 of 20: F1 = 0.0488
    assert classify_answer(at, gold).f1 == pytest.approx(0.05)
    assert classify_answer(at, gold).category == "AM" and classify_answer(below, gold).category == "RE"
    assert classify(0.05, False, None) == "AM" and classify(0.0499, False, None) == "RE"
    assert classify(0.05, True, "tool") == "EM" and classify(0.0499, True, "tool") == "GE"
    assert classify(0.0499, False, "tool") == "ME" and classify(0.0499, False, "model") == "TE"
    # A stricter cut moves the same answer across.
    assert classify_answer(at, gold, threshold=0.06).category == "RE"


def test_vocabularies() -> None:
    assert set(CATEGORIES) == {"EM", "AM", "GE", "ME", "TE", "RE"}
    assert SIDE_CATEGORY == {"tool": "ME", "model": "TE"}
    assert INTERRUPTION_REASONS == ("tool_fault", "invalid_call", "unparseable_action", "program_error",
                                    "step_limit", "context_limit", "loop", "timeout", "budget")  # fmt: skip
    # Every stop has a meaning: not interrupted, or an interruption with a reason.
    for stop in STOP_REASONS:
        i = interruption_of(stop, [])  # type: ignore[arg-type]
        assert (i is None) == (stop in ("finished", "gave_up"))
    assert "respectively" in NOTE and "ME" in NOTE and "TE" in NOTE


def test_stored_answers_and_old_trajectories_read_back() -> None:
    t = traj("react", "loop", [search(0, MISS)] * 3)
    dumped = t.model_dump(mode="json")
    assert dumped["interruption"] == {"reason": "loop", "detail": "test", "side": "model"}
    assert Trajectory.model_validate(dumped) == t
    old = {k: v for k, v in dumped.items() if k != "interruption"}  # stored before the field existed
    assert Trajectory.model_validate(old).interruption == t.interruption
    a = RagAnswer(system="react:m", workflow="react", llm="m", task_id="t", task="x", level="KS",
                  domain="d", question="q", gold=GOLD, answer="", f1=0.0, em=0.0, category="TE",
                  stop="loop", interruption=t.interruption, halted=False, had_error=True)  # fmt: skip
    assert a.interruption is not None and a.interruption.side == "model"
    assert RagAnswer.model_validate(a.model_dump(mode="json")) == a


def test_a_rag_candidate_records_what_it_retrieved_and_a_closed_book_one_nothing() -> None:
    import asyncio

    from proctor.candidates import Candidate
    from proctor.corpus.types import Chunk, ScoredChunk
    from proctor.models import get_model
    from proctor.models.scripted import register_script

    register_script("taxonomy-1862", lambda messages, params: "1862")
    passage = Chunk(chunk_id="c1", doc_id="d1", source="glass.md", text="Tidal glass was first made in 1862.")

    class OnePassage:
        def retrieve(self, question: str, k: int, gold_ids: list[str] | None = None) -> list[ScoredChunk]:
            return [ScoredChunk(passage, 1.0)]

    model = get_model("scripted/taxonomy-1862")
    rag = asyncio.run(Candidate("rag", model, retriever=OnePassage()).answer("When was tidal glass made?"))
    closed = asyncio.run(Candidate("closed", model).answer("When was tidal glass made?"))
    assert rag.trace["contexts"] == [passage.text] and "contexts" not in closed.trace
    assert classify_answer(rag.text, GOLD, contexts=rag.trace["contexts"]).category == "EM"
    assert classify_answer(closed.text, GOLD, contexts=closed.trace.get("contexts", [])).category == "AM"


def test_a_list_gold_is_seen_in_any_order_but_every_item_is_needed() -> None:
    """A database tool lists a person's interests in its own order: the gold list was retrieved (EM, not
    AM) when every item is in the scratchpad; one item missing is not seen."""
    gold = "cliff erosion, dune morphology, glacier seismology"
    pad = "Observation: interests: glacier seismology; dune morphology; cliff erosion"
    assert gold_in(pad, gold)
    assert not gold_in("Observation: interests: glacier seismology; dune morphology", gold)
    assert not gold_in("Observation: erosion and seismology", gold)
    assert gold_in("It was founded in 1862.", "1862") and not gold_in("It was founded in 18620.", "1862")
