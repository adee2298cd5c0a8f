"""A QA run on knowledge-update questions shows the newest evidence first in the answer prompt's context
wherever the ranking put it first: the scripted answerer records every prompt it is given."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from qa_run_support import judge, lines, qa_options

from memlane.bench.qa.run import run_qa
from memlane.core.llm import ChatMessage, ScriptedLLM

# (question id, question, answer, [(date, text of the user turn, evidence?)]): the fact told, then told again.
QUESTIONS = [
    (
        "ku_bikes",
        "How many bikes do I have?",
        "four",
        [
            ("2023/03/02 (Thu) 10:00", "I have three bikes: a road bike, a gravel bike and a mountain bike.", True),
            ("2023/04/11 (Tue) 09:00", "Can you suggest a recipe for lentil soup with cumin?", False),
            ("2023/06/20 (Tue) 18:00", "I just bought my fourth bike, so now I have four bikes.", True),
        ],
    ),
    (
        "ku_gym",
        "Which gym do I go to?",
        "Iron Temple",
        [
            ("2023/02/01 (Wed) 07:00", "I go to the gym at Fit Hub every morning before work.", True),
            ("2023/03/15 (Wed) 20:00", "What is a good book about the history of Rome?", False),
            (
                "2023/05/09 (Tue) 07:30",
                "I switched gyms: I go to the gym at Iron Temple now, it has better weights.",
                True,
            ),
        ],
    ),
    (
        "ku_city",
        "Where does my sister live now?",
        "Porto",
        [
            ("2023/01/10 (Tue) 12:00", "My sister lives in Lisbon and works at a bakery there.", True),
            ("2023/02/20 (Mon) 12:00", "How do I fix a flat tyre on a road bike?", False),
            ("2023/04/02 (Sun) 12:00", "My sister moved: she lives in Porto now and loves the city.", True),
        ],
    ),
]


def write_data(root: Path) -> None:
    rows = []
    for qid, question, answer, said in QUESTIONS:
        ids = [f"answer_{qid}_{i}" if evidence else f"filler_{qid}_{i}" for i, (_, _, evidence) in enumerate(said)]
        sessions = [
            [
                {"role": "user", "content": text, **({"has_answer": True} if evidence else {})},
                {"role": "assistant", "content": "Thanks for telling me."},
            ]
            for _, text, evidence in said
        ]
        rows.append(
            {
                "question_id": qid,
                "question_type": "knowledge-update",
                "question": question,
                "question_date": "2023/07/01 (Sat) 10:00",
                "answer": answer,
                "answer_session_ids": [i for i in ids if i.startswith("answer_")],
                "haystack_dates": [date for date, _, _ in said],
                "haystack_session_ids": ids,
                "haystack_sessions": sessions,
            }
        )
    folder = root / "data" / "longmemeval"
    folder.mkdir(parents=True)
    (folder / "longmemeval_s_cleaned.json").write_text(json.dumps(rows), encoding="utf-8")


def test_newest_evidence_leads_the_context_wherever_the_ranking_puts_it_first(tmp_path: Path) -> None:
    write_data(tmp_path)
    prompts: dict[str, str] = {}

    def answer(messages: Sequence[ChatMessage]) -> str:
        prompt = str(messages[-1]["content"])
        for _, question, _, _ in QUESTIONS:
            if f"Question: {question}" in prompt:
                prompts[question] = prompt
        return "I don't know"

    out = tmp_path / "run"
    options = qa_options(tmp_path, "longmemeval-s", k=2)
    run_qa(
        options,
        out,
        llm=ScriptedLLM(answer, model="reader"),
        judge_llm=ScriptedLLM(judge, model="judge"),
        progress=False,
    )
    records = [r for r in lines(out / "log.jsonl") if r["type"] == "answer"]
    retrieval = {r["context"]["hits"][0][0]: r["context"]["retrieval_scores"] for r in records}
    by_question = {str(r["sample"]["question"]): r["context"]["retrieval_scores"] for r in records}
    assert len(retrieval) == len(by_question) == len(QUESTIONS)
    first = 0
    for qid, question, _, said in QUESTIONS:
        old, new = [text for _, text, evidence in said if evidence]
        newest_ranked_first = by_question[question]["session/latest_first"] == 1.0
        context = prompts[question]
        assert old in context and new in context, qid  # k=2: both evidence sessions retrieved
        if newest_ranked_first:
            first += 1
            assert context.index(new) < context.index(old), qid
    assert first == len(QUESTIONS)  # supersession put the newest first in every one
