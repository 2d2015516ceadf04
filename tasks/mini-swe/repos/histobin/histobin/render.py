def render_bars(hist, width=20):
    top = max(hist.counts) or 1
    lines = []
    for (a, b), c in zip(zip(hist.edges, hist.edges[1:]), hist.counts):
        bar = "#" * round(c / top * width)
        lines.append(f"{a:g}-{b:g} | {bar} {c}")
    return "\n".join(lines)
