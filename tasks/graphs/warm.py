"""The heavy imports of a graph cell (PyG), which the package itself makes lazily: a warm parent (the
local pool's forkserver) imports this once for a run with graph cells, so each forked cell skips
~1 s of imports. PyG's import-time ``torch.jit.script`` deprecation warning is not the user's concern."""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated", category=FutureWarning)
    import torch_geometric.data  # noqa: F401
    import torch_geometric.io.planetoid  # noqa: F401
    import torch_geometric.nn  # noqa: F401
    import torch_geometric.transforms  # noqa: F401
    import torch_geometric.utils  # noqa: F401
