"""Batched `retrieve` never hangs (issue 32): every LLM-free method on a freshly opened
index (cold caches) with all musique-train questions at once, on 3 rayon threads. Each run is a child process under a watchdog, so that a deadlock fails the test
with every thread's stack instead of hanging the suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

METHODS = ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph", "regime_router", "naive_ge"]
STALLED = 30.0  # seconds without CPU while running: deadlocked
LIMIT = 900.0

CHILD = """
import json, sys, hoprag
index = hoprag.Index.open(sys.argv[1])
questions = [q["question"] for q in json.load(open(sys.argv[2]))]
results = index.retrieve(questions, method=sys.argv[3], k=5)
assert len(results) == len(questions), len(results)
print(json.dumps([len(r) for r in results]))
"""


def cpu_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_dump(pid: int) -> str:
    if shutil.which("gdb"):
        out = subprocess.run(
            ["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 40"],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
        )
        return out.stdout
    lines = ["(gdb not installed: each thread's name and kernel wait channel)"]
    for task in Path(f"/proc/{pid}/task").iterdir():
        read = lambda f: (task / f).read_text(errors="replace").strip() if (task / f).exists() else ""
        lines.append(f"{read('comm')} {read('wchan')}")
    return "\n".join(lines)


def run_watched(args: list[str], what: str) -> str:
    env = dict(os.environ, RAYON_NUM_THREADS="3")
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    start = last_change = time.monotonic()
    last = cpu_ticks(child.pid)
    while child.poll() is None:
        time.sleep(0.5)
        now = cpu_ticks(child.pid)
        if now != last:
            last, last_change = now, time.monotonic()
        stalled = time.monotonic() - last_change
        if stalled >= STALLED or time.monotonic() - start >= LIMIT:
            dump = thread_dump(child.pid)
            child.kill()
            _, err = child.communicate()
            raise AssertionError(f"{what}: hung (no CPU for {stalled:.0f} s)\nstderr:\n{err[-3000:]}\nthreads:\n{dump}")
    out, err = child.communicate()
    assert child.returncode == 0, f"{what}: exit {child.returncode}\n{err[-3000:]}"
    return out


def test_batched_retrieve_of_every_llm_free_method_on_a_cold_index_never_hangs(musique_index, musique, tmp_path):
    questions = musique / "questions.json"
    n = len(json.loads(questions.read_text()))
    for method in METHODS:
        # A fresh copy per method: a new process over it has every cache cold.
        copy = tmp_path / method
        shutil.copytree(musique_index.path, copy)
        out = run_watched([sys.executable, "-c", CHILD, str(copy), str(questions), method], f"retrieve, {method}")
        assert json.loads(out) == [5] * n, method
