"""How far each constrained decision of a README demo query is from flipping (issue 10).

The embedded 135M model decodes greedily under a GBNF grammar, so an answer
flips as soon as, at some decoding step, a token leading to another answer
gets a larger logit than every token leading to the chosen one. This script
runs a query on the real engine with the real model and, for every model
request, measures exactly that:

    margin = min over decoding steps of
             (best logit among allowed tokens that continue the chosen answer)
           - (best logit among allowed tokens that lead anywhere else)

"Allowed" is what the request's grammar permits: for a ``Choice`` (and a
``Bool``, i.e. ``true | false``) a token is allowed when the text so far plus
the token is a prefix of some option, and end-of-generation is allowed once an
option is complete; for free ``Text`` every token is allowed. Steps where no
token leads elsewhere (e.g. after ``pitch`` when only ``pitcher`` remains) are
not decisions. For single-token options this is the difference of the
options' first-token logits; for options sharing a first token it compares
them where they part, along the greedy path (what greedy decoding actually
does; a sequence log-probability would measure a different decoder). A margin
near 0 can flip with CPU kernels that round differently (issue 10: an Intel
AMX machine returned 0 rows where this one returned 10).

The prompts are the engine's real prompts: the query runs through
``BlendSQL`` with a ``LlamaCpp`` whose ``generate`` also re-evaluates each
request's exact prompt tokens (those llama.cpp just used) step by step. Each
measured greedy path is checked against the answer llama.cpp produced. Both
loading paths (extra buffer types on / off, i.e. different CPU kernels) are
measured.

    python benchmarks/demo_margins.py                 # the README's main query
    python benchmarks/demo_margins.py --sweep         # + its question on all 18 teams
    python benchmarks/demo_margins.py --candidates    # + the other queries considered
    python benchmarks/demo_margins.py --query "SELECT ..." --out other.json

Writes benchmarks/results/demo_margins.json (by default).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from blendsql import BlendSQL  # noqa: E402
from blendsql.db.loaders import example_db_path  # noqa: E402
from blendsql.models import LlamaCpp, Request, Response  # noqa: E402
from blendsql.models.constraints import Bool, Choice, Text  # noqa: E402
from blendsql.models.gguf import (  # noqa: E402
    cpu_flags,
    extra_bufts_decision,
    has_amx,
    run_isolated,
    system_info,
)

README_QUERY = (
    "SELECT name, position, school FROM w WHERE school = "
    "{{LLMQA('Which school does this baseball team represent?', "
    "(SELECT title, content FROM documents WHERE documents MATCH 'Dirtbags'), "
    "options='w::school')}}"
)
# --sweep: the README's question over each school's own team passage (title -> school),
# to state how far the README's one answer generalises with this model
TEAM_PASSAGES = {
    "Fresno State": "Fresno State Bulldogs baseball",
    "Wichita State": "Wichita State Shockers baseball",
    "Delaware": "Delaware Fightin' Blue Hens baseball",
    "Pepperdine": "Pepperdine Waves baseball",
    "Cal State": "Cal State Northridge Matadors",
    "Long Beach State": "Long Beach State 49ers baseball",
    "Florida": "Florida Gators baseball",
    "Hawaii": "Hawaii Rainbow Warriors",
    "Southern Miss": "Southern Miss Golden Eagles baseball",
    "Arkansas": "Arkansas Razorbacks baseball",
    "Florida State": "Florida State Seminoles baseball",
    "Oklahoma State": "Oklahoma State Cowboys baseball",
    "Stanford": "Stanford Cardinal baseball",
    "Clemson": "Clemson Tigers baseball",
    "Creighton": "Creighton Bluejays",
    "Georgia Tech": "Georgia Tech Yellow Jackets baseball",
    "Minnesota": "Minnesota Golden Gophers baseball",
    "Arizona State": "Arizona State Sun Devils baseball",
}
SWEEP_QUESTION = "Which school does this baseball team represent?"


# --candidates: queries measured when choosing the README's (query, SQL giving the right rows)
_PITCHERS = "SELECT name, position, school FROM w WHERE position = 'Pitcher'"
_SEL = "SELECT name, position, school FROM w WHERE "


def _school_rows(school: str) -> str:
    return f"SELECT name, position, school FROM w WHERE school = '{school}'"


def _qa(question: str, match: str, limit: str = "") -> str:
    return (_SEL + "school = {{LLMQA('" + question + "', (SELECT title, content FROM documents "
            f"WHERE documents MATCH '{match}'{limit}), options='w::school')" + "}}")


CANDIDATES: list[tuple[str, str]] = [
    (_SEL + "{{LLMMap('Is this position a pitcher?', 'w::position')}} = TRUE", _PITCHERS),
    (_SEL + "{{LLMMap('Is this position a pitcher?', 'w::position', options=('yes','no'))}}"
     " = 'yes'", _PITCHERS),
    (_SEL + "{{LLMMap('Which kind of player is this?', 'w::position', "
     "options=('pitcher','fielder'))}} = 'pitcher'", _PITCHERS),
    (_SEL + "{{LLMMap('Does this player pitch or field?', 'w::position', "
     "options=('pitch','field'))}} = 'pitch'", _PITCHERS),
    (_SEL + "{{LLMMap('Which kind of position is this?', 'w::position', "
     "options=('pitcher','catcher','infielder','outfielder'))}} = 'pitcher'", _PITCHERS),
    (_qa("Which school is in Fresno?", "fresno", " ORDER BY rank LIMIT 3"),
     _school_rows("Fresno State")),
    (_qa("Which school is in Minneapolis?", "Minneapolis", " ORDER BY rank LIMIT 3"),
     _school_rows("Minnesota")),
    (_qa("Which school did Pedro Grifol attend?", "Grifol"), _school_rows("Florida State")),
    (_qa("Which school won the national championship in 1989?", "championship 1989",
         " ORDER BY rank LIMIT 3"), _school_rows("Wichita State")),
    (_qa("Which school plays its home games at Blair Field?", "Blair Field"),
     _school_rows("Long Beach State")),
    (_qa("Which school has the baseball team called the Diamond Hogs?", "Diamond Hogs"),
     _school_rows("Arkansas")),
    (_qa("Which school is known as the Dirtbags?", "Dirtbags"), _school_rows("Long Beach State")),
    (README_QUERY, _school_rows("Long Beach State")),
]


def candidates(extra_bufts: bool) -> list[dict[str, Any]]:
    """Each candidate query: right or not (vs its SQL), and its closest decision."""
    import sqlite3

    model = MeasuredLlamaCpp(extra_bufts=extra_bufts, n_threads=1)
    conn = sqlite3.connect(example_db_path())
    out = []
    try:
        for query, truth in CANDIDATES:
            r = measure(query, extra_bufts, model=model)
            expected = sorted(list(row) for row in conn.execute(truth))
            close = min(r["decisions"], key=lambda d: d["margin"] if d["margin"] is not None
                        else float("inf"), default=None)
            out.append({"query": query, "right": sorted(r["rows"]) == expected,
                        "rows": len(r["rows"]), "expected_rows": len(expected),
                        "decisions": len(r["decisions"]), "min_margin": r["min_margin"],
                        "closest": close})
    finally:
        conn.close()
    return out


def sweep_query(title: str) -> str:
    """The README's LLMQA over one team passage, selected by its exact title."""
    quoted = title.replace("'", "''")
    return ("SELECT {{LLMQA('" + SWEEP_QUESTION + "', (SELECT title, content FROM documents "
            f"WHERE title = '{quoted}'), options='w::school')" + "}} AS school")
