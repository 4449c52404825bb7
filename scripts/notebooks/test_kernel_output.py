"""Tests of kernel_output.py against scripted kernel messages in the order evcxr can send them
(a cell's last stdout line after its `idle`). Run by tests/tooling/notebooks.rs:
    .venv/bin/python -m unittest discover -s scripts/notebooks -p 'test_kernel_output.py'
"""
import asyncio
import unittest
from queue import Empty

import nbformat

from nbclient.exceptions import CellExecutionError

from kernel_output import MARKER, MARKER_CELL, KernelSession, NotebookRunner, bound_variables


def stream(parent, text, name="stdout"):
    return {"msg_type": "stream", "header": {"msg_type": "stream"}, "parent_header": {"msg_id": parent}, "content": {"name": name, "text": text}}


def error(parent, evalue, traceback):
    """An `error` output as evcxr sends it for a cell whose evaluation failed."""
    content = {"ename": "Error", "evalue": evalue, "traceback": traceback}
    return {"msg_type": "error", "header": {"msg_type": "error"}, "parent_header": {"msg_id": parent}, "content": content}


def result(parent, text):
    """An `execute_result` with plain text, as evcxr answers `:vars`."""
    content = {"data": {"text/plain": text}, "metadata": {}}
    return {"msg_type": "execute_result", "header": {"msg_type": "execute_result"}, "parent_header": {"msg_id": parent}, "content": content}


def idle(parent):
    return {"msg_type": "status", "header": {"msg_type": "status"}, "parent_header": {"msg_id": parent}, "content": {"execution_state": "idle"}}


def reply(parent, status="ok"):
    return {"msg_type": "execute_reply", "parent_header": {"msg_id": parent}, "content": {"status": status}}


class ScriptedKernel:
    """A kernel client whose requests get ids cell-0, cell-1, ...; `script[i]` are the iopub
    messages that follow request i (sent when it is made); every reply has `status` (or, given
    a list, reply i has `status[i]`)."""

    def __init__(self, script, status="ok"):
        self.script, self.status, self.requests, self.iopub, self.shell = script, status, [], [], []

    def execute(self, code, **_):
        msg_id = f"cell-{len(self.requests)}"
        self.requests.append(code)
        self.iopub.extend(self.script[len(self.requests) - 1](msg_id))
        status = self.status if isinstance(self.status, str) else self.status[len(self.requests) - 1]
        self.shell.append(reply(msg_id, status))
        return msg_id

    async def is_alive(self):
        return True

    def get_iopub_msg(self, timeout=None):
        if not self.iopub:
            raise Empty
        return self.iopub.pop(0)

    def get_shell_msg(self, timeout=None):
        if not self.shell:
            raise Empty
        return self.shell.pop(0)


class AsyncChannel:
    def __init__(self, kernel, shell=False):
        self.kernel, self.shell = kernel, shell

    async def get_msg(self, timeout=None):
        return self.kernel.get_shell_msg(timeout) if self.shell else self.kernel.get_iopub_msg(timeout)


def runner_for(nb, kernel):
    """A NotebookRunner talking to the scripted `kernel`."""
    kernel.iopub_channel = AsyncChannel(kernel)
    kernel.shell_channel = AsyncChannel(kernel, shell=True)
    runner = NotebookRunner(nb, kernel_name="trainbook", settle_timeout=5, record_timing=False)
    runner.kc = kernel
    runner.reset_execution_trackers()
    return runner


class LateLines(unittest.TestCase):
    # Cell 0's last line comes after its idle, in the middle of cell 1; cell 1's last line comes
    # after its idle too and only shows up before the settle request's marker.
    SCRIPT = [
        lambda me: [stream(me, "epoch 1\n"), idle(me)],
        lambda me: [stream("cell-0", "world size 2\n"), stream(me, "second\n"), idle(me)],
        lambda me: [idle(me), stream("cell-1", "last of cell 1\n"), stream(me, MARKER + "\n"), idle(me)],
    ]

    def test_the_session_keeps_late_lines_with_their_cells(self):
        kernel = ScriptedKernel(self.SCRIPT)
        session = KernelSession(kernel)
        first, error = session.run("cell 0", timeout=5)
        self.assertIsNone(error)
        second, _ = session.run("cell 1", timeout=5)
        self.assertEqual(session.texts[first], "epoch 1\nworld size 2\n")
        self.assertEqual(session.texts[second], "second\n")
        session.settle(timeout=5)
        self.assertEqual(kernel.requests[-1], MARKER_CELL)
        self.assertEqual(session.texts[first], "epoch 1\nworld size 2\n")
        self.assertEqual(session.texts[second], "second\nlast of cell 1\n")

    def test_a_settle_without_its_marker_times_out_naming_it(self):
        kernel = ScriptedKernel([lambda me: [idle(me)]])
        with self.assertRaisesRegex(TimeoutError, "marker line"):
            KernelSession(kernel).settle(timeout=0.3)

    def test_a_failed_reply_is_the_cells_error(self):
        kernel = ScriptedKernel([lambda me: [idle(me)]], status="error")
        self.assertEqual(KernelSession(kernel).run("x", timeout=5)[1], "error: ")

    def test_a_failed_cells_error_output_wins_over_its_empty_reply(self):
        kernel = ScriptedKernel([lambda me: [error(me, "mismatched types", []), idle(me)]], status="error")
        self.assertEqual(KernelSession(kernel).run("x", timeout=5)[1], "Error: mismatched types")

    def test_the_notebook_runner_files_late_lines_and_settles_after_the_last_cell(self):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("cell 0"), nbformat.v4.new_markdown_cell("text"),
                    nbformat.v4.new_code_cell("cell 1")]
        kernel = ScriptedKernel(self.SCRIPT)
        runner = runner_for(nb, kernel)

        async def run_cells():
            # What nbclient's async_execute_cell does for each code cell, then the runner's own
            # step after the notebook's last code cell.
            for index in (0, 2):
                runner.clear_before_next_output = False
                msg_id = kernel.execute(nb.cells[index].source)
                await runner._async_poll_output_msg(msg_id, nb.cells[index], index)
            await runner.async_settle()

        asyncio.run(run_cells())
        self.assertEqual(runner.last_code_index, 2)
        text = ["".join(out["text"] for out in nb.cells[i].outputs) for i in (0, 2)]
        self.assertEqual(text, ["epoch 1\nworld size 2\n", "second\nlast of cell 1\n"])


