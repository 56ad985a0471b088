"""sandbox-run entry point runner for Python (part of the sandbox's read-only image).

Usage: python3 -B runner.py /work/main.py [args...]

Loads the user's file as a module named after it (never "__main__", so
`if __name__ == "__main__":` blocks do not run), calls the class method or
function named in /work/.sandbox-run-call.json with its params as keyword
arguments, and writes one JSON document to file descriptor 3:
  {"ok": true, "value": <return value>}
  {"ok": false, "error": {"type": ..., "message": ..., "traceback": ...}}
"""
import asyncio
import importlib.util
import inspect
import json
import os
import reprlib
import sys
import traceback

CALL_FILE = "/work/.sandbox-run-call.json"


def main():
    # The result channel: moved off descriptor 3, not inherited by children.
    try:
        out_fd = os.dup(3)
        os.close(3)
    except OSError:
        print("sandbox-run runner: no result channel on descriptor 3", file=sys.stderr)
        return 2
    out = os.fdopen(out_fd, "w", encoding="utf-8")

    def emit(doc):
        out.write(json.dumps(doc))
        out.flush()

    with open(CALL_FILE, encoding="utf-8") as f:
        call = json.load(f)
    try:
        os.remove(CALL_FILE)
    except OSError:
        pass

    source = sys.argv[1]
    sys.argv = [source] + sys.argv[2:]
    sys.path[0] = os.path.dirname(source)
    name = os.path.splitext(os.path.basename(source))[0]
    if not name.isidentifier() or name == "__main__":
        name = "main"
    try:
        spec = importlib.util.spec_from_file_location(name, source)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        if call.get("class_name"):
            cls = getattr(module, call["class_name"], None)
            if cls is None:
                raise AttributeError("module %r has no class %r" % (name, call["class_name"]))
            if not isinstance(cls, type):
                raise TypeError("%r is not a class" % call["class_name"])
            target = getattr(cls(), call["method_name"])
            params = call.get("method_params") or {}
        else:
            target = getattr(module, call["function"], None)
            if target is None:
                raise AttributeError("module %r has no function %r" % (name, call["function"]))
            params = call.get("params") or {}
        if not callable(target):
            raise TypeError("%r is not callable" % (call.get("method_name") or call.get("function")))
        value = target(**params)
        if inspect.isawaitable(value):
            async def wait():
                return await value
            value = asyncio.run(wait())
    except BaseException as e:  # SystemExit and KeyboardInterrupt included
        tb = e.__traceback__
        # Drop the runner's own frames and importlib's above the user's code.
        while tb is not None and tb.tb_next is not None and (
            tb.tb_frame.f_code.co_filename == __file__
            or tb.tb_frame.f_code.co_filename.startswith("<frozen importlib")
        ):
            tb = tb.tb_next
        text = "".join(traceback.format_exception(type(e), e, tb))
        emit({"ok": False, "error": {"type": type(e).__name__, "message": str(e), "traceback": text}})
        return 1
    try:
        data = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        rep = reprlib.Repr()
        rep.maxstring = rep.maxother = 1000
        msg = "the return value is not JSON serializable (%s): %s" % (e, rep.repr(value))
        emit({"ok": False, "error": {"type": type(e).__name__, "message": msg, "traceback": traceback.format_exc()}})
        return 1
    out.write('{"ok": true, "value": ' + data + "}")
    out.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
