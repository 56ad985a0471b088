"""The package's PEP 517 build backend: standard library only, so that
`pip install ./clients/python` needs nothing from PyPI.

pyproject.toml says `requires = []` and points here (`backend-path`): pip's
isolated build environment then has nothing to install, and this module
builds the wheel (and the sdist, and the editable wheel of `pip install -e`)
from pyproject.toml's [project] table, which is the one place the name,
version and the rest of the metadata are written. [tool.sandbox-run-build]
names the packages: every file under each, but bytecode, goes in the wheel.

It reads pyproject.toml with tomllib (Python 3.11+), tomli when there is
one, or else with the small reader below, which takes the part of TOML a
pyproject.toml uses (tables, strings, arrays, inline tables, booleans and
integers). It is importable by Python 3.7 and later, so that pip on an
interpreter older than requires-python says so instead of failing here.
"""

import base64
import csv
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND_DIR = os.path.basename(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "sandbox_run_build (in-tree)"
# The wheel's and sdist's entries carry this date (zip cannot go earlier),
# or SOURCE_DATE_EPOCH's, so that a build is the same from one run to the next.
EPOCH = 315532800  # 1980-01-01T00:00:00Z
# The sdist's own files, besides the packages and PKG-INFO.
SDIST_EXTRA = ("pyproject.toml", "README.md", BACKEND_DIR, "tests")


# --- PEP 517 hooks -----------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = Project.load()
    path = os.path.join(metadata_directory, project.dist_info)
    os.makedirs(path, exist_ok=True)
    for name, data in project.dist_info_files("wheel"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    return project.dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = Project.load()
    files = [(arc, _read(os.path.join(ROOT, arc))) for arc in project.package_files()]
    return _write_wheel(project, wheel_directory, files, "wheel")


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose one file is a .pth that puts the source tree on sys.path:
    edits to sandbox_run/ take effect without installing again."""
    project = Project.load()
    pth = "__editable__.%s-%s.pth" % (project.dist_name, project.version)
    files = [(pth, (ROOT + "\n").encode("utf-8"))]
    return _write_wheel(project, wheel_directory, files, "editable")


def build_sdist(sdist_directory, config_settings=None):
    project = Project.load()
    base = "%s-%s" % (project.dist_name, project.version)
    name = base + ".tar.gz"
    members = [("PKG-INFO", project.metadata())]
    for arc in sorted(set(project.package_files()) | set(_walk(SDIST_EXTRA))):
        members.append((arc, _read(os.path.join(ROOT, arc))))
    mtime = _epoch()
    with open(os.path.join(sdist_directory, name), "wb") as raw:
        # gzip's own header carries a time too: GzipFile's mtime= fixes it.
        import gzip

        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for arc, data in members:
                    info = tarfile.TarInfo(base + "/" + arc)
                    info.size, info.mtime, info.mode = len(data), mtime, 0o644
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    tar.addfile(info, io.BytesIO(data))
    return name


# --- The project, from pyproject.toml ----------------------------------------


class Project:
    def __init__(self, pyproject):
        if "project" not in pyproject:
            raise BackendError("pyproject.toml has no [project] table")
        self.meta = pyproject["project"]
        if self.meta.get("dynamic"):
            raise BackendError("this backend takes no dynamic fields: %s" % self.meta["dynamic"])
        for key in ("name", "version"):
            if not isinstance(self.meta.get(key), str):
                raise BackendError("pyproject.toml's [project] has no %s" % key)
        self.name = self.meta["name"]
        self.version = self.meta["version"]
        if not re.match(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", self.name, re.I):
            raise BackendError("not a valid project name: %r" % self.name)
        if not re.match(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$", self.version):
            raise BackendError("not a normalized version: %r (write it as PEP 440 normalizes it)" % self.version)
        # The wheel's and sdist's file names, and the .dist-info's.
        self.dist_name = re.sub(r"[-_.]+", "_", self.name).lower()
        self.dist_info = "%s-%s.dist-info" % (self.dist_name, self.version)
        tool = pyproject.get("tool", {}).get("sandbox-run-build", {})
        self.packages = tool.get("packages") or [self.dist_name]
        for p in self.packages:
            if not os.path.isfile(os.path.join(ROOT, p, "__init__.py")):
                raise BackendError("package %r: no %s/__init__.py" % (p, p))

    @classmethod
    def load(cls):
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            return cls(load_toml(f.read().decode("utf-8")))

    def package_files(self):
        """The packages' files, as paths relative to the project (with /)."""
        return sorted(_walk(self.packages))

    def readme(self):
        """The long description and its content type, from `readme`."""
        readme = self.meta.get("readme")
        if readme is None:
            return None, None
        if isinstance(readme, str):
            readme = {"file": readme}
        ctype = readme.get("content-type")
        if "file" in readme:
            text = _read(os.path.join(ROOT, readme["file"])).decode("utf-8")
            if ctype is None:
                ext = os.path.splitext(readme["file"])[1].lower()
                ctype = {".md": "text/markdown", ".rst": "text/x-rst"}.get(ext, "text/plain")
        else:
            text = readme.get("text", "")
        return text, ctype

    def metadata(self):
        """The core metadata (METADATA in the wheel, PKG-INFO in the sdist)."""
        m = self.meta
        lines = [("Metadata-Version", "2.1"), ("Name", self.name), ("Version", self.version)]
        if m.get("description"):
            lines.append(("Summary", m["description"]))
        for person in m.get("authors", []):
            if "email" in person:
                value = "%s <%s>" % (person["name"], person["email"]) if "name" in person else person["email"]
                lines.append(("Author-email", value))
            elif "name" in person:
                lines.append(("Author", person["name"]))
        lic = m.get("license")
        if isinstance(lic, dict) and "text" in lic:
            lines.append(("License", lic["text"]))
        elif isinstance(lic, str):
            lines.append(("License", lic))
        if m.get("keywords"):
            lines.append(("Keywords", ",".join(m["keywords"])))
        for c in m.get("classifiers", []):
            lines.append(("Classifier", c))
        for label, url in m.get("urls", {}).items():
            lines.append(("Project-URL", "%s, %s" % (label, url)))
        if m.get("requires-python"):
            lines.append(("Requires-Python", m["requires-python"]))
        for d in m.get("dependencies", []):
            lines.append(("Requires-Dist", d))
        for extra, deps in m.get("optional-dependencies", {}).items():
            lines.append(("Provides-Extra", extra))
            for d in deps:
                req, _, marker = d.partition(";")
                marker = "(%s) and " % marker.strip() if marker.strip() else ""
                lines.append(("Requires-Dist", '%s; %sextra == "%s"' % (req.strip(), marker, extra)))
        text, ctype = self.readme()
        if ctype:
            lines.append(("Description-Content-Type", ctype + "; charset=UTF-8"))
        out = "".join("%s: %s\n" % kv for kv in lines)
        if text is not None:
            out += "\n" + text
        return out.encode("utf-8")

    def dist_info_files(self, kind):
        wheel = "Wheel-Version: 1.0\nGenerator: %s\nRoot-Is-Purelib: true\nTag: py3-none-any\n" % GENERATOR
        files = [("METADATA", self.metadata()), ("WHEEL", wheel.encode("ascii"))]
        if kind == "wheel":
            top = sorted({p.split(".")[0] for p in self.packages})
            files.append(("top_level.txt", "".join(t + "\n" for t in top).encode("ascii")))
        return files


class BackendError(Exception):
    pass


# --- Writing ------------------------------------------------------------------


def _write_wheel(project, wheel_directory, files, kind):
    name = "%s-%s-py3-none-any.whl" % (project.dist_name, project.version)
    dist_info = project.dist_info
    entries = list(files) + [(dist_info + "/" + n, d) for n, d in project.dist_info_files(kind)]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arc, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        writer.writerow([arc, "sha256=" + digest, len(data)])
    writer.writerow([dist_info + "/RECORD", "", ""])
    entries.append((dist_info + "/RECORD", record.getvalue().encode("utf-8")))
    date = _zip_date(_epoch())
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, date_time=date)
            info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return name


def _walk(roots):
    """The regular files under the given paths (files or directories) of the
    project, relative to it with /, leaving out bytecode and hidden files."""
    for top in roots:
        full = os.path.join(ROOT, top)
        if os.path.isfile(full):
            yield top
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for fn in sorted(filenames):
                if fn.startswith(".") or fn.endswith((".pyc", ".pyo")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), ROOT)
                yield rel.replace(os.sep, "/")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _epoch():
    try:
        return max(int(os.environ["SOURCE_DATE_EPOCH"]), EPOCH)
    except (KeyError, ValueError):
        return EPOCH


