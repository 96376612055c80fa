"""The viewer's web app (Starlette + Jinja2): runs list, a run, its item browser and item pages, labels,
meta-evaluation and the comparison of two runs.

Security: the server binds to loopback by default (see `proctor.viewer.server`) and accepts only loopback
Host headers (no DNS rebinding); bound to another address it needs an access token (`TokenMiddleware`: every
request carries it as a cookie, an `Authorization: Bearer` header, or once as `?token=`) and accepts that
address as Host too; writes need the page's CSRF token in `X-CSRF-Token` and must come from the viewer's own
origin (`Origin`, else `Referer`: same host and port; another local port is the same "site" for cookies,
not the same origin); write bodies are bounded in size (413) and JSON nesting depth (400) before anything
parses them (`RequestGuard`); run ids are folder names resolved under the root only, and no link in the
runs folder is ever followed (`proctor.viewer.rundir`); a run that cannot be read gets an error page
naming the reason; templates autoescape and model text is never marked safe; the static report is served
with a Content-Security-Policy that runs no script.
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

from pydantic import BaseModel, Field, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proctor.store.record import MetricRecord, RunRecord
from proctor.store.safe_files import UnsafeStoreFile, read_plain
from proctor.viewer import items as items_q
from proctor.viewer.compare import Comparison, compare_indexed, preference_summary
from proctor.viewer.labels import (
    LabelFileError,
    LabelIn,
    LabelStore,
    PreferencePair,
    allowed,
    export_lines,
    parse_lines,
    resolve_item_ids,
    scale_for,
    swap_preference,
)
from proctor.viewer.metaeval import meta_evaluate
from proctor.viewer.run_config import config_yaml
from proctor.viewer.rundir import (
    READ_ERRORS,
    REPORT_FILE,
    BrokenRun,
    RunNotFound,
    RunSummary,
    SummaryCache,
    broken_reason,
    candidate_names,
    list_runs,
    open_run,
    probe,
    resolve_run,
    store_stamp,
)
from proctor.viewer.search import ensure_index, fts_query
from proctor.viewer.templating import render

STATIC = Path(__file__).parent / "static"
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1", "testserver"]
REPORT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"
TOKEN_COOKIE = "proctor_view_token"
TOKEN_PARAM = "token"
EXAM_QUESTION_KIND = "exam_question"  # `proctor.viewer.exam.QUESTION_KIND`
PAGE_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-src 'self'; object-src 'none'"
MAX_BODY = 256 * 1024  # a label or a preference (a note is at most 10,000 characters)
MAX_IMPORT_BODY = 16 * 1024 * 1024  # a JSONL file of labels
MAX_JSON_DEPTH = 16  # labels are flat objects
MAX_REPORT_BYTES = 256 * 1024 * 1024
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass
class ViewerState:
    root: Path
    csrf: str
    facets: dict[tuple[str, str], tuple[items_q.Facets, list[str]]]
    summaries: SummaryCache = field(default_factory=SummaryCache)
    # (run A, its store stamp, run B, its store stamp) -> their comparison, the last few pairs compared
    comparisons: dict[tuple[str, str, str, str], Comparison] = field(default_factory=dict)


def _state(request: Request) -> ViewerState:
    state: ViewerState = request.app.state.viewer
    return state


def _folder(request: Request, run_id: str | None = None) -> Path:
    """The run's folder: 404 for no such run, BrokenRun (an error page with the reason) for one that is
    refused or whose store cannot be read (`probe`, skipped while its summary is current)."""
    name = run_id or request.path_params["run_id"]
    try:
        folder = resolve_run(_state(request).root, name)
    except RunNotFound:
        raise HTTPException(404, "no such run") from None
    try:
        if not _state(request).summaries.is_current(folder):
            probe(folder)
    except READ_ERRORS as e:
        raise BrokenRun(name, broken_reason(e)) from None
    return folder


def _page(request: Request, template: str, **context: Any) -> Response:
    html = render(template, request=request, csrf=_state(request).csrf, **context)
    return Response(html, media_type="text/html", headers={"Content-Security-Policy": PAGE_CSP})


def _check_csrf(request: Request) -> None:
    sent = request.headers.get("x-csrf-token", "")
    if not hmac.compare_digest(sent, _state(request).csrf):
        raise HTTPException(403, "missing or wrong CSRF token (reload the page)")


def _open_indexed(folder: Path, *, search: bool = False) -> RunRecord:
    """The run record (read-only) with the side index (built or refreshed) attached."""
    index = ensure_index(folder, search=search)
    run = open_run(folder)
    try:
        run.attach_index(index)
    except BaseException:
        run.close()
        raise
    return run


def _facets(state: ViewerState, folder: Path, run: RunRecord) -> tuple[items_q.Facets, list[str]]:
    key = (folder.name, store_stamp(folder))
    hit = state.facets.get(key)
    if hit is None:
        hit = (items_q.facets(run), items_q.judged_kinds(run))
        state.facets = {k: v for k, v in state.facets.items() if k[0] != folder.name}
        state.facets[key] = hit
    return hit


# --- pages -----------------------------------------------------------------------------------------
def _summary(request: Request, folder: Path) -> RunSummary:
    return _state(request).summaries.get(folder)


async def runs_page(request: Request) -> Response:
    protocol = request.query_params.get("protocol") or None
    name = (request.query_params.get("name") or "").strip().lower()
    runs = list_runs(_state(request).root, _state(request).summaries)
    protocols = sorted({r.protocol for r in runs if r.protocol})
    shown = [
        r
        for r in runs
        if (protocol is None or r.protocol == protocol)
        and (not name or name in r.run_id.lower() or name in (r.name or "").lower())
    ]
    return _page(
        request, "runs.html.j2", runs=shown, all_runs=runs, protocols=protocols, protocol=protocol, name=name
    )


async def run_page(request: Request) -> Response:
    folder = _folder(request)
    summary = _summary(request, folder)
    with _open_indexed(folder) as run:
        fc, judged = _facets(_state(request), folder, run)
        metrics: list[MetricRecord] = run.metrics()
        config = config_yaml(run)
    with LabelStore(folder) as labels:
        n_labels = labels.count()
    others = [
        r
        for r in list_runs(_state(request).root, _state(request).summaries)
        if r.protocol == summary.protocol and r.broken is None and r.run_id != folder.name
    ]
    return _page(
        request,
        "run.html.j2",
        run=summary,
        facets=fc,
        judged=judged,
        metrics=metrics,
        n_labels=n_labels,
        others=others,
        config=config,
    )


async def report_file(request: Request) -> Response:
    folder = _folder(request)
    try:  # opened without following a link, checked on the open file
        html = read_plain(folder / REPORT_FILE, MAX_REPORT_BYTES)
    except UnsafeStoreFile as e:
        raise HTTPException(404, f"this run has no report to show ({e})") from None
    return Response(html, media_type="text/html", headers={"Content-Security-Policy": REPORT_CSP})


def _filter(request: Request) -> items_q.ItemFilter:
    raw = {k: v for k, v in request.query_params.items() if v != ""}
    try:
        return items_q.ItemFilter.model_validate(raw)
    except ValidationError:
        raise HTTPException(400, "bad filter") from None


async def items_page(request: Request) -> Response:
    folder = _folder(request)
    f = _filter(request)
    fts = fts_query(f.q) if f.q else None
    with _open_indexed(folder, search=fts is not None) as run:
        fc, judged = _facets(_state(request), folder, run)
        if f.kind is None:
            f = f.model_copy(update={"kind": items_q.default_kind(fc, judged)})
        page = items_q.page(run, f, fts)
        candidates = candidate_names(run)
    with LabelStore(folder) as labels:
        current = labels.current([r.key for r in page.rows])
    by_key: dict[str, list[Any]] = {}
    for lab in current:
        by_key.setdefault(lab.item_key, []).append(lab)
    return _page(
        request,
        "items.html.j2",
        run_id=folder.name,
        f=f,
        facets=fc,
        candidates=candidates,
        page=page,
        labels=by_key,
        scale=scale_for(f.kind or ""),
    )


async def item_page(request: Request) -> Response:
    folder = _folder(request)
    key = request.path_params["key"]
    f = _filter(request).model_copy(update={"page": 1})
    calls_page = request.query_params.get("calls", "1")
    if not calls_page.isdigit() or len(calls_page) > 9:
        raise HTTPException(400, "bad calls page")
    fts = fts_query(f.q) if f.q else None
    with _open_indexed(folder, search=fts is not None) as run:
        item = items_q.detail(run, key, calls_page=int(calls_page))
        if item is None:
            raise HTTPException(404, "no such item in this run")
        prev_key, next_key = items_q.neighbours(run, f, item.seq, fts)
        exam = None
        if item.kind == EXAM_QUESTION_KIND:
            # Imported here: the exam view needs the exam protocol, which other runs never load.
            from proctor.viewer.exam import exam_item

            exam = exam_item(run, item.key, item.data)
    with LabelStore(folder) as labels:
        history = labels.history(key)
    return _page(
        request,
        "item.html.j2",
        run_id=folder.name,
        item=item,
        f=f,
        prev_key=prev_key,
        next_key=next_key,
        history=history,
        scale=scale_for(item.kind),
        exam=exam,
    )


async def metaeval_page(request: Request) -> Response:
    folder = _folder(request)
    annotator = request.query_params.get("annotator") or None
    with open_run(folder) as run, LabelStore(folder) as labels:
        meta = meta_evaluate(run, labels, annotator)
    return _page(request, "metaeval.html.j2", run_id=folder.name, meta=meta)


async def compare_page(request: Request) -> Response:
    a_id, b_id = request.query_params.get("a", ""), request.query_params.get("b", "")
    folder_a, folder_b = _folder(request, a_id), _folder(request, b_id)
    run_a, run_b = _summary(request, folder_a), _summary(request, folder_b)
    if run_a.protocol != run_b.protocol:
        raise HTTPException(400, f"runs of different protocols ({run_a.protocol}, {run_b.protocol})")
    cmp = _comparison(_state(request), folder_a, folder_b)
    first = min(run_a.run_id, run_b.run_id)  # preferences live in the labels of the pair's first run
    with LabelStore(folder_a if first == run_a.run_id else folder_b) as labels:
        prefs = preference_summary(run_a.run_id, run_b.run_id, labels.current())
    return _page(request, "compare.html.j2", run_a=run_a, run_b=run_b, cmp=cmp, prefs=prefs)


COMPARISONS_KEPT = 8


def _comparison(state: ViewerState, folder_a: Path, folder_b: Path) -> Comparison:
    """The comparison of two runs, computed once per state of their stores (the runs' side indexes joined
    in SQL) and reused while neither store changes."""
    key = (folder_a.name, store_stamp(folder_a), folder_b.name, store_stamp(folder_b))
    hit = state.comparisons.get(key)
    if hit is None:
        with _open_indexed(folder_a) as record_a, _open_indexed(folder_b) as record_b:
            hit = compare_indexed(folder_a.name, folder_a, record_a, folder_b.name, folder_b, record_b)
        kept = [k for k in state.comparisons if (k[0], k[2]) != (key[0], key[2])][-(COMPARISONS_KEPT - 1) :]
        state.comparisons = {k: state.comparisons[k] for k in kept} | {key: hit}
    return hit


# --- labels (JSON) ---------------------------------------------------------------------------------
def _label_json(lab: Any) -> dict[str, Any]:
    return {
        "id": lab.id,
        "item_id": lab.item_key,
        "annotator": lab.annotator,
        "label": lab.label,
        "note": lab.note,
        "time": lab.created,
    }


async def post_label(request: Request) -> Response:
    _check_csrf(request)
    folder = _folder(request)
    try:
        body = await request.json()
        lab = LabelIn.model_validate(body)
    except (ValueError, ValidationError) as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    with open_run(folder) as run:
        item = run.item(lab.item_id)
    if item is None:
        return JSONResponse({"error": "no such item in this run"}, status_code=404)
    scale = scale_for(item.kind)
    if lab.label not in allowed(scale):
        return JSONResponse(
            {"error": f"this item takes {', '.join(allowed(scale))}, not {lab.label!r}"}, status_code=400
        )
    with LabelStore(folder) as labels:
        stored = labels.add(lab.model_copy(update={"time": None}))
    return JSONResponse(_label_json(stored))


class PreferenceIn(BaseModel):
    """A preference posted from the compare page: which run's answer to the item is better."""

    run_a: str = Field(min_length=1, max_length=200)
    item_a: str = Field(min_length=1, max_length=500)
    run_b: str = Field(min_length=1, max_length=200)
    item_b: str = Field(min_length=1, max_length=500)
    label: Literal["a", "b", "tie"]
    annotator: str = Field(min_length=1, max_length=100)
    note: str = Field(default="", max_length=10_000)


