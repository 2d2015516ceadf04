from iniconf.comments import strip_comment


class ParseError(ValueError):
    pass


def parse(text):
    """Return {section: {key: value}} from INI text."""
    data, section = {}, None
    for n, raw in enumerate(text.splitlines(), start=1):
        line = strip_comment(raw).strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            data.setdefault(section, {})
            continue
        if section is None:
            raise ParseError(f"line {n}: key outside any section")
        key, sep, value = line.partition("=")
        if not sep:
            raise ParseError(f"line {n}: expected key = value")
        data[section][key.strip()] = value.strip()
    return data
