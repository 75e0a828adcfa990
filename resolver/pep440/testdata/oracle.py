"""Differential oracle: evaluates cases.json with the packaging library vendored in pip.

Usage: python3 oracle.py CASES_JSON  (writes one JSON array to stdout)
"""
import json
import sys

from pip._vendor.packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from pip._vendor.packaging.version import InvalidVersion, Version


def version(s):
    try:
        return Version(s)
    except InvalidVersion:
        return None


def strict_set(s):
    """A SpecifierSet, or None if any clause needs the LegacySpecifier fallback."""
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            Specifier(part)
        except InvalidSpecifier:
            return None
    return SpecifierSet(s)


def run(c):
    kind = c["kind"]
    if kind == "compare":
        a, b = version(c["a"]), version(c["b"])
        out = {"valid_a": a is not None, "valid_b": b is not None, "cmp": 0, "str_a": str(a) if a else ""}
        if a is not None and b is not None:
            out["cmp"] = (a > b) - (a < b)
        return out
    spec = strict_set(c["spec"])
    out = {"valid_spec": spec is not None, "str": str(spec) if spec is not None else ""}
    if kind == "match":
        v = version(c["version"])
        out["valid_version"] = v is not None
        out["match"] = bool(spec is not None and v is not None and spec.contains(v))
        return out
    # best: pip's SpecifierSet.filter(candidates) with prereleases=None, then the maximum.
    cands = c["candidates"]
    valid = [x for x in cands if version(x) is not None]
    out["best"] = -1
    if spec is not None:
        kept = list(spec.filter(valid))
        if kept:
            top = max(kept, key=Version)
            out["best"] = cands.index(top)
    return out


cases = json.load(open(sys.argv[1]))
json.dump([run(c) for c in cases], sys.stdout)
