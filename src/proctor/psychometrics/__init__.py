"""Psychometrics for exams put to LLMs and RAG pipelines.

* `fit_irt`: 1PL / 2PL / 3PL item response models (marginal ML by EM, or joint MAP), NaN = missing.
* `fit_hierarchical`: a subject's ability as the sum of its components' abilities (LLM, retriever, ...).
* `item_information` / `test_information`: Fisher information curves; `item_characteristic`: P(theta).
* `prune_items`: iterative removal of the least discriminating items, ids kept aligned.
* `adaptive`: computerised adaptive testing (`adaptive_test`, `simulate_adaptive`).
* `fit_items`: item parameters for known abilities (calibration; the "oracle" of recovery studies).
"""

from ._core import Bounds, Priors
from .adaptive import AdaptiveResult, AdaptiveSimulation, adaptive_test, simulate_adaptive
from .hierarchical import HierarchicalFit, fit_hierarchical
from .information import item_characteristic, item_information, test_information
from .irt import IRTFit, fit_irt, fit_items, score_abilities
from .pruning import PruneResult, PruneStep, prune_items
from .simulate import simulate_responses

__all__ = [
    "AdaptiveResult",
    "AdaptiveSimulation",
    "Bounds",
    "HierarchicalFit",
    "IRTFit",
    "Priors",
    "PruneResult",
    "PruneStep",
    "adaptive_test",
    "fit_hierarchical",
    "fit_irt",
    "fit_items",
    "item_characteristic",
    "item_information",
    "prune_items",
    "score_abilities",
    "simulate_adaptive",
    "simulate_responses",
    "test_information",
]
