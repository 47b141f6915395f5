"""Graphs: node classification (Planetoid citation graphs, synthetic SBM).

Registers the ``graphs`` task (headline metric ``acc``, higher is better) with its datasets
(``planetoid``, ``sbm``) and models (``graph_attention``, ``graph_attention_dot``,
``full_attention``, ``gcn``, ``ggnn``, ``mlp``).
"""

from __future__ import annotations

from tasks.common.registry import Bounds, DatasetSpec, define_task
from tasks.graphs import models, module
from tasks.graphs.data import PLANETOID_DEFAULTS, SBM_DEFAULTS, build_planetoid, build_sbm
from tasks.graphs.module import GraphNodeClassifier

__all__ = ["TASK", "GraphNodeClassifier"]

TASK = define_task("graphs", metric="acc", mode="max", module=module, models=models, datasets=[
    DatasetSpec("planetoid", build_planetoid, PLANETOID_DEFAULTS,
                description="Planetoid citation graph (Cora/CiteSeer/PubMed), public split, row-normalised features; "
                            "homophily: edges rewired to that edge homophily (degree-preserving swaps)",
                bounds={"homophily": Bounds(kind="float", minimum=0, maximum=1, nullable=True)},
                omit_when_default=("homophily", "data_seed")),
    DatasetSpec("sbm", build_sbm, SBM_DEFAULTS, synthetic=True,
                description="synthetic stochastic block model: homophilous edges, noisy class-correlated features",
                bounds={"homophily": Bounds(kind="float", minimum=0, maximum=1, nullable=True)},
                omit_when_default=("homophily",)),
], description="transductive node classification, full batch (GAT protocol)")
