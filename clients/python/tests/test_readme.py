"""The README's examples, run against a real server (SANDBOX_RUN_URL).

Every ```python block of README.md runs, in order, in one namespace (as a
reader would type them); when a ```text block follows one, it is what the
block must print. The examples' address, http://127.0.0.1:8080, becomes
the server's, and the port of the secrets' stand-in API, 8000, becomes
SANDBOX_RUN_TEST_PORT when it is set (the server must allow
host.sandbox.internal on that port).
"""

import contextlib
import io
import os
import re
import unittest

URL = os.environ.get("SANDBOX_RUN_URL", "")
KEY = os.environ.get("SANDBOX_RUN_API_KEY") or None
PORT = os.environ.get("SANDBOX_RUN_TEST_PORT") or "8000"
README = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "README.md")

_BLOCK = re.compile(r"```python\n(.*?)```[ \t]*\n(?:\s*```text\n(.*?)```)?", re.S)


def examples(text):
    """The README's python blocks and the output each should print (None if not said)."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


class ReadmeTest(unittest.TestCase):
    def test_examples_parse(self):
        with open(README, encoding="utf-8") as f:
            blocks = examples(f.read())
        self.assertGreaterEqual(len(blocks), 8)
        for code, _ in blocks:
            compile(code, "README.md", "exec")

    @unittest.skipUnless(URL, "SANDBOX_RUN_URL is not set: no server to test against")
    def test_examples_run(self):
        with open(README, encoding="utf-8") as f:
            blocks = examples(f.read())
        client = 'Client("http://127.0.0.1:8080")'
        self.assertIn(client, blocks[0][0])
        namespace = {"__name__": "readme"}
        for i, (code, want) in enumerate(blocks):
            code = code.replace(client, "Client(%r, api_key=%r)" % (URL, KEY))
            code = re.sub(r"\b8000\b", PORT, code)
            out = io.StringIO()
            with self.subTest(example=i, code=code):
                with contextlib.redirect_stdout(out):
                    exec(compile(code, "README.md example %d" % i, "exec"), namespace)
                if want is not None:
                    self.assertEqual(out.getvalue(), want)


if __name__ == "__main__":
    unittest.main()