async def post_preference(request: Request) -> Response:
    _check_csrf(request)
    try:
        pref = PreferenceIn.model_validate(await request.json())
    except (ValueError, ValidationError) as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    if pref.run_a == pref.run_b:
        return JSONResponse({"error": "a preference compares two different runs"}, status_code=400)
    folders = {}
    for run_id, key in ((pref.run_a, pref.item_a), (pref.run_b, pref.item_b)):
        folders[run_id] = folder = _folder(request, run_id)
        with open_run(folder) as run:
            found = run.has_item(key)
        if not found:
            return JSONResponse({"error": f"no item {key!r} in run {run_id}"}, status_code=404)
    pair, swapped = PreferencePair(pref.run_a, pref.item_a, pref.run_b, pref.item_b).canonical()
    stored_label = swap_preference(pref.label) if swapped else pref.label
    try:
        lab = LabelIn(item_id=pair.key, label=stored_label, annotator=pref.annotator, note=pref.note)
    except ValidationError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    with LabelStore(folders[pair.run_a]) as labels:
        stored = labels.add(lab)
    return JSONResponse({**_label_json(stored), "label": pref.label, "stored_label": stored.label})


async def get_labels(request: Request) -> Response:
    folder = _folder(request)
    key = request.query_params.get("item")
    with LabelStore(folder) as labels:
        rows = labels.history(key) if key else labels.current()
    return JSONResponse([_label_json(lab) for lab in rows])


