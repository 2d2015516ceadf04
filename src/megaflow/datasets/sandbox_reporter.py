"""MegaFlow's pytest reporter, run inside the grading sandbox (shipped as text).

Grading does not read what the tests print: the patched code runs in the test
process and can print anything. This module is copied into the grading
sandbox, outside the workspace, and started as the test runner itself
(``python -I -S megaflow_pytest.py <pytest args>``): no current directory,
user site, ``PYTHON*`` variables or ``sitecustomize`` of the workspace, plugin
autoload off. Before any code of the repository runs it

* reads a key the host wrote for this run and deletes it, and opens the
  records file: each record it writes is a JSON line with a sequence number
  and an HMAC under that key, so a line written by anyone else, a gap or a
  reordering shows;
* installs an audit hook (it cannot be removed) that records a *tamper* when
  code sets attributes of the runner's classes or functions, installs a
  trace or profile function, or walks the garbage collector's objects;
* imports pytest and its builtin plugins and fingerprints every function and
  class they define.

It records each test report as pytest's own code made it (an innermost
``pytest_runtest_makereport`` wrapper, before any other wrapper can change
it), checks the fingerprint and the registered hook implementations at every
report (a plugin from a file the candidate patch changed, or one registered
by test code, is a tamper), and ends with the exit status, which it then
exits with at once (``os._exit``: no exit handler of the tests runs after it).
The host (:mod:`megaflow.datasets.pytest_channel`) checks the chain, the exit
status the sandbox saw, and that each expected test ran.

Code in the same process can in principle reach this module's memory; what
it cannot do unseen is change the runner, the reports or the records through
the ways above. Standard library only; runs on Python 3.6 and newer and on
pytest 4 to 8. Never imported by MegaFlow on the host.
"""

import builtins
import hashlib
import hmac
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # type comments, not annotations: this file runs on Python 3.6
    from typing import Any, Callable, Dict, Generator, List, Tuple  # noqa: F401, UP035

