# sandbox-run's Python kernel: the long-lived interpreter of an interpreter
# session. Standard library only. It reads one command per line (JSON) on
# standard input and answers each cell with one line of JSON on descriptor
# 3, which nothing the cell prints can reach. A cell's own output goes to
# the real stdout and stderr as it is printed, each closed by the marker
# the command carries, so that the host knows where a cell's output ends.
#
#   {"cell": "x + 1", "marker": "...", "stdin": "..."}   run a cell
#   {"interrupt": true}                                  stop the running cell
#
# The answer: {"status": "completed"|"error", "result": {mime: data},
# "display": [{mime: data}, ...], "exception": {"type", "message",
# "traceback"}}. Variables, imports and functions live in one namespace
# from cell to cell; the value of a cell's last expression is its result,
# as a notebook shows it; matplotlib figures left open by a cell are
# displayed as PNG (no plt.show() needed) and closed.
import ast
import base64
import io
import json
import os
import queue
import signal
import sys
import threading
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")

answers = os.fdopen(3, "w", buffering=1, encoding="utf-8")
commands = queue.Queue()
running = threading.Event()
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
displayed = []

# The cell's own streams: what it prints goes out as it comes.
stdout = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
stderr = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")


def reader():
    for line in sys.stdin.buffer:
        try:
            cmd = json.loads(line)
        except ValueError:
            continue
        if cmd.get("interrupt"):
            # A real SIGINT to the main thread, not interrupt_main(): a
            # cell blocked in a system call (time.sleep, a read) must wake.
            if running.is_set():
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            continue
        commands.put(cmd)
    commands.put(None)


def bundle(obj):
    """The forms of obj a notebook shows: text/plain always, richer ones it has."""
    out = {}
    for mime, method in (("text/html", "_repr_html_"), ("image/png", "_repr_png_"),
                         ("image/svg+xml", "_repr_svg_"), ("text/markdown", "_repr_markdown_"),
                         ("text/latex", "_repr_latex_"), ("application/json", "_repr_json_")):
        fn = getattr(obj, method, None)
        if fn is None or isinstance(obj, type):
            continue
        try:
            data = fn()
        except Exception:
            continue
        if data is None:
            continue
        if isinstance(data, tuple):
            data = data[0]
        if mime == "image/png" and isinstance(data, bytes):
            data = base64.b64encode(data).decode("ascii")
        elif mime == "application/json" and not isinstance(data, str):
            try:
                data = json.dumps(data)
            except (TypeError, ValueError):
                continue
        elif not isinstance(data, str):
            continue
        out[mime] = data
    try:
        out["text/plain"] = repr(obj)
    except Exception as e:
        out["text/plain"] = "<unprintable %s: %s>" % (type(obj).__name__, e)
    return out


def display(*objs):
    """Show objects in the cell's display outputs, in order."""
    for obj in objs:
        displayed.append(bundle(obj))


namespace["display"] = display


def figures():
    """Display the matplotlib figures the cell left open, then close them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            displayed.append({"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                              "text/plain": "<Figure %d>" % num})
        plt.close("all")
    except Exception as e:
        displayed.append({"text/plain": "<figure not rendered: %s>" % e})


def run(cell):
    """Runs a cell; returns its last expression's value (or None) and raises what it raises."""
    tree = ast.parse(cell, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        return eval(compile(last, "<cell>", "eval"), namespace)
    return None


def cell_traceback(e):
    """The traceback from the cell's own frames on (the kernel's are not the user's)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    te = traceback.TracebackException(type(e), e, tb)
    # Nor the kernel's own frames below them (on_interrupt's, for one).
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != __file__])
    return "".join(te.format())


def on_interrupt(signum, frame):
    """SIGINT stops a running cell; one that comes late (its cell ended) is dropped."""
    if running.is_set():
        raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGINT, on_interrupt)
    threading.Thread(target=reader, daemon=True).start()
    while True:
        cmd = commands.get()
        if cmd is None:
            return
        del displayed[:]
        answer = {"status": "completed"}
        sys.stdin = io.StringIO(cmd.get("stdin") or "")
        sys.stdout, sys.stderr = stdout, stderr
        try:
            running.set()
            try:
                value = run(cmd.get("cell", ""))
            finally:
                running.clear()
            if value is not None:
                answer["result"] = bundle(value)
                namespace["_"] = value
        except BaseException as e:  # KeyboardInterrupt too: the session goes on
            if isinstance(e, SystemExit):
                answer["exit"] = e.code if isinstance(e.code, int) else 1
            answer["status"] = "error"
            answer["exception"] = {"type": type(e).__name__, "message": str(e), "traceback": cell_traceback(e)}
            try:
                stderr.write(answer["exception"]["traceback"])
            except Exception:
                pass
        figures()
        if displayed:
            answer["display"] = list(displayed)
        marker = cmd.get("marker", "")
        for stream in (stdout, stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os.write(stdout.fileno(), marker.encode())
        os.write(stderr.fileno(), marker.encode())
        answers.write(json.dumps(answer) + "\n")


main()
