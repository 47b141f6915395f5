"""The local pool's forkserver imports this last: every object it has preloaded (torch, Lightning,
the domains) moves to the permanent generation (:func:`gc.freeze`), so that the collections of a
cell forked from it skip them (the one at a cell's end took ~0.4 s) and their pages stay shared."""

import gc

gc.freeze()
