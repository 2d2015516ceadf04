import re

_RE = re.compile(
    r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$"
)


def split_version(text):
    m = _RE.match(text.strip())
    if not m:
        raise ValueError(f"not a semantic version: {text!r}")
    major, minor, patch, pre, build = m.groups()
    pre_parts = tuple(pre.split(".")) if pre else ()
    return int(major), int(minor), int(patch), pre_parts, build or ""
