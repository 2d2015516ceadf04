from rle.runs import runs


def encode(text):
    if any(c.isdigit() for c in text):
        raise ValueError("digits cannot be run-length encoded")
    return "".join(f"{n}{c}" if n > 1 else c for c, n in runs(text))


def decode(data):
    out, count = [], ""
    for c in data:
        if c.isdigit():
            count = c
        else:
            out.append(c * int(count or 1))
            count = ""
    if count:
        raise ValueError("dangling count at end of input")
    return "".join(out)
