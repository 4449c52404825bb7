"""Collects everything a cell prints in the evcxr kernel, including lines that arrive late.

Why it is needed: evcxr_jupyter 0.22 forwards the user code's stdout from a thread of its own.
Before it answers a cell, evcxr waits until that thread has *taken* every line off its channel
(evcxr/src/eval_context.rs: "Block until stdout_sender is empty"), not until the thread has
*sent* them; so on a busy machine a cell's last line can reach Jupyter after the cell's `idle`
status. nbclient stops reading a cell at `idle` and drops messages for an earlier cell, so the
line was lost (a notebook test once missed a cell's only `println!` this way on CI).

What this module guarantees: that thread sends lines in the order the kernel printed them. A
stream message that comes after its cell ended is filed under the cell it belongs to (by its
parent request id), and `settle` prints a marker line in a request of its own and reads until
that marker arrives: every line printed before it has then arrived too. stderr has no such
order (evcxr sends it without a completion mark), so only stdout is guaranteed.

When a cell fails, nbclient's error names the cell's source only: evcxr sends the error itself
as an `error` output of the cell and a reply without it. The runner therefore gives a failed
cell's late lines a short settle and `failed_cell_report` says what the cell showed.

A `?` that returns an error from a cell is not a failed cell to Jupyter: evcxr prints the error
on stderr, answers "ok" and keeps none of the variables the cell bound
(evcxr/src/eval_context.rs, USER_ERROR_OCCURRED), so the notebook failed later, at the first cell
that used one ("cannot find value `result_file`"), with the error itself out of sight. After a
cell that binds variables at its top level the runner asks the kernel for its variables
(`:vars`) and fails that cell when none of them is there (a cell may move a variable it bound,
and evcxr drops a moved variable too, so one missing name proves nothing).
"""
import re
import time
from collections import defaultdict
from queue import Empty

from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionComplete, CellExecutionError
from nbclient.util import ensure_async

# `let NAME`, `let mut NAME` or `let (A, mut B, ..)` at the start of a line: a variable the
# cell binds at its top level (lines inside a function or a block are indented).
TOP_LEVEL_LET = re.compile(r"^let\s+(?:mut\s+)?(\([^)=]*\)|[A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MARKER = "trainbook-notebook-runner: every earlier line has arrived"
MARKER_CELL = f'println!("{MARKER}");'
# How long a failed cell's late lines get to arrive before the failure is reported.
FAILED_CELL_SETTLE = 30
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class LateOutput:
    """Routes stream messages to the cell whose request sent them, whenever they arrive."""

    def __init__(self):
        self.sinks = {}

    def expect(self, msg_id, sink):
        """Stream messages whose parent is `msg_id` go to `sink(msg)` from now on."""
        self.sinks[msg_id] = sink

    def file(self, msg):
        """Hands a stream message of a known request to its sink; True if it did."""
        parent = msg.get("parent_header", {}).get("msg_id")
        if msg.get("msg_type") == "stream" and parent in self.sinks:
            self.sinks[parent](msg)
            return True
        return False


def bound_variables(source):
    """The names a cell's source binds with a `let` at its top level, in order; names starting
    with `_` are left out (evcxr keeps no `_` and the cell does not mean to keep `_name`)."""
    names = []
    for pattern in TOP_LEVEL_LET.findall(source):
        for name in IDENTIFIER.findall(pattern):
            if name != "mut" and not name.startswith("_") and name not in names:
                names.append(name)
    return names


def variable_names(vars_text):
    """The names in evcxr's `:vars` text (one `name: Type` per line)."""
    return {line.split(":", 1)[0].strip() for line in vars_text.splitlines() if ":" in line}


def is_marker(msg, msg_id):
    """Whether `msg` is the marker line printed by the settle request `msg_id`."""
    return (
        msg.get("msg_type") == "stream"
        and msg.get("parent_header", {}).get("msg_id") == msg_id
        and MARKER in msg.get("content", {}).get("text", "")
    )


def cell_report(cell, tail_lines=40):
    """What a code cell showed, as plain text for a failure message: each error output (its name,
    value and traceback, colours removed) and the last `tail_lines` lines of its stdout and
    stderr."""
    errors, streams = [], {"stdout": [], "stderr": []}
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            lines = [f"{out.get('ename', '')}: {out.get('evalue', '')}", *out.get("traceback", [])]
            errors.extend(ANSI_COLOUR.sub("", line) for line in lines)
        elif out.get("output_type") == "stream":
            streams.setdefault(out.get("name", "stdout"), []).extend(out.get("text", "").splitlines())
    parts = ["error output:\n" + "\n".join(errors)] if errors else ["no error output"]
    for name, lines in streams.items():
        if lines:
            parts.append(f"{name}, last {min(len(lines), tail_lines)} of {len(lines)} lines:\n" + "\n".join(lines[-tail_lines:]))
    return "\n".join(parts)


class NotebookRunner(NotebookClient):
    """nbclient's client that keeps late stdout lines with their cells and settles after the
    notebook's last code cell (see the module's header)."""

    def __init__(self, nb, settle_timeout=300, **kwargs):
        super().__init__(nb, **kwargs)
        self.late = LateOutput()
        self.settle_timeout = settle_timeout
        self.failed_index = None
        code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        self.last_code_index = code[-1] if code else None

    async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index):
        def sink(msg):
            self.process_message(msg, cell, cell_index)

        self.late.expect(parent_msg_id, sink)
        while True:
            msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=None))
            if msg["parent_header"].get("msg_id") == parent_msg_id:
                try:
                    self.process_message(msg, cell, cell_index)
                except CellExecutionComplete:
                    return
            else:
                self.late.file(msg)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        self.failed_index = cell_index
        try:
            done = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except CellExecutionError:
            # The reply of a failed cell carries no message (evcxr sends it as an `error` output
            # before the reply): give the cell's late lines a moment to join that output.
            try:
                await self.async_settle(timeout=FAILED_CELL_SETTLE)
            except Exception:  # a dead or stuck kernel: report what arrived
                pass
            raise
        names = bound_variables(cell.source) if cell.cell_type == "code" else []
        if names:
            kept = variable_names(await self.async_kernel_text(":vars"))
            # A cell may move a variable it bound (`with_transform(transform)`), which evcxr
            # then drops too; a `?` error loses every one of them.
            lost = [name for name in names if name not in kept]
            if lost == names:
                try:
                    await self.async_settle(timeout=FAILED_CELL_SETTLE)
                except Exception:
                    pass
                raise CellExecutionError(
                    "", "LostVariables",
                    f"cell {cell_index} answered ok but the kernel kept none of {', '.join(lost)}: a `?` "
                    "in the cell returned an error (evcxr prints it on the cell's stderr and keeps "
                    "none of the variables the cell bound)")
        self.failed_index = None
        if cell_index == self.last_code_index:
            await self.async_settle()
        return done

    async def async_kernel_text(self, code, timeout=60):
        """Runs `code` (a kernel command such as `:vars`) outside the notebook and returns the
        text/plain of its result; other requests' messages are filed as usual."""
        msg_id = await ensure_async(self.kc.execute(code, store_history=False))
        text, deadline = "", time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the kernel did not answer {code!r} within {timeout} s")
            try:
                msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=left))
            except Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                self.late.file(msg)
                continue
            kind, content = msg.get("msg_type"), msg.get("content", {})
            if kind in ("execute_result", "display_data"):
                text += content.get("data", {}).get("text/plain", "")
            elif kind == "stream":
                text += content.get("text", "")
            elif kind == "status" and content.get("execution_state") == "idle":
                return text

    def failed_cell_report(self):
        """What the cell that failed showed (see `cell_report`); "" when none failed."""
        if self.failed_index is None:
            return ""
        return cell_report(self.nb.cells[self.failed_index])

    async def async_settle(self, timeout=None):
        """Runs the marker cell and files every message until its marker arrives (within
        `timeout` seconds, default the runner's `settle_timeout`)."""
        timeout = self.settle_timeout if timeout is None else timeout
        msg_id = await ensure_async(self.kc.execute(MARKER_CELL, store_history=False))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the kernel did not print the runner's marker line within {timeout} s")
            try:
                msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=left))
            except Empty:
                continue
            if is_marker(msg, msg_id):
                return
            self.late.file(msg)


