"""The in-tree build backend (build_backend/sandbox_run_build.py): the wheel
and sdist it writes, and its TOML reader for Pythons without tomllib."""

import base64
import csv
import email.parser
import hashlib
import importlib.util
import io
import os
import sys
import tarfile
import tempfile
import unittest
import zipfile

import sandbox_run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BACKEND = os.path.join(ROOT, "build_backend", "sandbox_run_build.py")


def load_backend():
    spec = importlib.util.spec_from_file_location("sandbox_run_build_under_test", BACKEND)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@unittest.skipUnless(os.path.exists(BACKEND), "no build_backend/ next to the tests")
class BuildBackendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = load_backend()
        cls.project = cls.backend.Project.load()

    def test_hooks(self):
        b = self.backend
        for hook in (b.get_requires_for_build_wheel, b.get_requires_for_build_sdist, b.get_requires_for_build_editable):
            self.assertEqual(hook(), [])

    def test_version_is_the_package_version(self):
        self.assertEqual(self.project.name, "sandbox-run")
        self.assertEqual(self.project.version, sandbox_run.__version__)

    def test_wheel(self):
        with tempfile.TemporaryDirectory() as d:
            name = self.backend.build_wheel(d)
            self.assertEqual(name, "sandbox_run-%s-py3-none-any.whl" % sandbox_run.__version__)
            with zipfile.ZipFile(os.path.join(d, name)) as zf:
                names = zf.namelist()
                dist_info = "sandbox_run-%s.dist-info/" % sandbox_run.__version__
                for want in ("sandbox_run/__init__.py", "sandbox_run/client.py", "sandbox_run/py.typed",
                             dist_info + "METADATA", dist_info + "WHEEL", dist_info + "RECORD"):
                    self.assertIn(want, names)
                self.assertFalse([n for n in names if n.endswith(".pyc") or "__pycache__" in n], names)
                self.assertTrue(all(n.startswith(("sandbox_run/", dist_info)) for n in names), names)
                rows = list(csv.reader(io.StringIO(zf.read(dist_info + "RECORD").decode("utf-8"))))
                self.assertEqual(sorted(r[0] for r in rows), sorted(names))
                for path, digest, size in rows:
                    if path == dist_info + "RECORD":
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = zf.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual(digest, "sha256=" + want, path)
                    self.assertEqual(int(size), len(data), path)
                meta = email.parser.Parser().parsestr(zf.read(dist_info + "METADATA").decode("utf-8"))
                self.assertEqual(meta["Name"], "sandbox-run")
                self.assertEqual(meta["Version"], sandbox_run.__version__)
                self.assertEqual(meta["Requires-Python"], ">=3.9")
                self.assertIn("# sandbox-run for Python", meta.get_payload())
                wheel = zf.read(dist_info + "WHEEL").decode()
                self.assertIn("Root-Is-Purelib: true", wheel)
                self.assertIn("Tag: py3-none-any", wheel)
            # The same sources build the same wheel.
            with open(os.path.join(d, name), "rb") as f:
                first = f.read()
            os.remove(os.path.join(d, name))
            self.backend.build_wheel(d)
            with open(os.path.join(d, name), "rb") as f:
                self.assertEqual(f.read(), first)

    def test_editable(self):
        with tempfile.TemporaryDirectory() as d:
            name = self.backend.build_editable(d)
            with zipfile.ZipFile(os.path.join(d, name)) as zf:
                pth = [n for n in zf.namelist() if n.endswith(".pth")]
                self.assertEqual(len(pth), 1)
                self.assertEqual(zf.read(pth[0]).decode().strip(), self.backend.ROOT)

    def test_sdist(self):
        with tempfile.TemporaryDirectory() as d:
            name = self.backend.build_sdist(d)
            base = "sandbox_run-%s" % sandbox_run.__version__
            self.assertEqual(name, base + ".tar.gz")
            with tarfile.open(os.path.join(d, name)) as tar:
                names = tar.getnames()
            for want in ("PKG-INFO", "pyproject.toml", "README.md", "build_backend/sandbox_run_build.py",
                         "sandbox_run/py.typed", "tests/test_build_backend.py"):
                self.assertIn(base + "/" + want, names)

    def test_metadata_directory(self):
        with tempfile.TemporaryDirectory() as d:
            name = self.backend.prepare_metadata_for_build_wheel(d)
            self.assertEqual(name, "sandbox_run-%s.dist-info" % sandbox_run.__version__)
            self.assertTrue(os.path.isfile(os.path.join(d, name, "METADATA")))

    @unittest.skipIf(sys.version_info < (3, 11), "no tomllib to compare with")
    def test_toml_reader(self):
        import tomllib

        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        sample = text + (
            '\n[tool.x]\n"quoted key" = "tab\\there \\u00e9"  # comment\n'
            "lit = 'C:\\path'\nn = 1_000\nyes = true\n"
            "inline = { file = \"README.md\", content-type = 'text/markdown' }\n"
            'a.b.c = [\n  1, # one\n  2,\n]\nempty = []\n'
        )
        for t in (text, sample):
            self.assertEqual(self.backend.TomlReader(t).read(), tomllib.loads(t))
        for bad in ('x = """multi"""\n', "[[t]]\n", "x = 1.5\n", "x = 1\nx = 2\n", 'x = "open\n'):
            with self.assertRaises(self.backend.BackendError, msg=bad):
                self.backend.TomlReader(bad).read()


if __name__ == "__main__":
    unittest.main()
