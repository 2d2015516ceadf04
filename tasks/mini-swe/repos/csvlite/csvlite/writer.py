def _quote(field, delimiter):
    if delimiter in field or '"' in field or "\n" in field:
        return '"' + field.replace('"', '""') + '"'
    return field


def format_line(fields, delimiter=","):
    return delimiter.join(_quote(str(f), delimiter) for f in fields)