async def export_labels(request: Request) -> Response:
    folder = _folder(request)
    annotator = request.query_params.get("annotator") or None
    wanted = {x for x in (request.query_params.get("labels") or "").split(",") if x}
    with LabelStore(folder) as labels:
        rows = [lab for lab in labels.current(annotator=annotator) if not wanted or lab.label in wanted]
    with open_run(folder) as run:
        own_ids = run.item_ids_of_keys(lab.item_key for lab in rows)
    return StreamingResponse(
        iter(list(export_lines(rows, own_ids))),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{folder.name}-labels.jsonl"'},
    )


async def import_labels(request: Request) -> Response:
    _check_csrf(request)
    folder = _folder(request)
    annotator = (request.query_params.get("annotator") or "").strip()
    text = (await request.body()).decode("utf-8", errors="replace")
    try:
        parsed = parse_lines(text, annotator or "imported")
    except LabelFileError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    with open_run(folder) as run:
        parsed = resolve_item_ids(run, parsed)
    with LabelStore(folder) as labels:
        added, skipped = labels.import_labels(parsed)
    return JSONResponse({"added": added, "skipped": skipped})


def _error(request: Request, status: int, message: str) -> Response:
    if request.url.path.endswith((".jsonl", "/labels", "/import")) or request.method != "GET":
        return JSONResponse({"error": message}, status_code=status)
    html = render("error.html.j2", request=request, csrf="", status=status, message=message)
    return Response(
        html, status_code=status, media_type="text/html", headers={"Content-Security-Policy": PAGE_CSP}
    )


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, str(exc.detail))