class FailedCell(unittest.TestCase):
    # Cell 1 fails: evcxr sends the error as an output, a reply without it, and a stderr line
    # of the cell after its idle (it only arrives before the settle's marker).
    SCRIPT = [
        lambda me: [stream(me, "loaded\n"), idle(me)],
        lambda me: [stream(me, "reading the result\n"), error(me, "Subprocess terminated with status: signal: 9 (SIGKILL)",
                    ["\x1b[31mSubprocess terminated with status: signal: 9 (SIGKILL)\x1b[0m"]), idle(me)],
        lambda me: [stream("cell-1", "a late stderr line\n", name="stderr"), stream(me, MARKER + "\n"), idle(me)],
    ]

    def test_a_failed_cell_reports_its_error_output_and_late_lines(self):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("cell 0"), nbformat.v4.new_code_cell("cell 1"), nbformat.v4.new_code_cell("cell 2")]
        kernel = ScriptedKernel(self.SCRIPT, status=["ok", "error", "ok"])
        runner = runner_for(nb, kernel)
        self.assertEqual(runner.failed_cell_report(), "")

        async def run_cells():
            for index, cell in enumerate(nb.cells):
                await runner.async_execute_cell(cell, index)

        with self.assertRaises(CellExecutionError) as failed:
            asyncio.run(run_cells())
        self.assertNotIn("SIGKILL", str(failed.exception))  # why the runner adds its report
        self.assertEqual(kernel.requests, ["cell 0", "cell 1", MARKER_CELL])
        self.assertEqual(runner.failed_cell_report(), "\n".join([
            "error output:",
            "Error: Subprocess terminated with status: signal: 9 (SIGKILL)",
            "Subprocess terminated with status: signal: 9 (SIGKILL)",
            "stdout, last 1 of 1 lines:",
            "reading the result",
            "stderr, last 1 of 1 lines:",
            "a late stderr line",
        ]))


class LostVariables(unittest.TestCase):
    # Cell 1's `?` returned an error: evcxr printed it on stderr, answered ok and kept none of
    # the cell's variables; the `:vars` after it lists cell 0's only.
    SCRIPT = [
        lambda me: [idle(me)],
        lambda me: [result(me, "data: PathBuf\n"), idle(me)],
        lambda me: [stream(me, "launching\n"), stream(me, "ray_launch: could not reserve 2 x CPU\n", name="stderr"), idle(me)],
        lambda me: [result(me, "data: PathBuf\n"), idle(me)],
        lambda me: [stream(me, MARKER + "\n"), idle(me)],
    ]
    CELLS = ["let data = PathBuf::from(\"x\");", "let out = data.join(\"run\");\nlet (a, mut b) = (1, 2);\nrun(&out)?;"]

    def test_a_cell_that_lost_its_variables_fails_with_its_stderr(self):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in self.CELLS]
        kernel = ScriptedKernel(self.SCRIPT)
        runner = runner_for(nb, kernel)

        async def run_cells():
            for index, cell in enumerate(nb.cells):
                await runner.async_execute_cell(cell, index)

        with self.assertRaises(CellExecutionError) as failed:
            asyncio.run(run_cells())
        self.assertIn("cell 1 answered ok but the kernel kept none of out, a, b", str(failed.exception))
        self.assertEqual(kernel.requests, [self.CELLS[0], ":vars", self.CELLS[1], ":vars", MARKER_CELL])
        self.assertIn("ray_launch: could not reserve 2 x CPU", runner.failed_cell_report())

    def test_a_cell_that_moved_one_of_its_variables_passes(self):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("let t = compose![ToTensor];\nlet set = Mnist::new(root)?.with_transform(t);")]
        kernel = ScriptedKernel([lambda me: [idle(me)], lambda me: [result(me, "set: Mnist\n"), idle(me)],
                                 lambda me: [stream(me, MARKER + "\n"), idle(me)]])
        runner = runner_for(nb, kernel)
        asyncio.run(runner.async_execute_cell(nb.cells[0], 0))
        self.assertEqual(kernel.requests[1:], [":vars", MARKER_CELL])

    def test_only_top_level_lets_count(self):
        source = "let data = 1;\nlet mut views = vec![];\nlet (c, _r, mut e): (u32, u32, u64) = (1, 2, 3);\n" \
                 "let _ = f();\nfn g() {\n    let inner = 1;\n}\n{\n    let args = 2;\n}\nlet data = 2;"
        self.assertEqual(bound_variables(source), ["data", "views", "c", "e"])


if __name__ == "__main__":
    unittest.main()