END = "<end>"  # marks the end-of-generation token in reports


@dataclass
class Step:
    """One decoding step where the answer could have gone elsewhere."""

    prefix: str  # answer text generated before this step
    margin: float  # best continuing logit - best diverging logit
    chosen_token: str
    rival_token: str
    rival_answers: list[str]  # options the rival token leads to ([] for free text)


@dataclass
class Decision:
    """The margin analysis of one model request."""

    label: str  # what the request was about (the map value, or the question)
    kind: str  # choice / bool / text
    answer: str  # llama.cpp's text
    steps: list[Step] = field(default_factory=list)
    consistent: bool = True  # the measured greedy path reproduces llama.cpp's answer

    @property
    def margin(self) -> float | None:
        """The decision's margin: its closest step (None when nothing was decided)."""
        return min((s.margin for s in self.steps), default=None)

    def as_json(self) -> dict[str, Any]:
        m = self.margin
        close = min(self.steps, key=lambda s: s.margin) if self.steps else None
        return {
            "label": self.label, "kind": self.kind, "answer": self.answer,
            "margin": None if m is None else round(m, 4),
            "runner_up": None if close is None else (close.rival_answers or [close.rival_token]),
            "steps": len(self.steps), "consistent": self.consistent,
        }


class Vocab:
    """Token texts of a llama.cpp model, indexed by text for prefix look-ups."""

    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self.n = llm.n_vocab()
        self.text = [llm.detokenize([i]).decode("utf-8", "replace") for i in range(self.n)]
        vocab = llm._model.vocab
        self.eog = [i for i in range(self.n) if llama_cpp.llama_vocab_is_eog(vocab, i)]
        self.by_text: dict[str, list[int]] = {}
        for i, t in enumerate(self.text):
            if t and i not in self.eog:  # llama.cpp's grammar rejects empty pieces
                self.by_text.setdefault(t, []).append(i)

    def prefixes_of(self, rest: str) -> dict[int, str]:
        """Tokens whose text is a non-empty prefix of ``rest`` -> that text."""
        out: dict[int, str] = {}
        for k in range(1, len(rest) + 1):
            for i in self.by_text.get(rest[:k], ()):
                out[i] = rest[:k]
        return out


