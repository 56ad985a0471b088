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


CHART = "application/vnd.sandbox-run.chart+json"


def figures():
    """Display the matplotlib figures the cell left open, then close them:
    each as PNG, and its data (CHART) when it is one line, scatter, bar or
    pie chart or box plot."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            shown = {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                     "text/plain": "<Figure %d>" % num}
            try:
                chart = chart_of(fig)
                if chart is not None:
                    shown[CHART] = json.dumps(chart)
            except Exception:
                pass  # a figure whose data is not numbers: its picture only
            displayed.append(shown)
        plt.close("all")
    except Exception as e:
        displayed.append({"text/plain": "<figure not rendered: %s>" % e})


def chart_of(fig):
    """The data of a figure of one plot, in the shape of E2B's code
    interpreter's charts (line, scatter, bar, pie, box_and_whisker); None
    for other figures."""
    axes = [ax for ax in fig.get_axes() if ax.has_data()]
    if len(axes) != 1:
        return None
    ax = axes[0]
    label = lambda artist, i: artist.get_label() if not artist.get_label().startswith("_") else str(i)
    chart = {"title": ax.get_title() or None, "x_label": ax.get_xlabel() or None, "y_label": ax.get_ylabel() or None,
             "x_unit": None, "y_unit": None}
    bars = [c for c in ax.containers if type(c).__name__ == "BarContainer"]
    if bars:
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        elements = []
        for i, c in enumerate(bars):
            for j, rect in enumerate(c.patches):
                elements.append({"label": ticks[j] if j < len(ticks) else str(j), "value": float(rect.get_height()),
                                 "group": label(c, i)})
        chart.update(type="bar", elements=elements)
        return chart
    wedges = [p for p in ax.patches if type(p).__name__ != "Shadow"]
    if wedges and all(type(p).__name__ == "Wedge" for p in wedges) and not ax.lines and not ax.collections:
        # E2B's pie: the title and each wedge's label, angle (degrees, rounded as E2B rounds it:
        # matplotlib's pie works in float32, 90% of a circle is 323.99999 before) and radius.
        return {"type": "pie", "title": chart["title"],
                "elements": [{"label": label(w, i), "angle": e2b_round(abs(float(w.theta2) - float(w.theta1))),
                              "radius": float(w.r)} for i, w in enumerate(wedges)]}
    boxes = boxes_of(ax)
    if boxes is not None:
        elements, vertical = boxes
        if not vertical:  # E2B's x is the axis of the boxes' labels
            chart["x_label"], chart["y_label"] = chart["y_label"], chart["x_label"]
        chart.update(type="box_and_whisker", elements=elements)
        return chart
    lines = [l for l in ax.get_lines() if len(l.get_xydata())]
    scatters = [c for c in ax.collections if type(c).__name__ == "PathCollection" and len(c.get_offsets())]
    if lines and not scatters:
        chart.update(type="line", elements=[{"label": label(l, i), "points": [[float(x), float(y)] for x, y in l.get_xydata()]}
                                           for i, l in enumerate(lines)])
    elif scatters and not lines:
        chart.update(type="scatter", elements=[{"label": label(c, i), "points": [[float(x), float(y)] for x, y in c.get_offsets()]}
                                              for i, c in enumerate(scatters)])
    else:
        return None
    for a in ("x", "y"):
        chart[a + "_ticks"] = [float(t) for t in getattr(ax, "get_%sticks" % a)()]
        chart[a + "_tick_labels"] = [t.get_text() for t in getattr(ax, "get_%sticklabels" % a)()]
        chart[a + "_scale"] = getattr(ax, "get_%sscale" % a)()
    return chart


def e2b_round(number):
    """A number rounded as E2B's charts round it (e2b_charts' dynamic_round): to 8 - e
    significant digits, e its exponent of ten."""
    import decimal
    d = decimal.Decimal(str(number))
    with decimal.localcontext() as ctx:
        ctx.prec = max(1, 8 - d.adjusted())
        return float(+d)


def boxes_of(ax):
    """The boxes of axes drawn only by matplotlib's boxplot (or bxp), as
    E2B's box_and_whisker elements, and whether they stand upright; None
    for other axes. It reads the artists in the order bxp makes them for
    each box: the box (a closed line, or a PathPatch with patch_artist),
    the whiskers from the first and third quartiles to the lowest and
    highest data within reach, the two caps, the median, then the mean and
    the outliers (fliers) where shown."""
    if ax.collections or ax.containers or any(type(p).__name__ != "PathPatch" for p in ax.patches):
        return None
    for vertical in (True, False):
        # Each point as (c, v): its place along the axis of the boxes and its value.
        turn = (lambda x, y: (float(x), float(y))) if vertical else (lambda x, y: (float(y), float(x)))
        lines = [[turn(x, y) for x, y in l.get_xydata()] for l in ax.lines]
        patches = [[turn(x, y) for x, y in p.get_path().vertices] for p in ax.patches]
        boxes = parse_boxes(lines, patches)
        if boxes:
            break
    else:
        return None
    axis = ax.xaxis if vertical else ax.yaxis
    ticks = list(zip(axis.get_majorticklocs(), [t.get_text() for t in axis.get_ticklabels()]))
    elements = []
    for pos, stats in boxes:
        names = [text for loc, text in ticks if abs(float(loc) - pos) <= 1e-9 * max(1.0, abs(pos)) and text]
        elements.append(dict(label=names[0] if names else "%g" % pos, **stats))
    return elements, vertical


def parse_boxes(lines, patches):
    """The boxes of boxes_of's lines and patches (points as (c, v)), each as (position, stats); None
    if they are not only boxes."""
    flat = lambda pts, k: all(p[k] == pts[0][k] for p in pts)  # k 0: across the boxes, 1: along the values
    across = lambda pts, pos: len(pts) == 2 and flat(pts, 1) and min(pts[0][0], pts[1][0]) <= pos <= max(pts[0][0], pts[1][0]) \
        and pts[0][0] != pts[1][0]
    boxes, i, used = [], 0, 0
    while i < len(lines):
        box = None
        if len(lines[i]) >= 5 and lines[i][0] == lines[i][-1]:
            box, i = lines[i], i + 1
        elif used < len(patches):
            box, used = patches[used], used + 1
        if i + 3 > len(lines):
            return None
        lo, hi = lines[i], lines[i + 1]
        i += 2
        if not (len(lo) == len(hi) == 2 and flat(lo, 0) and flat(hi, 0) and lo[0][0] == hi[0][0]
                and lo[1][1] <= lo[0][1] <= hi[0][1] <= hi[1][1]):
            return None
        pos = lo[0][0]
        stats = {"min": lo[1][1], "first_quartile": lo[0][1], "median": None, "third_quartile": hi[0][1],
                 "max": hi[1][1], "outliers": []}
        if box is not None and (stats["first_quartile"] not in [p[1] for p in box] or stats["third_quartile"] not in [p[1] for p in box]
                                or not min(p[0] for p in box) <= pos <= max(p[0] for p in box)):
            return None
        if i + 2 < len(lines) and across(lines[i], pos) and across(lines[i + 1], pos) \
                and lines[i][0][1] == stats["min"] and lines[i + 1][0][1] == stats["max"]:
            i += 2  # the caps
        median = lines[i]
        i += 1
        if not (across(median, pos) and stats["first_quartile"] <= median[0][1] <= stats["third_quartile"]):
            return None
        stats["median"] = median[0][1]
        # The mean and the outliers: lines within the box's width, of points at its position or across it.
        span = box or median
        left, right = min(p[0] for p in span), max(p[0] for p in span)
        extra = []
        while i < len(lines) and len(extra) < 2 and all(left <= p[0] <= right for p in lines[i]) \
                and (flat(lines[i], 0) or across(lines[i], pos)):
            extra.append(lines[i])
            i += 1
        if len(extra) == 1 and (across(extra[0], pos) or (len(extra[0]) == 1 and stats["min"] <= extra[0][0][1] <= stats["max"])):
            extra = []  # the mean alone
        if extra:
            stats["outliers"] = [p[1] for p in extra[-1]]
        boxes.append((pos, stats))
    return boxes if boxes and used == len(patches) else None


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