_NEW_MAC = hmac.new
_SHA256 = hashlib.sha256
_DUMPS = json.dumps
_WRITE = os.write
_FSTAT = os.fstat
_EXIT = os._exit
_PROTECTED = ("_pytest", "pytest", "pluggy", "__main__")  # __main__: this module
_WATCHED_EVENTS = ("sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                   "gc.get_referents")  # fmt: skip


class _Channel:
    """The records file: signed, numbered JSON lines."""

    def __init__(self, directory):
        # type: (str) -> None
        with open(os.path.join(directory, "key"), "rb") as f:
            self._key = f.read()
        os.unlink(os.path.join(directory, "key"))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self._fd = os.open(os.path.join(directory, "records"), flags, 0o600)
        st = os.fstat(self._fd)
        self._file = (self._fd, st.st_dev, st.st_ino)
        self._seq = 0
        self.tampers = []  # type: List[str]

    def write(self, kind, **fields):
        # type: (str, Any) -> None
        fields["kind"] = kind
        fields["seq"] = self._seq
        self._seq += 1
        body = _DUMPS(fields, sort_keys=True)
        mac = _NEW_MAC(self._key, body.encode(), _SHA256).hexdigest()
        st = _FSTAT(self._fd)
        if (self._fd, st.st_dev, st.st_ino) != self._file:  # the fd was swapped under us
            _EXIT(97)  # no end record: the run cannot count
        _WRITE(self._fd, (mac + " " + body + "\n").encode())

    def tamper(self, reason):
        # type: (str) -> None
        if reason not in self.tampers:
            self.tampers.append(reason)
            self.write("tamper", reason=reason)


_CHANNEL_STATE = frozenset({"_key", "_fd", "_file", "_seq", "tampers"})
_REPORTER_STATE = frozenset({"channel", "untrusted", "workspace", "known", "importers", "verdicts",
                             "allowed_plugins", "exitstatus", "manager", "armed"})  # fmt: skip


def _is_protected(obj):
    # type: (object) -> bool
    module = getattr(obj, "__module__", None) or ""
    return isinstance(module, str) and module.split(".")[0] in _PROTECTED


def _fingerprint():
    # type: () -> List[Tuple[Any, str, object, str]]
    """Every function and class the runner's modules hold, and the methods of
    its classes (each class once, however many modules import it), as
    ``(namespace, name, object, label)``: a later check is one lookup each."""
    out = []  # type: List[Tuple[Any, str, object, str]]
    classes = {}  # type: Dict[int, type]
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in _PROTECTED:
            continue
        space = vars(module)
        for attr, value in list(space.items()):
            if callable(value):
                out.append((space, attr, value, name + "." + attr))
                if isinstance(value, type) and _is_protected(value):
                    classes[id(value)] = value
    for cls in classes.values():
        methods = vars(cls)
        where = cls.__module__ + "." + cls.__qualname__ + "."
        for attr, value in list(methods.items()):
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                out.append((methods, attr, value, where + attr))
    return out


class Reporter:
    """The pytest plugin: records reports and checks the runner is intact."""

    def __init__(self, channel, untrusted, workspace):
        # type: (_Channel, List[str], str) -> None
        self.channel = channel
        self.untrusted = set(untrusted)
        self.workspace = workspace.rstrip("/") + "/"
        self.known = []  # type: List[Tuple[Any, str, object, str]]
        self.importers = []  # type: List[object]
        self.verdicts = {}  # type: Dict[int, Tuple[object, bool]]
        self.allowed_plugins = set()  # type: set[int]
        self.exitstatus = None  # type: int | None
        self.manager = None  # type: Any
        self.armed = []  # type: List[bool]

    def check_runner(self):
        # type: () -> None
        """The first call takes the baseline; later ones compare with it. Names
        bound later (pytest rebinds a hook of its assertion module per test) are
        not the runner's code and are not compared."""
        if not self.known:
            self.known = _fingerprint()
            self.importers = [*sys.meta_path, *sys.path_hooks]
            self.known.append((vars(builtins), "__import__", builtins.__import__, "__import__"))
        for space, attr, value, label in self.known:
            if space.get(attr) is not value:
                self.channel.tamper("runner code replaced: " + label)
        self.check_self()
        for finder in [*sys.meta_path, *sys.path_hooks]:  # what could rewrite a test as it loads
            if not any(finder is known for known in self.importers):
                name = getattr(finder, "__qualname__", None) or type(finder).__qualname__
                self.channel.tamper("an import hook was added: " + str(name))
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) or ""
            top = name.split(".")[0]
            stdlib = top in getattr(sys, "stdlib_module_names", ())
            if path.startswith(self.workspace) and (top in _PROTECTED or stdlib):
                self.channel.tamper("module " + name + " is loaded from the workspace")

    def check_self(self):
        # type: () -> None
        """Nothing shadows this reporter's or its channel's methods on the
        instances, and neither was swapped for another class."""
        mine = [(self, Reporter, _REPORTER_STATE), (self.channel, _Channel, _CHANNEL_STATE)]
        for obj, cls, state in mine:
            extra = set(vars(obj)) - state
            if type(obj) is not cls or extra:
                self.channel.tamper("the reporter was changed: " + ", ".join(sorted(extra)))

    def _plugin_ok(self, plugin):
        # type: (object) -> bool
        """Whether ``plugin`` may implement runner hooks (kept per plugin: its
        file does not change, and the check runs at every report)."""
        seen = self.verdicts.get(id(plugin))
        if seen is not None and seen[0] is plugin:
            return seen[1]
        ok = self._judge_plugin(plugin)
        self.verdicts[id(plugin)] = (plugin, ok)
        return ok

    def _judge_plugin(self, plugin):
        # type: (object) -> bool
        path = getattr(plugin, "__file__", None)
        if path is not None:  # a module: a conftest or an installed plugin
            path = os.path.realpath(path)
            if path.endswith((".pyc", ".pyo")):
                return False
            rel = path[len(self.workspace) :] if path.startswith(self.workspace) else None
            if rel is None:
                return True
            return rel not in self.untrusted and os.path.basename(rel) == "conftest.py"
        if isinstance(plugin, type):  # a plugin class, as pytest registers some
            return _is_protected(plugin)
        return _is_protected(type(plugin)) or plugin is self

    def pytest_plugin_registered(self, plugin, manager):
        # type: (object, Any) -> None
        if self._plugin_ok(plugin):
            self.allowed_plugins.add(id(plugin))
        else:
            name = getattr(plugin, "__file__", None) or repr(type(plugin))
            self.channel.tamper("a runner plugin from " + str(name))

    def check_hooks(self, manager):
        # type: (Any) -> None
        for plugin in manager.get_plugins():
            if id(plugin) not in self.allowed_plugins and not self._plugin_ok(plugin):
                name = getattr(plugin, "__file__", None) or repr(type(plugin))
                self.channel.tamper("a runner plugin from " + str(name))
        for name, caller in list(vars(manager.hook).items()):
            impls = getattr(caller, "get_hookimpls", None)
            for impl in impls() if impls is not None else ():
                if not self._plugin_ok(impl.plugin):
                    self.channel.tamper("a hook implementation " + name + " from test code")

    def pytest_sessionstart(self, session):
        # type: (Any) -> None
        """Configuration is done (pytest's own plugins have patched what they
        patch): from here on the runner must stay as it is."""
        self.manager = session.config.pluginmanager
        self.check_runner()
        self.armed.append(True)
        self.channel.write("start", pytest=__import__("pytest").__version__)

    def pytest_collectreport(self, report):
        # type: (Any) -> None
        if report.outcome == "failed":
            self.channel.write("collect", nodeid=report.nodeid, outcome="failed")

    def pytest_runtest_makereport(self, item, call):
        # type: (Any, Any) -> Generator[None, Any, None]
        """Innermost wrapper (``trylast``, registered before any conftest): the
        report as pytest's own implementation made it."""
        outcome = yield
        try:
            report = outcome.get_result()
        except BaseException:  # the inner call failed: pytest reports that itself
            return
        self.channel.write(
            "test",
            nodeid=item.config.cwd_relative_nodeid(report.nodeid),
            when=report.when,
            outcome=report.outcome,
            xfail=hasattr(report, "wasxfail"),
        )
        self.check_runner()
        self.check_hooks(item.config.pluginmanager)

    def pytest_sessionfinish(self, session, exitstatus):
        # type: (Any, int) -> None
        self.exitstatus = int(exitstatus)


