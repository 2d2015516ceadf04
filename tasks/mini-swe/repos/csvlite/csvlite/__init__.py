from csvlite.reader import CsvError, parse_line, read_records
from csvlite.writer import format_line

__all__ = ["CsvError", "format_line", "parse_line", "read_records"]