BROKEN_STATUS = 422  # the run named exists but cannot be shown


async def broken_run_error(request: Request, exc: Exception) -> Response:
    """A run refused (a link) or unreadable (a corrupt, truncated, empty or foreign store): a page that
    says which and why; the other runs are not affected."""
    if isinstance(exc, BrokenRun):
        run_id, reason = exc.run_id, exc.reason
    else:
        params = request.path_params
        run_id = str(
            params.get("run_id")
            or " / ".join(request.query_params.getlist("a") + request.query_params.getlist("b"))
            or "?"
        )
        reason = broken_reason(exc)
    return _error(request, BROKEN_STATUS, f"Run {run_id} cannot be shown: {reason}.")


# --- request limits and origin ------------------------------------------------------------------
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKETS = re.compile(rb"[\[\]{}]")


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether JSON (or JSONL) text nests arrays/objects deeper than `limit` (strings are skipped; no
    parser is run, so no recursion limit is met)."""
    depth = 0
    for m in _JSON_BRACKETS.finditer(_JSON_STRING.sub(b"", body)):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(0, depth - 1)
    return False


_DEFAULT_PORT = {"http": 80, "https": 443}


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` (an Origin header, or a Referer URL) names the host and port of `host` (the Host
    header the request came in with, already checked by TrustedHostMiddleware)."""
    try:
        o = urlsplit(origin)
        h = urlsplit("//" + host)
        if o.scheme not in _DEFAULT_PORT or not o.hostname or not h.hostname:
            return False
        o_port = o.port or _DEFAULT_PORT[o.scheme]
        h_port = h.port or _DEFAULT_PORT[o.scheme]  # no port in Host: the scheme's default one
    except ValueError:  # a malformed port
        return False
    return o.hostname.lower() == h.hostname.lower() and o_port == h_port


