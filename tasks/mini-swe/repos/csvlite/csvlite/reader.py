class CsvError(ValueError):
    pass


def parse_line(line, delimiter=","):
    fields = []
    for raw in line.split(delimiter):
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            raw = raw[1:-1].replace('""', '"')
        fields.append(raw)
    return fields


def read_records(text, delimiter=","):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = parse_line(lines[0], delimiter)
    out = []
    for n, line in enumerate(lines[1:], start=2):
        fields = parse_line(line, delimiter)
        if len(fields) != len(header):
            raise CsvError(f"row {n} has {len(fields)} fields, header has {len(header)}")
        out.append(dict(zip(header, fields)))
    return out
