"""Suite: several protocols over one corpus and one candidate set, each an ordinary run sharing the call
cache, then one knowledge map of candidates x topics (k-means topics of the chunk embeddings) from every
member's judged items, with the places where members disagree.

A suite opens no run context of its own: the runner hands the config to `compose` (`run_suite`), which
runs the members through the runner and has the kit write the suite's folder from its result.
"""

from proctor.errors import UserError
from proctor.kit.context import RunContext
from proctor.kit.registry import Protocol, Role
from proctor.protocols.suite.config import Config
from proctor.protocols.suite.members import member_plans
from proctor.protocols.suite.result import SuiteResult
from proctor.protocols.suite.run import run_suite


async def _no_context(ctx: RunContext[Config]) -> SuiteResult:
    raise UserError(
        "the suite protocol runs other runs; start it with `proctor run` (proctor.runner.run_config)."
    )


PROTOCOL = Protocol(
    name="suite",
    settings=Config,
    roles=(
        Role("examiner", "passed to the members whose protocol has this role", required=False),
        Role("judge", "passed to the members whose protocol has this role", required=False),
        Role("interactor", "passed to the members whose protocol has this role (kieval)", required=False),
        Role("evaluator", "passed to the members whose protocol has this role (kieval)", required=False),
    ),
    run=_no_context,
    result=SuiteResult,
    compose=run_suite,
    members=member_plans,
)