class RequestGuard:
    """Every write (any method but GET/HEAD/OPTIONS): from the viewer's own origin (403 else), a body of
    at most `max_body` bytes (`max_import_body` for a label file; 413 else) nesting JSON at most
    `max_depth` deep (400 else) — checked before the endpoint parses anything."""

    def __init__(
        self, app: ASGIApp, *, max_body: int, max_import_body: int, max_depth: int = MAX_JSON_DEPTH
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.max_import_body = max_import_body
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        origin = request.headers.get("origin") or request.headers.get("referer")
        if not origin or not same_origin(origin, request.headers.get("host", "")):
            await self._refuse(scope, receive, send, 403, "a write must come from the viewer's own page "
                               "(its Origin or Referer must be this viewer's host and port)")  # fmt: skip
            return
        limit = self.max_import_body if scope["path"].endswith("/labels/import") else self.max_body
        too_big = f"the request body is larger than {limit:,} bytes"
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, 413, too_big)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(scope, receive, send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if json_depth_exceeds(body, self.max_depth):
            await self._refuse(scope, receive, send, 400, f"JSON nested deeper than {self.max_depth} levels")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
        await JSONResponse({"error": message}, status_code=status)(scope, receive, send)


class TokenMiddleware:
    """Every request must carry the access token: the cookie, `Authorization: Bearer TOKEN`, or the query
    parameter `?token=TOKEN`. A GET with a right query token is answered with a redirect to the same URL
    without it, setting an HttpOnly, SameSite=Strict cookie, so the token leaves the address bar and the
    history at once. A missing or wrong token gets 401 and nothing else (not even whether a run exists)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _ok(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if self._ok(bearer) or self._ok(request.cookies.get(TOKEN_COOKIE)):
            await self.app(scope, receive, send)
            return
        if self._ok(request.query_params.get(TOKEN_PARAM)):
            if request.method not in ("GET", "HEAD"):
                await self.app(scope, receive, send)
                return
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_PARAM]
            response: Response = RedirectResponse(
                request.url.path + (f"?{urlencode(rest)}" if rest else ""),
                status_code=303,
                headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
            )
            response.set_cookie(TOKEN_COOKIE, self.token.decode(), httponly=True, samesite="strict", path="/")
        else:
            response = PlainTextResponse(
                "401: this viewer needs its access token. Open the URL `proctor view` printed "
                "(it ends in ?token=...), or send the header `Authorization: Bearer TOKEN`.",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer", "Cache-Control": "no-store"},
            )
        await response(scope, receive, send)


def create_app(
    root: Path,
    *,
    csrf_token: str | None = None,
    token: str | None = None,
    hosts: list[str] | None = None,
    max_body: int = MAX_BODY,
    max_import_body: int = MAX_IMPORT_BODY,
) -> Starlette:
    """The viewer for the run folders directly under `root`.

    `token`: require this access token on every request (see `TokenMiddleware`). `hosts`: Host header
    values accepted besides loopback (the address the server is bound to; `"*"` for any, which is only
    allowed with a token, since the token then is what stops DNS rebinding). `max_body` / `max_import_body`:
    the largest write body in bytes, a label file's and any other (see `RequestGuard`)."""
    extra = [h.lower() for h in hosts or []]
    if token is None and extra:
        raise ValueError("a viewer that accepts other Host headers than loopback needs a token")
    if token is not None and not token:
        raise ValueError("an empty token")
    routes = [
        Route("/", runs_page),
        Route("/compare", compare_page),
        Route("/compare/preferences", post_preference, methods=["POST"]),
        Route("/runs/{run_id}", run_page),
        Route("/runs/{run_id}/report", report_file),
        Route("/runs/{run_id}/items", items_page),
        Route("/runs/{run_id}/items/{key}", item_page),
        Route("/runs/{run_id}/metaeval", metaeval_page),
        Route("/runs/{run_id}/labels", get_labels, methods=["GET"]),
        Route("/runs/{run_id}/labels", post_label, methods=["POST"]),
        Route("/runs/{run_id}/labels.jsonl", export_labels),
        Route("/runs/{run_id}/labels/import", import_labels, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_HOSTS + extra)]
    if token is not None:
        middleware.append(Middleware(TokenMiddleware, token=token))
    middleware.append(Middleware(RequestGuard, max_body=max_body, max_import_body=max_import_body))
    handlers: dict[Any, Any] = {HTTPException: http_error, BrokenRun: broken_run_error}
    handlers |= {error: broken_run_error for error in READ_ERRORS}
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.viewer = ViewerState(root=Path(root), csrf=csrf_token or secrets.token_urlsafe(32), facets={})
    return app