def options_of(constraint: Any) -> tuple[str, ...] | None:
    """The finite answer set a grammar allows (None for free text)."""
    if isinstance(constraint, Choice):
        return tuple(constraint.options)
    if isinstance(constraint, Bool):
        return ("true", "false")
    return None


def step_choice(vocab: Vocab, logits: np.ndarray, options: Sequence[str], s: str,
                answer: str) -> tuple[Step | None, int]:
    """One step under a Choice grammar: (the decision there, or None; the greedy token)."""
    allowed: dict[int, list[str]] = {}  # token -> options it keeps alive
    for o in options:
        if o.startswith(s):
            for tok in vocab.prefixes_of(o[len(s):]):
                allowed.setdefault(tok, []).append(o)
    if s in options:
        for tok in vocab.eog:
            allowed.setdefault(tok, []).append(s)
    best = max(allowed, key=lambda t: logits[t])
    for_ = [t for t, os_ in allowed.items() if _continues(t, os_, s, answer, vocab)]
    against = [t for t in allowed if t not in set(for_)]
    if not for_ or not against:
        return None, best
    f = max(for_, key=lambda t: logits[t])
    a = max(against, key=lambda t: logits[t])
    return Step(s, float(logits[f] - logits[a]), _show(vocab, f), _show(vocab, a),
                sorted(set(allowed[a]))), best


def _continues(tok: int, opts: list[str], s: str, answer: str, vocab: Vocab) -> bool:
    if tok in vocab.eog:
        return s == answer
    return answer in opts and answer[len(s):].startswith(vocab.text[tok])


def step_text(vocab: Vocab, logits: np.ndarray, s: str, answer: str,
              stop: Sequence[str]) -> tuple[Step | None, int]:
    """One step of free text: tokens that keep producing ``answer`` vs any other token."""
    rest = answer[len(s):]
    for_ = set(vocab.prefixes_of(rest)) if rest else set()
    if not rest:  # the answer is complete: ending (or a stop string) continues it
        for_ = set(vocab.eog) | {i for i, t in enumerate(vocab.text)
                                 if any(t.startswith(x) for x in stop)}
    order = np.argsort(-logits)
    best = int(order[0])
    f = next((int(t) for t in order if int(t) in for_), None)
    a = next((int(t) for t in order if int(t) not in for_ and (vocab.text[t] or t in vocab.eog)),
             None)
    if f is None or a is None:
        return None, best
    return Step(s, float(logits[f] - logits[a]), _show(vocab, f), _show(vocab, a), []), best


def _show(vocab: Vocab, tok: int) -> str:
    return END if tok in vocab.eog else vocab.text[tok]


def analyse(llm: Any, vocab: Vocab, prompt_tokens: Sequence[int], req: Request,
            answer: str, label: str) -> Decision:
    """Re-run the greedy decode of ``req`` token by token and record its close calls."""
    options = options_of(req.constraint)
    kind = "bool" if isinstance(req.constraint, Bool) else "choice" if options else "text"
    decision = Decision(label, kind, answer)
    if options is None and not isinstance(req.constraint, Text):
        decision.consistent = False  # other grammars are not modelled here
        return decision
    llm.reset()
    llm.eval(list(prompt_tokens))
    s = ""
    for _ in range(max(len(answer), 1) + 8):
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab.n,)).copy()
        if options is not None:
            step, tok = step_choice(vocab, logits, options, s, answer)
        else:
            step, tok = step_text(vocab, logits, s, answer, req.stop)
        if step is not None:
            decision.steps.append(step)
        if tok in vocab.eog or (options is None and s == answer):
            break
        s += vocab.text[tok]
        if not answer.startswith(s):
            break
        llm.eval([tok])
    decision.consistent = s == answer
    return decision


def label_of(req: Request) -> str:
    """The map value (text after 'Value: ') or the question of a request."""
    text = req.prompt
    if "\nValue: " in text:
        return text.rsplit("\nValue: ", 1)[1].split("\nAnswer:")[0]
    if "\nQuestion: " in text:
        return text.rsplit("\nQuestion: ", 1)[1].split("\n")[0]
    return text[-80:]


