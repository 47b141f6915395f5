"""The registered attention patterns, one module each; importing this package registers them all.

* :mod:`~attn_core.variants.builtin`: ``full``, ``truncated`` (:func:`attn_core.attention`) and
  ``graph`` (:func:`attn_core.graph_attention`);
* :mod:`~attn_core.variants.linear`: ``linear`` (Katharopoulos et al., elu + 1 features);
* :mod:`~attn_core.variants.performer`: ``performer`` (FAVOR+ random features);
* :mod:`~attn_core.variants.linformer`: ``linformer`` (learned length projections);
* :mod:`~attn_core.variants.nystrom`: ``nystrom`` (Nystromformer landmarks);
* :mod:`~attn_core.variants.local_global`: ``local_global`` (window + global tokens).
"""

from attn_core.variants import builtin, linear, linformer, local_global, nystrom, performer  # noqa: F401

__all__ = ["builtin", "linear", "performer", "linformer", "nystrom", "local_global"]
