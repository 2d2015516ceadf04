def load_edges(text):
    """Parse lines like 'app -> lib_a, lib_b' into (src, dst) pairs."""
    edges = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        src, _, rest = line.partition("->")
        src = src.strip()
        if not src:
            raise ValueError(f"missing source in {raw!r}")
        for dst in rest.split(","):
            if dst.strip():
                edges.append((src, dst.strip()))
    return edges