class MeasuredLlamaCpp(LlamaCpp):
    """The real model, answering as usual, that also measures each answer's margin."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decisions: list[Decision] = []
        self._vocab: Vocab | None = None

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            resp = super().generate([req])[0]
            llm = self.llm
            n = resp.usage.prompt_tokens
            tokens = [int(t) for t in llm.input_ids[:n]]
            if self._vocab is None:
                self._vocab = Vocab(llm)
            self.decisions.append(analyse(llm, self._vocab, tokens, req, resp.text, label_of(req)))
            llm.reset()  # the KV cache no longer matches input_ids' bookkeeping
            out.append(resp)
        return out


def measure(query: str, extra_bufts: bool, db: str | None = None,
            model: MeasuredLlamaCpp | None = None) -> dict[str, Any]:
    """Run ``query`` once on the embedded model and return its rows and decisions."""
    model = model or MeasuredLlamaCpp(extra_bufts=extra_bufts, n_threads=1)
    model.decisions.clear()
    engine = BlendSQL(db or str(example_db_path()), model=model, cache=False)
    df = engine.execute(query).df
    margins = [d.margin for d in model.decisions if d.margin is not None]
    return {
        "model": model.path.name,
        "rows": json.loads(df.to_json(orient="values")),
        "columns": list(df.columns),
        "min_margin": round(min(margins), 4) if margins else None,
        "all_consistent": all(d.consistent for d in model.decisions),
        "decisions": [d.as_json() for d in model.decisions],
    }


def measure_isolated(query: str, extra_bufts: bool, timeout: float = 600) -> dict[str, Any]:
    """:func:`measure` on one kernel path in a child process.

    Why: forcing llama.cpp's extra buffer types on runs the kernels that crash
    on some AMX CPUs; in a child, a crash is this path's result (``crashed``:
    the signal, with ``known_crash`` when the CPU has AMX) instead of the end of
    the benchmark or of the test run. Both paths run the same way, for a fair
    comparison.
    """
    done = run_isolated("benchmarks.demo_margins:measure",
                        {"query": query, "extra_bufts": extra_bufts}, timeout=timeout, cwd=ROOT)
    if done.ok and isinstance(done.value, dict):
        return {**done.value, "process": "child"}
    return {"crashed": done.signal or f"exit {done.returncode}", "known_crash": has_amx(),
            "process": "child", "stderr_tail": done.stderr[-1500:]}


def sweep(extra_bufts: bool) -> dict[str, Any]:
    """The README's question over every school's team passage: right answers and margins."""
    model = MeasuredLlamaCpp(extra_bufts=extra_bufts, n_threads=1)
    per_school = {}
    for school, title in TEAM_PASSAGES.items():
        r = measure(sweep_query(title), extra_bufts, model=model)
        answer = r["rows"][0][0] if r["rows"] else None
        per_school[school] = {"passage": title, "answer": answer, "right": answer == school,
                              "margin": r["min_margin"]}
    right = [s for s, v in per_school.items() if v["right"]]
    wide = [s for s in right if (per_school[s]["margin"] or 0) >= 1.0]
    return {"question": SWEEP_QUESTION, "right": len(right), "right_with_margin_ge_1": len(wide),
            "of": len(per_school), "schools": per_school}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--query", default=README_QUERY)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/demo_margins.json")
    ap.add_argument("--candidates", action="store_true",
                    help="also measure the other candidate queries considered for the README")
    ap.add_argument("--sweep", action="store_true",
                    help="also ask the README's question over each school's team passage")
    args = ap.parse_args(argv)
    result: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/demo_margins.py", *(argv or sys.argv[1:])]),
        "query": args.query,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                    "llama_system_info": system_info().strip(),
                    "auto_extra_bufts": extra_bufts_decision(system_info(), cpu_flags(), None)},
        "paths": {},
    }
    for bufts in (True, False):
        result["paths"][f"extra_bufts={'on' if bufts else 'off'}"] = measure_isolated(args.query,
                                                                                    bufts)
    auto = extra_bufts_decision(system_info(), cpu_flags(), None)[0]
    if args.candidates:
        result["candidates"] = candidates(auto)
    if args.sweep:
        result["sweep"] = sweep(auto)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for path, r in result["paths"].items():
        if "crashed" in r:
            print(f"{path}: the child process died ({r['crashed']}; AMX CPU: {r['known_crash']})")
            continue
        print(f"{path}: {len(r['rows'])} rows, min margin {r['min_margin']}, "
              f"consistent {r['all_consistent']}")
        for d in r["decisions"]:
            print(f"  {d['label'][:40]!r:44} -> {d['answer']!r:14} margin {d['margin']} "
                  f"(runner-up {d['runner_up']})")
    for c in result.get("candidates", []):
        print(f"candidate: right={c['right']} rows={c['rows']}/{c['expected_rows']} "
              f"min margin {c['min_margin']}: {c['query'][43:130]}")
    if "sweep" in result:
        sw = result["sweep"]
        print(f"sweep: right {sw['right']} of {sw['of']} "
              f"({sw['right_with_margin_ge_1']} with margin >= 1.0)")
        for school, v in sw["schools"].items():
            print(f"  {school:18} -> {v['answer']!r:20} margin {v['margin']}")


if __name__ == "__main__":
    main()
