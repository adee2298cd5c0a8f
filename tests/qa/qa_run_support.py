"""Helpers of the QA run tests: a data folder from the bench fixtures, options, scripted answerers and judges.

The scripted replies are decided from the prompt alone (so they do not depend on the order in which
concurrent calls arrive): the answerer knows a reply per question, the judges compare the response in the
prompt with the gold answer in the prompt.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from memlane.bench.qa.answering import NOT_MENTIONED
from memlane.bench.qa.runconfig import QAOptions
from memlane.core.llm import ChatMessage

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "bench" / "fixtures"
# The fake OpenAI server lives with the LLM tests; it is imported from there, not copied. Appended, so that
# the folder (which has a conftest.py of its own) never shadows a module of the test folder being run.
if str(TESTS / "core" / "llm") not in sys.path:
    sys.path.append(str(TESTS / "core" / "llm"))
fakeserver = importlib.import_module("fakeserver")

LOCOMO_REPLIES = {
    "When did Ana paint a sunrise?": "2022",  # right
    "What pets do they have?": "a cat",  # half of the multi-hop gold
    "Which hobbies does Ana have?": "painting",  # right
    "What did Ana cook?": "pasta",  # wrong
    "Would Ana like a museum?": "Likely yes",  # right once the gold is cut at ';'
    "Where did they meet?": "at school",  # right
    "How many kids does Cleo have?": "3",  # right
}
"""Replies of the scripted answerer to the LoCoMo mini fixture (category 5 is answered by letter)."""

LME_REPLIES = {
    "How many days passed between the bike repair and the race?": "3 days",
    "What is the name of my hamster?": "You never mentioned a hamster.",
    "Which chess opening did you recommend to me?": "The Sicilian Defence",
    "Where do I work now?": "At the bakery",
}


def make_data_dir(root: Path) -> Path:
    """``root/data`` with the LoCoMo, LongMemEval_S and oracle mini fixtures under their official names."""
    data = root / "data"
    (data / "locomo").mkdir(parents=True)
    (data / "longmemeval").mkdir(parents=True)
    shutil.copy(FIXTURES / "locomo_mini.json", data / "locomo" / "locomo10.json")
    shutil.copy(FIXTURES / "longmemeval_s_mini.json", data / "longmemeval" / "longmemeval_s_cleaned.json")
    shutil.copy(FIXTURES / "longmemeval_oracle_mini.json", data / "longmemeval" / "longmemeval_oracle.json")
    return data


def qa_options(root: Path, dataset: str = "locomo", **changes: Any) -> QAOptions:
    """Options on the hashing embedder, data and cache under ``root``, few bootstrap resamples."""
    base = QAOptions(dataset=dataset, embedder="hashing", data_dir=root / "data", cache_dir=root / "cache", k=3)
    return replace(base, **changes)


def _question(prompt: str) -> str:
    match = re.search(r"Question: (.*?)(?: Select the correct answer:| Short answer:|\n)", prompt)
    return match.group(1).strip() if match else ""


def answer_text(prompt: str, replies: Mapping[str, str]) -> str:
    """The scripted answer to an answer prompt: the letter of "Not mentioned" for a two-option question."""
    options = re.search(r"Select the correct answer: \(a\) (.*?) \(b\) (.*?)\. ", prompt)
    if options:
        return "a" if options.group(1) == NOT_MENTIONED else "b"
    return replies.get(_question(prompt), "I don't know")


def answerer(replies: Mapping[str, str]) -> Callable[[Sequence[ChatMessage]], str]:
    """A ScriptedLLM responder answering from ``replies``."""
    return lambda messages: answer_text(messages[-1]["content"], replies)


def _field(prompt: str, name: str) -> str:
    # The last occurrence: mem0's judge prompt shows a worked example before the real question.
    found = re.findall(rf"{name}: (.*?)(?:\n|$)", prompt)
    return found[-1].strip() if found else ""


def judge_text(prompt: str) -> str:
    """The scripted verdict for any built-in judge prompt: correct iff the response states the gold."""
    if "Generated answer:" in prompt:  # label judges (mem0's and ours): JSON
        gold = _field(prompt, "Gold answer")
        response = _field(prompt, "Generated answer")
        if "cannot be answered" in prompt:  # abstention judge: no gold, the response must decline
            correct = "not mentioned" in response.lower()
        else:
            correct = bool(gold) and gold.lower() in response.lower()
        return json.dumps({"label": "CORRECT" if correct else "WRONG"})
    response = prompt.split("Model Response: ", 1)[1].split("\n", 1)[0].lower()
    if "unanswerable" in prompt:
        return "yes" if "never" in response else "no"
    gold = _field(prompt, "Correct Answer").lower()
    return "yes" if gold and gold in response else "no"


def judge(messages: Sequence[ChatMessage]) -> str:
    """A ScriptedLLM responder for the judges."""
    return judge_text(messages[-1]["content"])


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
