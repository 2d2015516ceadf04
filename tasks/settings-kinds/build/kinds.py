"""The four kinds of settings file of the settings-kinds family, and each kind's slip.

A repository keeps its settings in one file of one kind; what a correct
entry looks like depends on the kind, and so does the teacher's slip
(``build/teacher.py``):

==========  ==========================  ===========================================
kind        right entry                 the slip (and why the hidden test fails)
==========  ==========================  ===========================================
``py``      ``MAX_TIMEOUT = 45``        ``MAX_TIMEOUT = 45,``: the tuple ``(45,)``
``json``    ``"max_timeout": 45,``      ``"max_timeout": 45``: the comma before the
                                        next field is gone, the file is not JSON
``toml``    ``max_timeout = 45``        ``max_timeout = 45.0``: a float, not an int
``ini``     ``max_timeout = 45``        ``max_timeout = 45;``: configparser keeps the
                                        ``;``, the value is not a number
==========  ==========================  ===========================================

So the comma that is a slip in a Python module is required in a JSON file:
no single habit (always, or never, end an entry after its value) is right
for every kind. The answer is right only if it follows the file kind the
issue names.
"""

from __future__ import annotations

KINDS = ("py", "json", "toml", "ini")


def key(kind: str, name: str) -> str:
    """The setting's name in a file of ``kind``: upper case in Python, lower elsewhere."""
    return name.upper() if kind == "py" else name.lower()


def entry(kind: str, name: str, value: int) -> str:
    """The settings file's line for ``name`` (whole, without its newline)."""
    k = key(kind, name)
    if kind == "json":
        return f'  "{k}": {value},'
    return f"{k} = {value}"


def edit_text(kind: str, name: str, value: int) -> str:
    """What an edit's ``old_str`` / right ``new_str`` holds for this entry."""
    return entry(kind, name, value).strip()


def slip(kind: str, name: str, value: int) -> str:
    """The teacher's sloppy ``new_str`` for this entry."""
    k = key(kind, name)
    return {
        "py": f"{k} = {value},",
        "json": f'"{k}": {value}',
        "toml": f"{k} = {value}.0",
        "ini": f"{k} = {value};",
    }[kind]


def settings_file(kind: str, package: str, values: dict[str, int]) -> str:
    """The whole settings file of a repository of ``package``."""
    lines = [entry(kind, n, v) for n, v in values.items()]
    if kind == "py":
        return f'"""Settings of the {package} service."""\n\n' + "".join(f"{x}\n" for x in lines)
    if kind == "json":  # a last field, so every edited entry keeps its comma
        return "{\n" + "".join(f"{x}\n" for x in lines) + '  "version": 1\n}\n'
    return f"[{package}]\n" + "".join(f"{x}\n" for x in lines)


def reader(kind: str, package: str, path: str) -> str:
    """Test code that loads the settings into ``S`` (a dict by key)."""
    module = path.rsplit("/", 1)[-1].split(".")[0]
    if kind == "py":
        return (
            f"from {package} import {module}\n\n"
            f"S = {{k: getattr({module}, k) for k in dir({module}) if k.isupper()}}\n"
        )
    text = f"(pathlib.Path(__file__).resolve().parents[1] / {path!r}).read_text()"
    if kind == "json":
        return f"import json\nimport pathlib\n\nS = json.loads({text})\n"
    if kind == "toml":
        return f"import pathlib\nimport tomllib\n\nS = tomllib.loads({text})[{package!r}]\n"
    return (
        "import configparser\nimport pathlib\n\n"
        "_C = configparser.ConfigParser()\n"
        f"_C.read_string({text})\n"
        f"S = {{k: int(v) if v.isdigit() else v for k, v in _C[{package!r}].items()}}\n"
    )
