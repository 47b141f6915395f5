"""Graphs: node classification (Planetoid citation graphs, synthetic SBM).

Registers the ``graphs`` task (headline metric ``acc``, higher is better) with its datasets
(``planetoid``, ``sbm``) and models (``graph_attention``, ``graph_attention_dot``,
``full_attention``, ``gcn``, ``ggnn``, ``mlp``).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, Task, register_task
from tasks.graphs.data import PLANETOID_DEFAULTS, SBM_DEFAULTS, build_planetoid, build_sbm
from tasks.graphs.models import register_models
from tasks.graphs.module import MODULE_DEFAULTS, GraphNodeClassifier, make_module

__all__ = ["TASK", "GraphNodeClassifier"]

TASK = Task(
    name="graphs",
    metric="acc",
    mode="max",
    make_module=make_module,
    module_params=dict(MODULE_DEFAULTS),
    description="transductive node classification, full batch (GAT protocol)",
)
TASK.datasets.register(
    "planetoid",
    DatasetSpec(
        name="planetoid",
        build=build_planetoid,
        params=dict(PLANETOID_DEFAULTS),
        synthetic=False,
        description="Planetoid citation graph (Cora/CiteSeer/PubMed), public split, row-normalised features",
    ),
)
TASK.datasets.register(
    "sbm",
    DatasetSpec(
        name="sbm",
        build=build_sbm,
        params=dict(SBM_DEFAULTS),
        synthetic=True,
        description="synthetic stochastic block model: homophilous edges, noisy class-correlated features",
    ),
)
register_models(TASK.models)
register_task(TASK)