def _audit(channel, armed):
    # type: (_Channel, List[bool]) -> Callable[[str, Tuple[Any, ...]], None]
    def hook(event, args):
        # type: (str, Tuple[Any, ...]) -> None
        if not armed:
            return
        if event in _WATCHED_EVENTS:
            channel.tamper("the tests called " + event)
        elif event == "object.__setattr__" and args and _is_protected(args[0]):
            channel.tamper("runner object changed: " + str(args[1]))

    return hook


def _site_packages():
    # type: () -> None
    """The interpreter's site directories, without ``sitecustomize`` (``-S``)."""
    import site

    for directory in site.getsitepackages():
        site.addsitedir(directory)


def main(argv):
    # type: (List[str]) -> None
    """``megaflow_pytest.py <records dir> <workspace> <untrusted list> <-m|--> <pytest args>``.

    ``-m`` puts the working directory first on ``sys.path`` once the runner is
    imported, as ``python -m pytest`` does; ``--`` does not, as ``pytest``."""
    directory, workspace, untrusted_file = argv[1], argv[2], argv[3]
    channel = _Channel(directory)
    with open(untrusted_file) as f:
        untrusted = [line for line in f.read().splitlines() if line]
    _site_packages()
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import pytest
    from _pytest.config import default_plugins

    for name in default_plugins:
        try:
            __import__("_pytest." + name)
        except ImportError:
            pass
    wrap = pytest.hookimpl(hookwrapper=True, trylast=True)
    Reporter.pytest_runtest_makereport = wrap(  # type: ignore[method-assign]
        Reporter.pytest_runtest_makereport
    )
    if argv[4] == "-m":  # as ``python -m pytest``: the working directory first on the path
        sys.path.insert(0, os.getcwd())
    reporter = Reporter(channel, untrusted, workspace)
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(_audit(channel, reporter.armed))
    code = 4
    try:
        code = int(pytest.main(argv[5:], plugins=[reporter]))
    finally:
        if reporter.exitstatus is None:
            channel.tamper("the session did not finish")
        channel.write("end", exitstatus=code, session=reporter.exitstatus)
        for stream in (sys.stdout, sys.stderr):  # for people to read; results are written
            try:
                stream.flush()
            except Exception:
                pass
        _EXIT(code)


if __name__ == "__main__":
    main(sys.argv)