class KernelSession:
    """Runs cells one by one in a started kernel (`jupyter_client`'s blocking client) and keeps
    what each printed, late lines included; used by the runner's kernel checks."""

    def __init__(self, kc):
        self.kc = kc
        self.texts = defaultdict(str)
        self.late = LateOutput()

    def _keep(self, msg):
        self.texts[msg["parent_header"]["msg_id"]] += msg["content"].get("text", "")

    def run(self, code, timeout, on_text=None):
        """Executes `code` until its `idle`; returns (request id, None if the cell succeeded,
        else its error: the cell's error output, or without one what a reply that is not "ok"
        names; evcxr's failed replies name nothing). `on_text` gets the cell's text so far after
        each message of the cell (it may interrupt it)."""
        msg_id = self.kc.execute(code)
        self.late.expect(msg_id, self._keep)
        error, deadline = None, time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=5)
            except Empty:
                continue
            self.late.file(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "error":
                error = f"{content.get('ename')}: {content.get('evalue')}"
                self.texts[msg_id] += f"ERROR {error}\n"
            elif kind == "status" and content["execution_state"] == "idle":
                # The reply is read in any case, so the next cell's reply is the next one read.
                reply_error = self._reply_error(msg_id, deadline)
                return msg_id, error or reply_error
            if on_text:
                on_text(self.texts[msg_id])
        raise TimeoutError(f"no answer within {timeout} s; output so far:\n{self.texts[msg_id]}")

    def _reply_error(self, msg_id, deadline):
        """The error an `execute_reply` that is not "ok" names (evcxr sends it before `idle`)."""
        while time.monotonic() < deadline:
            try:
                reply = self.kc.get_shell_msg(timeout=5)
            except Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                content = reply["content"]
                if content.get("status") == "ok":
                    return None
                return f"{content.get('ename', 'error')}: {content.get('evalue', '')}"
        return "no execute_reply before the deadline"

    def settle(self, timeout=300):
        """Runs the marker cell and reads until its marker arrives (see the module's header)."""
        msg_id = self.kc.execute(MARKER_CELL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=min(5, max(0.1, deadline - time.monotonic())))
            except Empty:
                continue
            if is_marker(msg, msg_id):
                return
            self.late.file(msg)
        raise TimeoutError(f"the kernel did not print the runner's marker line within {timeout} s")
