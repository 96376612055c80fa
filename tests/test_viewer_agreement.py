"""Agreement among many annotators (Fleiss' kappa, Krippendorff's alpha) and the score-label correlation of
each method, against values computed by hand; and their place on the meta-evaluation page."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from proctor.metaeval.agreement import (
    correlations,
    fleiss_kappa,
    group_agreement,
    krippendorff_alpha,
    rating_counts,
    spearman,
)
from proctor.store import RunStore
from proctor.viewer import create_app
from proctor.viewer.labels import LabelIn, LabelStore
from proctor.viewer.metaeval import meta_evaluate
from proctor.viewer.rundir import open_run

CSRF = "agreement-csrf"


def test_fleiss_kappa_on_the_classic_example() -> None:
    # Fleiss (1971) as on Wikipedia: 10 subjects, 14 raters each, 5 categories.
    counts = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    # By hand: column sums 20, 28, 39, 21, 32 of 140 ratings, so
    #   P_e = (20^2 + 28^2 + 39^2 + 21^2 + 32^2) / 140^2 = 4170 / 19600 = 0.212755.
    # P_i = (sum_j n_ij^2 - 14) / (14 * 13); the numerators are 182, 46, 56, 80, 60, 84, 44, 32, 52, 52
    # (e.g. row 2: 4 + 36 + 16 + 4 - 14 = 46), summing to 688, so P = 688 / 1820 = 0.378022.
    # kappa = (0.378022 - 0.212755) / (1 - 0.212755) = 0.2099 (Wikipedia: 0.210).
    expected = (688 / 1820 - 4170 / 19600) / (1 - 4170 / 19600)
    assert fleiss_kappa(counts) == pytest.approx(expected)
    assert fleiss_kappa(counts) == pytest.approx(0.210, abs=5e-4)


def test_krippendorff_alpha_with_missing_ratings() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, values 1-5,
    # missing ratings blank; the published nominal alpha is 0.743 (unit 12 has one rating: not pairable).
    table = [
        "1 1 . 1",
        "2 2 3 2",
        "3 3 3 3",
        "3 3 3 3",
        "2 2 2 2",
        "1 2 3 4",
        "4 4 4 4",
        "1 1 2 1",
        "2 2 2 2",
        ". 5 5 5",
        ". . 1 1",
        ". 3 . .",
    ]
    units = [[v for v in row.split() if v != "."] for row in table]
    assert krippendorff_alpha(rating_counts(units, list("12345"))) == pytest.approx(0.743, abs=5e-4)


def test_small_example_by_hand() -> None:
    # u1: c c | u2: c i i | u3: i i | u4: c (one rating: left out of both)
    counts = rating_counts([["c", "c"], ["c", "i", "i"], ["i", "i"], ["c"]], ["c", "i"])
    # Fleiss: P_1 = (4 - 2) / 2 = 1, P_2 = (1 + 4 - 3) / 6 = 1/3, P_3 = 1, P = 7/9;
    # p_c = 3/7, p_i = 4/7, P_e = 25/49; kappa = (7/9 - 25/49) / (24/49) = 118/216 = 0.5463.
    assert fleiss_kappa(counts) == pytest.approx(118 / 216)
    # Krippendorff: coincidences o_cc = 2 (u1), o_ci = o_ic = 2 * 1/2 = 1, o_ii = 2/2 + 2 = 3 (u2, u3);
    # n_c = 3, n_i = 4, n = 7; D_o = 2, D_e = 2 * 3 * 4 / 6 = 4; alpha = 1 - 2/4 = 0.5.
    assert krippendorff_alpha(counts) == pytest.approx(0.5)
    # Everybody always says the same category: both undefined.
    same = rating_counts([["c", "c"], ["c", "c", "c"]], ["c", "i"])
    assert fleiss_kappa(same) is None and krippendorff_alpha(same) is None
    assert fleiss_kappa(rating_counts([["c"]], ["c", "i"])) is None  # nothing pairable


def test_spearman_by_hand() -> None:
    # ranks of the scores 1, 3, 4, 2; of the labels (ties averaged) 1.5, 3.5, 3.5, 1.5.
    # deviations (-1.5, .5, 1.5, -.5) and (-1, 1, 1, -1): rho = 4 / sqrt(5 * 4) = 0.894427.
    c = spearman([0.1, 0.5, 0.9, 0.3], [0, 1, 1, 0])
    assert c.n == 4 and c.rho == pytest.approx(4 / 20**0.5)
    assert spearman([0.1, 0.1, 0.1], [0, 1, 1]).rho is None  # constant scores
    assert spearman([0.1, 0.2], [0, 1]).rho is None  # too few


@pytest.fixture
def run_root(tmp_path: Path) -> Path:
    """One run with four answers: judge `judge` gives verdicts only, `f1` numeric scores only; three
    annotators label them."""
    root = tmp_path / "runs"
    (root / "r").mkdir(parents=True)
    store = RunStore(root / "r" / "run.sqlite")
    store.start_run("r", "qa", {"name": "agree"}, "h", "0")
    verdicts = ["correct", "correct", "incorrect", "incorrect"]
    f1 = [0.9, 0.6, 0.4, 0.1]
    for i in range(4):
        store.put_item(f"a{i + 1}", "answer", {"candidate": "solo", "question": f"Q{i + 1}?"})
        store.put_judgment(f"a{i + 1}", "judge", verdict=verdicts[i], score=None, reason="")
        store.put_judgment(f"a{i + 1}", "f1", verdict=None, score=f1[i], reason="")
    store.finish_run("r")
    store.close()
    labels = {
        "ana": ["correct", "incorrect", "incorrect", "incorrect"],
        "bo": ["correct", "correct", "incorrect"],
        "cy": ["correct", "incorrect"],
    }
    with LabelStore(root / "r") as ls:
        for who, labs in labels.items():
            for i, lab in enumerate(labs):
                ls.add(LabelIn(item_id=f"a{i + 1}", label=lab, annotator=who))
    return root


def test_metaeval_shows_group_agreement_and_correlations(run_root: Path) -> None:
    with open_run(run_root / "r") as run, LabelStore(run_root / "r") as ls:
        meta = meta_evaluate(run, ls, "ana")
    # Items labelled by >= 2: a1 (c c c), a2 (i c i), a3 (i i); a4 (ana only) is left out.
    # Fleiss: P = (1 + 1/3 + 1) / 3 = 7/9, p_c = p_i = 4/8, P_e = 1/2: kappa = (7/9 - 1/2) / (1/2) = 5/9.
    # Krippendorff: o_cc = 6/2 + 0 = 3, o_ci = o_ic = 2/2 = 1, o_ii = 2/2 + 2 = 3; n_c = n_i = 4, n = 8;
    # D_o = 2, D_e = 2 * 4 * 4 / 7 = 32/7; alpha = 1 - 14/32 = 0.5625.
    (group,) = meta.groups
    assert (group.scale, group.agreement.annotators, group.agreement.items) == ("binary", 3, 3)
    assert group.agreement.fleiss_kappa == pytest.approx(5 / 9)
    assert group.agreement.krippendorff_alpha == pytest.approx(0.5625)
    by = {m.method: m for m in meta.methods}
    assert by["judge"].correlation is None  # verdicts only: no scores to rank
    # f1 against ana's labels (1, 0, 0, 0): score ranks 4, 3, 2, 1; label ranks 4, 2, 2, 2.
    # Deviations (1.5, .5, -.5, -1.5) and (1.5, -.5, -.5, -.5): rho = 3 / sqrt(5 * 3) = 0.774597.
    corr = by["f1"].correlation
    assert corr is not None and corr.n == 4 and corr.rho == pytest.approx(3 / 15**0.5)
    assert by["f1"].agreement.accuracy == pytest.approx(0.75)  # f1 cut at 0.5: c c i i vs c i i i

    client = TestClient(
        create_app(run_root, csrf_token=CSRF),
        base_url="http://127.0.0.1",
        headers={"Origin": "http://127.0.0.1"},
    )
    html = client.get("/runs/r/metaeval", params={"annotator": "ana"}).text
    row = html.split('id="group-agreement"', 1)[1].split('data-scale="binary"', 1)[1].split("</tr>", 1)[0]
    assert re.search(r'class="num fleiss">0\.556<', row)
    assert re.search(r'class="num alpha">0\.56[23]<', row)
    f1_row = html.split('data-method="f1"', 1)[1].split("</tr>", 1)[0]
    assert "0.775" in f1_row.split('class="rho"', 1)[1]
    judge_row = html.split('data-method="judge"', 1)[1].split("</tr>", 1)[0]
    assert "no scores" in judge_row


def test_group_agreement_ignores_unsure_and_single_labels() -> None:
    g = group_agreement(
        {"a": {"x": "correct", "y": "unsure"}, "b": {"x": "correct", "y": "correct", "z": "incorrect"}},
        ["correct", "incorrect"],
    )
    assert (g.annotators, g.items, g.labels) == (2, 1, 2)


def test_correlations_match_scipy_and_share_spearmans_guard() -> None:
    from scipy.stats import kendalltau, pearsonr, spearmanr

    x, y = [0.9, 0.2, 0.6, 0.4, 0.8], [1.0, 0.0, 1.0, 0.0, 0.0]
    c = correlations(x, y)
    assert c.n == 5 and c.spearman == spearman(x, y).rho == pytest.approx(spearmanr(x, y).statistic)
    assert c.pearson == pytest.approx(pearsonr(x, y).statistic)
    assert c.kendall == pytest.approx(kendalltau(x, y).statistic)
    for a, b in (([0.1, 0.2], [1.0, 0.0]), ([0.5, 0.5, 0.5], [1.0, 0.0, 1.0]), ([0.1, 0.2, 0.3], [1.0] * 3)):
        c = correlations(a, b)
        assert (c.pearson, c.spearman, c.kendall, spearman(a, b).rho) == (None, None, None, None)
