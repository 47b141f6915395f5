"""Strict YAML for configs: what a config never needs and a reader would misread is refused with
one line naming its line, and a large generated config (a sweep of 60k cells) loads in seconds.

Refused: a key given twice in one mapping (YAML keeps the last silently), nesting deeper than
:data:`MAX_YAML_DEPTH` (no ``RecursionError``), and aliases adding more than
:data:`MAX_YAML_ALIAS_NODES` nodes to the ones the file writes (a "billion laughs" document is
small on disk and explodes on the first deep copy or hash; no ``MemoryError``). A document that is
simply large has no limit: it costs what its text costs.

Where PyYAML has libyaml (``yaml.CSafeLoader``, in PyPI's wheels) the document is scanned and
composed in C, about 5x faster than PyYAML's Python loader: the nesting depth is first read from
libyaml's event stream (iterative, so a 100k-deep document cannot overflow a stack), then the node
tree is composed, its aliases counted and the data constructed, with the same checks and
messages as the pure-Python :class:`StrictLoader`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["MAX_YAML_DEPTH", "MAX_YAML_ALIAS_NODES", "Refused", "StrictLoader", "parse_yaml"]

MAX_YAML_DEPTH = 64
MAX_YAML_ALIAS_NODES = 200_000
_CLoader = getattr(yaml, "CSafeLoader", None)


class Refused(yaml.YAMLError):
    """A YAML document that parses but is refused (duplicate key, too deep, too many aliases)."""


def _too_deep(line: int) -> Refused:
    return Refused(f"line {line}: nested deeper than {MAX_YAML_DEPTH} levels")


def check_aliases(root: Any) -> None:
    """Refuse ``root`` when its aliases add more than :data:`MAX_YAML_ALIAS_NODES` nodes to the
    ones the document writes (expanded size minus distinct nodes), naming the line where that
    count is passed. Linear in the written nodes: each is sized once, an alias reuses the size."""
    sizes: dict[int, int] = {}
    written = 0

    def size(n: Any) -> int:  # nodes after alias expansion; each shared node sized once
        nonlocal written
        if id(n) in sizes:
            return sizes[id(n)]
        written += 1
        children = (n.value if isinstance(n, yaml.SequenceNode)
                    else [c for kv in n.value for c in kv] if isinstance(n, yaml.MappingNode) else [])
        total = 1 + sum(size(c) for c in children)
        # the subtree's distinct nodes are at most `written`, and what the aliases add to the whole
        # document is at least what they add to this subtree: so this refuses only a true excess
        if total - written > MAX_YAML_ALIAS_NODES:
            raise Refused(f"line {n.start_mark.line + 1}: aliases add more than {MAX_YAML_ALIAS_NODES} values "
                          f"to the {written} written in the file (a config never needs that many; a large "
                          "config without aliases has no such limit)")
        sizes[id(n)] = total
        return total

    size(root)


class _NoDuplicateKeys:
    """The constructor half shared by both loaders: a key given twice in one mapping is refused."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # '<<' merges may be overridden: that is what they are for
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise Refused(f"key {key!r} is given twice in one mapping (lines {seen[key]} and {line}); "
                                  "YAML would silently keep the last one: give it once")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class StrictLoader(_NoDuplicateKeys, yaml.SafeLoader):
    """``yaml.SafeLoader`` with the checks above (the pure-Python path; see the module's docstring)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _too_deep(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            check_aliases(node)
        return node


if _CLoader is not None:
    class _StrictCLoader(_NoDuplicateKeys, _CLoader):  # type: ignore[misc, valid-type]
        """libyaml's loader with the same constructor checks; depth and aliases in :func:`_parse_c`."""

#: ``1e-05``, ``3E+2``: floats in YAML 1.2 and in what Python prints (``str(1e-05)``), strings under
#: YAML 1.1's rule (a dot required), so a generated sweep's learning rates were refused as text
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
for _loader in (StrictLoader, *([_StrictCLoader] if _CLoader is not None else [])):
    _loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


_OPEN = {yaml.SequenceStartEvent, yaml.MappingStartEvent}
_CLOSE = {yaml.SequenceEndEvent, yaml.MappingEndEvent}
_LEAF = {yaml.ScalarEvent, yaml.AliasEvent}


def _parse_c(text: str) -> Any:
    depth = 0
    for event in yaml.parse(text, Loader=_CLoader):  # libyaml's events: no recursion
        kind = type(event)
        if kind in _OPEN:
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _too_deep(event.start_mark.line + 1)
        elif kind in _CLOSE:
            depth -= 1
        elif kind in _LEAF and depth + 1 > MAX_YAML_DEPTH:  # a scalar is a level too, as in compose_node
            raise _too_deep(event.start_mark.line + 1)
    loader = _StrictCLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_aliases(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str) -> Any:
    """``text`` loaded strictly (libyaml where PyYAML has it, else :class:`StrictLoader`); a refused
    document raises :class:`Refused`, a malformed one ``yaml.YAMLError``."""
    if _CLoader is not None:
        return _parse_c(text)
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