def _zip_date(t):
    import time

    return time.gmtime(t)[:6]


# --- TOML ---------------------------------------------------------------------


def load_toml(text):
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:
            return TomlReader(text).read()
    return tomllib.loads(text)


class TomlReader:
    """The part of TOML a pyproject.toml uses: [tables] and [dotted.tables],
    bare, quoted and dotted keys, basic and literal strings (one line),
    arrays (over lines, with comments and a trailing comma), inline tables,
    booleans and integers. Anything else is an error, not a guess."""

    _BARE = re.compile(r"[A-Za-z0-9_-]+")
    _INT = re.compile(r"[+-]?\d[\d_]*")
    _ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}

    def __init__(self, text):
        self.s = text.replace("\r\n", "\n")
        self.i = 0

    def error(self, what):
        line = self.s.count("\n", 0, self.i) + 1
        return BackendError("pyproject.toml line %d: %s (Python 3.11+ reads all of TOML)" % (line, what))

    def read(self):
        root = {}
        table = root
        while True:
            self.skip(newlines=True)
            if self.i >= len(self.s):
                return root
            if self.s.startswith("[[", self.i):
                raise self.error("arrays of tables are not supported")
            if self.s[self.i] == "[":
                self.i += 1
                self.skip()
                keys = self.key()
                self.expect("]")
                table = root
                for k in keys:
                    table = table.setdefault(k, {})
                    if not isinstance(table, dict):
                        raise self.error("%s is not a table" % ".".join(keys))
            else:
                self.pair(table)
            self.end_of_line()

    def pair(self, table):
        keys = self.key()
        self.expect("=")
        self.skip()
        value = self.value()
        for k in keys[:-1]:
            table = table.setdefault(k, {})
        if keys[-1] in table:
            raise self.error("%s is defined twice" % ".".join(keys))
        table[keys[-1]] = value

    def key(self):
        keys = []
        while True:
            self.skip()
            c = self.s[self.i : self.i + 1]
            if c == '"':
                keys.append(self.basic_string())
            elif c == "'":
                keys.append(self.literal_string())
            else:
                m = self._BARE.match(self.s, self.i)
                if not m:
                    raise self.error("a key was expected")
                keys.append(m.group())
                self.i = m.end()
            self.skip()
            if self.s[self.i : self.i + 1] != ".":
                return keys
            self.i += 1

    def value(self):
        s, i = self.s, self.i
        if s.startswith(('"""', "'''"), i):
            raise self.error("multi-line strings are not supported")
        c = s[i : i + 1]
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        if c == "[":
            self.i += 1
            items = []
            while True:
                self.skip(newlines=True)
                if s[self.i : self.i + 1] == "]":
                    self.i += 1
                    return items
                items.append(self.value())
                self.skip(newlines=True)
                if s[self.i : self.i + 1] == ",":
                    self.i += 1
                elif s[self.i : self.i + 1] != "]":
                    raise self.error("',' or ']' was expected in an array")
        if c == "{":
            self.i += 1
            table = {}
            self.skip()
            if s[self.i : self.i + 1] == "}":
                self.i += 1
                return table
            while True:
                self.pair(table)
                self.skip()
                if s[self.i : self.i + 1] == "}":
                    self.i += 1
                    return table
                self.expect(",")
        for word, v in (("true", True), ("false", False)):
            if s.startswith(word, i):
                self.i += len(word)
                return v
        m = self._INT.match(s, i)
        if m and not re.match(r"[.eE:T-]", s[m.end() : m.end() + 1]):
            self.i = m.end()
            return int(m.group().replace("_", ""))
        raise self.error("a value of a kind this reader does not take")

    def basic_string(self):
        out = []
        self.i += 1
        while True:
            c = self.s[self.i : self.i + 1]
            if c in ("", "\n"):
                raise self.error("unterminated string")
            self.i += 1
            if c == '"':
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            e = self.s[self.i : self.i + 1]
            self.i += 1
            if e in self._ESCAPES:
                out.append(self._ESCAPES[e])
            elif e in ("u", "U"):
                n = 4 if e == "u" else 8
                digits = self.s[self.i : self.i + n]
                if not re.match(r"^[0-9A-Fa-f]{%d}$" % n, digits):
                    raise self.error("bad \\%s escape" % e)
                out.append(chr(int(digits, 16)))
                self.i += n
            else:
                raise self.error("bad escape \\%s" % e)

    def literal_string(self):
        end = self.s.find("'", self.i + 1)
        if end < 0 or "\n" in self.s[self.i : end]:
            raise self.error("unterminated string")
        value = self.s[self.i + 1 : end]
        self.i = end + 1
        return value

    def skip(self, newlines=False):
        """Past spaces and tabs, and comments and newlines too if asked."""
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#" and newlines:
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            else:
                return

    def expect(self, c):
        self.skip()
        if self.s[self.i : self.i + 1] != c:
            raise self.error("%r was expected" % c)
        self.i += 1

    def end_of_line(self):
        self.skip()
        if self.s[self.i : self.i + 1] == "#":
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end
        if self.i < len(self.s):
            if self.s[self.i] != "\n":
                raise self.error("a new line was expected")
            self.i += 1
