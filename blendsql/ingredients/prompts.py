"""Prompt templates of the built-in LLM ingredients, in one place.

Why one module: prompts are the part users most often want to read, tune or
replace. Every built-in ingredient looks its template up on the class
(``LLMMap.template``, ...), and ``instructions=`` / ``template=`` given to an
instance (``LLMMap(name='IsPitcher', instructions=...)``) win over these
defaults, so overriding never needs a fork.

Layout rule (prefix caching): the parts that are the same for every value of
one call (instructions, question, answer format, context, few-shot examples)
come FIRST and the value comes LAST. llama.cpp then reuses the evaluated
prompt prefix across the per-value calls of one map.

Templates are ``str.format`` strings; the fields each one receives are listed
next to it. Empty optional blocks render as nothing (each block carries its
own trailing newline).

The wording follows the BlendSQL paper (Glenn et al., 2024: "answer the
question for the given value", short answers, options listed) and SUQL
(Liu et al., 2024: ``answer(text, question)`` over free text such as reviews,
``summary(text)``).
"""

from __future__ import annotations

# ---------------------------------------------------------------- LLMMap
# fields: instructions, question, format, context, examples, value
MAP_INSTRUCTIONS = (
    "You are given a value taken from a column of a database table. "
    "Answer the question about that value. "
    "Reply with the answer only, without explanation."
)
MAP_TEMPLATE = (
    "{instructions}\n"
    "Question: {question}\n"
    "{format}"
    "{context}"
    "{examples}"
    "\nValue: {value}\n"
    "Answer:"
)
# one few-shot example; fields: question_line, value, answer
MAP_EXAMPLE = "\n{question_line}Value: {value}\nAnswer: {answer}\n"
# ``framing='claim'``: the question argument read as a claim about the value (LOTUS's
# filter prompt states a claim and asks whether it holds); same fields as MAP_TEMPLATE
MAP_CLAIM_INSTRUCTIONS = (
    "You are given a claim and a value taken from a column of a database table. "
    "Decide whether the claim is true for that value. "
    "Reply with true or false only."
)
MAP_CLAIM_TEMPLATE = (
    "{instructions}\n"
    "Claim: {question}\n"
    "{format}"
    "{context}"
    "{examples}"
    "\nValue: {value}\n"
    "Is the claim true for this value?\n"
    "Answer:"
)

# ---------------------------------------------------------------- LLMQA
# fields: instructions, context, question, format, examples
QA_INSTRUCTIONS = (
    "Answer the question using the information below. "
    "Reply with the answer only, without explanation."
)
QA_TEMPLATE = (
    "{instructions}\n"
    "{context}"
    "{examples}"
    "\nQuestion: {question}\n"
    "{format}"
    "Answer:"
)
# fields: question, answer
QA_EXAMPLE = "\nQuestion: {question}\nAnswer: {answer}\n"

# ---------------------------------------------------------------- LLMValidate
# fields: instructions, context, question
VALIDATE_INSTRUCTIONS = (
    "Decide whether the statement is true according to the information below. "
    "Answer with true or false only."
)
VALIDATE_TEMPLATE = (
    "{instructions}\n"
    "{context}"
    "\nStatement: {question}\n"
    "Answer (true or false):"
)

# ---------------------------------------------------------------- LLMJoin
# fields: instructions, question, candidates, none, value
JOIN_INSTRUCTIONS = (
    "Pick the candidate that refers to the same thing as the given value "
    "(a different spelling, an abbreviation, a synonym or a translation). "
    "If no candidate matches, answer {none}."
)
JOIN_TEMPLATE = (
    "{instructions}\n"
    "{question}"
    "Candidates:\n{candidates}\n"
    "\nValue: {value}\n"
    "Answer:"
)

# ---------------------------------------------------------------- SUQL ANSWER / SUMMARY
# fields: instructions, question, format, examples, text
ANSWER_INSTRUCTIONS = (
    "Answer the question based only on the text below (which may be a list of "
    "documents, such as reviews). Be brief. If the text does not say, answer "
    "that it does not say."
)
ANSWER_TEMPLATE = (
    "{instructions}\n"
    "Question: {question}\n"
    "{format}"
    "{examples}"
    "\nText:\n{text}\n"
    "\nAnswer:"
)
# fields: instructions, text
SUMMARY_INSTRUCTIONS = (
    "Summarize the text below (which may be a list of documents, such as "
    "reviews) in one or two sentences. Keep the facts a reader would ask about."
)
SUMMARY_TEMPLATE = "{instructions}\n\nText:\n{text}\n\nSummary:"

# ---------------------------------------------------------------- shared blocks
# how a constraint is announced in a prompt (keyed by constraint class name);
# fields where present: options, pattern, schema
FORMAT_HINTS: dict[str, str] = {
    "Choice": "Answer with exactly one of these options: {options}\n",
    "Bool": "Answer with true or false.\n",
    "Int": "Answer with a whole number.\n",
    "Float": "Answer with a number.\n",
    "Date": "Answer with a date in YYYY-MM-DD format.\n",
    "Regex": "Answer with text matching the pattern /{pattern}/.\n",
    "JsonSchema": "Answer with JSON matching this schema: {schema}\n",
    "ListOf": 'Answer with a JSON list, for example ["a", "b"].\n',
    "Text": "Answer in a few words.\n",
}
# fields: examples
EXAMPLE_OUTPUTS = "Example answers: {examples}\n"
# fields: table
CONTEXT_BLOCK = "\nContext:\n{table}\n"
# appended to a truncated table; fields: omitted
ROWS_OMITTED = "({omitted} more rows not shown)"
