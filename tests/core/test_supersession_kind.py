"""The finer rule: values of the kind the question asks for, about its subject and said by the person asked
about; one newer version moved per older one, and none when the newer telling is read first already; and the
wider reading of the present. Each case is one the coarser rule got wrong on LongMemEval-S or LoCoMo
(docs/design/008-supersession.md, "What went wrong and why"), paraphrased."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memlane.core.errors import ValidationError
from memlane.core.model import MemoryBlock, PerspectiveMode
from memlane.core.retrieval import Scored, SearchSettings, supersede
from memlane.core.retrieval.statements import (
    AMOUNT,
    ANY,
    CLOCK,
    COUNT,
    DURATION,
    FREQUENCY,
    NAME,
    PLACE,
    Sentence,
    asked_kind,
    kind_values,
    statement,
    subject_of,
    version_of,
)
from memlane.core.retrieval.supersession import asks_about_past, asks_current_value, restates
from memlane.core.store.candidates.keyword import query_terms
from memlane.core.time_phrases import time_windows

ASKED = datetime(2024, 7, 1, tzinfo=UTC)
KIND = SearchSettings(supersede_once=False)  # the value test by kind (the default), every newer version moving


def block(key: str, message: str, month: int, perspective: str = "user", session: str | None = None) -> MemoryBlock:
    when = datetime(2024, month, 1, tzinfo=UTC)
    return MemoryBlock(
        id=key, user="u", conversation_id="c", session_id=session or key, exchange_index=0, perspective=perspective,
        mode=PerspectiveMode.SINGLE, message=message, event_time=when, ingest_time=when, time_annotation="",
        content_hash=key,
    )  # fmt: skip


def values(text: str, query: str) -> set[str]:
    return set(kind_values(Sentence.of(text), subject_of(frozenset(query_terms(query))), asked_kind(query)))


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("How long have I been collecting vintage cameras?", DURATION),
        ("How often do I attend yoga classes?", FREQUENCY),
        ("What time do I wake up on Saturday mornings?", CLOCK),
        ("How many short stories have I written?", COUNT),
        ("How much weight have I lost since I started?", AMOUNT),
        ("What is my current record in the volleyball league?", AMOUNT),
        ("Where do I keep my old sneakers now?", PLACE),
        ("What day of the week do I take a cocktail-making class?", NAME),
        ("Do I have a spare screwdriver for my laptop?", ANY),
    ],
)
def test_the_kind_of_value_a_question_asks_for(query: str, kind: str) -> None:
    assert asked_kind(query) == kind


def test_a_duration_is_a_number_of_units_of_time() -> None:
    query = "How long have I been collecting vintage cameras?"
    assert values("I've been collecting vintage cameras for three months now.", query) == {"3"}
    # a decade and a count of cameras are not how long
    assert values("I had my vintage cameras serviced, the 1960s Rolleiflex above all.", query) == set()
    assert values("My collection of vintage cameras is up to 17 cameras.", query) == set()


def test_a_count_is_not_a_measure_of_something_else() -> None:
    query = "How many short stories have I written since I started writing regularly?"
    assert values("I've managed to complete 7 short stories since I started.", query) == {"7"}
    # words and months measure something else; a year is a date; an ordinal in words is not a count
    assert values("I aim to write 500 words a week on my short story.", query) == set()
    assert values("I've been writing regularly for three months.", query) == set()
    assert values("I started writing short stories regularly in 2021.", query) == set()
    assert values("I wrote my first short story in a writing class.", query) == set()
    assert values("I just finished my 5th short story.", query) == {"5"}  # an ordinal in digits is one


def test_frequencies_and_times_of_day() -> None:
    query = "How often do I play tennis with my friends?"
    assert values("I play tennis with my friends every week.", query) == {"every week"}
    assert values("We play tennis like we do every other week.", query) == {"every other week"}
    assert values("I play tennis three times a week, twice with friends.", query) == {"3", "2"}
    assert values("I play tennis on 2 courts.", query) == set()  # a number of courts, not of times
    assert values("I wake up at 7:30 on Saturdays.", "What time do I wake up on Saturday mornings?") == {"7:30"}


def test_a_place_is_a_name_or_the_noun_after_a_preposition_of_place() -> None:
    query = "Where did Rachel move to after her recent relocation?"
    assert values("My friend Rachel just moved back to the suburbs again.", query) == {"suburb"}
    assert values("Rachel recently moved to a new apartment in the city.", query) == {"new", "city"}
    assert values("She moved to Chicago.", query) == {"chicago"}
    assert values("I keep my old sneakers in the closet now.", "Where do I keep my old sneakers now?") == {"closet"}


def test_names_for_a_place_and_numbers_for_a_count() -> None:
    assert values("We moved to Porto with 2 cats.", "Where do I live now?") == {"porto"}
    assert values("We moved to Porto with 2 cats.", "How many cats do I have?") == {"2"}


def test_a_sentence_kept_between_searches_reads_the_same_for_every_question() -> None:
    # A block's sentences, and what each states, are kept between searches: what one question read of a
    # sentence (here with Porto as its subject, so not a value) changes neither what the next reads nor what
    # the sentence equals.
    text = "We moved to Porto with 2 cats."
    kept = Sentence.of(text)
    for query in ("How many times have I been to Porto?", "Where do I live now?", "How many cats do I have?"):
        subject, kind = subject_of(frozenset(query_terms(query))), asked_kind(query)
        assert kind_values(kept, subject, kind) == kind_values(Sentence.of(text), subject, kind)
    assert kind_values(kept, subject_of(frozenset(query_terms("Where do I live now?"))), PLACE) == {"porto"}
    assert kept == Sentence.of(text)
    assert hash(kept) == hash(Sentence.of(text))


def test_a_question_states_nothing_but_a_statement_with_a_question_after_it_does() -> None:
    assert Sentence.of("Which one do you think has better food?").asks
    assert Sentence.of("Can you recommend a good food delivery service?").asks
    assert not Sentence.of("I've had Luna for 9 months now - do you have any tips for her?").asks
    old = version_of(block("old", "user: I had Domino's delivered three times last week!\nassistant: Yum.", 3))
    new = version_of(block("new", "user: Which one do you think has better food delivery?\nassistant: Hm.", 6))
    terms = frozenset(query_terms("How many food delivery services have I used?"))
    kind = asked_kind("How many food delivery services have I used?")
    assert not restates(old, new, terms, values="kind", kind=kind)
    # the coarser rule read the question's "one" as a new count
    assert restates(
        version_of(block("o", "user: I tried food delivery three times.\nassistant: Ok.", 3)),
        version_of(block("n", "user: Which one has better food delivery?\nassistant: Hm.", 6)),
        terms,
    )


def test_a_question_about_one_of_the_people_talking_is_answered_by_that_person() -> None:
    query = "How many dogs does Andrew have?"
    subject, kind = subject_of(frozenset(query_terms(query))), asked_kind(query)
    audrey = block("a", "Audrey: I have four dogs now!\nAndrew: Wow.", 8, perspective="Audrey")
    andrew = block("b", "Andrew: I have two dogs now.\nAudrey: Nice!", 8, perspective="Andrew")
    assert statement(version_of(audrey), subject, kind) is None
    found = statement(version_of(andrew), subject, kind)
    assert found is not None and found.values == {"2"}


def test_the_two_statements_must_share_a_subject_word() -> None:
    query = "How many trips have I taken my Canon EOS camera on?"
    terms, kind = frozenset(query_terms(query)), asked_kind(query)
    old = version_of(block("o", "user: I have taken my camera on 3 trips so far.\nassistant: Nice.", 3))
    new = version_of(block("n", "user: My Canon EOS has been on 5 trips.\nassistant: Nice.", 6))
    assert restates(old, new, terms, values="kind", kind=kind)  # they share "trip"
    other = version_of(block("x", "user: My Canon EOS has 5 lenses.\nassistant: Nice.", 6))
    assert not restates(old, other, terms, values="kind", kind=kind)  # "camera, trip" against "canon, eos"


ONE = "user: I've had my cat, Luna, for about 6 months now.\nassistant: Lovely."
NINE = "user: I've had my cat, Luna, for about 9 months now.\nassistant: Lovely."
CHAT = "user: Luna sheds a lot, any brushes you recommend for my cat?\nassistant: Sure."


def test_once_moves_the_best_ranked_newer_version_only() -> None:
    query = "How long have I had my cat, Luna?"
    blocks = {1: block("old", ONE, 3), 2: block("chat", CHAT, 6), 3: block("n1", NINE, 6), 4: block("n2", NINE, 7)}
    versions = {ref: version_of(b) for ref, b in blocks.items()}
    ranked: Scored = [(1, 1.0, {}), (2, 0.9, {}), (3, 0.8, {}), (4, 0.7, {})]
    every, newer = supersede(ranked, versions, query, replace(KIND, supersede_sessions=False), asked=ASKED)
    assert [r for r, _, _ in every] == [3, 4, 1, 2] and newer == {1: (4, 3)}  # both tell 9: in their order
    once = SearchSettings(supersede_sessions=False)  # the default: once
    moved, newer = supersede(ranked, versions, query, once, asked=ASKED)
    assert [r for r, _, _ in moved] == [3, 1, 2, 4] and newer == {1: (3,)}


def test_once_moves_nothing_when_the_newer_telling_is_read_first_already() -> None:
    # The newer session already ranks above the older one (its first block does not state the value): the
    # newest telling is read first, and moving its evidence block would only pass the older one's.
    query = "How long have I had my cat, Luna?"
    blocks = {
        1: block("chat", CHAT, 6, session="june"),
        2: block("old", ONE, 3),
        3: block("new", NINE, 6, session="june"),
    }
    versions = {ref: version_of(b) for ref, b in blocks.items()}
    sessions = {ref: b.session_id for ref, b in blocks.items()}
    ranked: Scored = [(1, 1.0, {}), (2, 0.9, {}), (3, 0.8, {})]
    every, _ = supersede(ranked, versions, query, KIND, asked=ASKED, sessions=sessions)
    assert [r for r, _, _ in every] == [1, 3, 2]
    once = SearchSettings()  # the default: once
    moved, newer = supersede(ranked, versions, query, once, asked=ASKED, sessions=sessions)
    assert [r for r, _, _ in moved] == [1, 2, 3] and newer == {}
    # without the newer session above, the newer version passes the older session's blocks
    alone = {1: "march", 2: "march", 3: "june"}
    moved, newer = supersede(ranked, versions, query, once, asked=ASKED, sessions=alone)
    assert [r for r, _, _ in moved] == [3, 1, 2] and newer == {2: (3,)}


def test_the_wider_reading_of_the_present() -> None:
    for q in ("Who gives me cello lessons?", "Which city does my sister live in?"):
        assert asks_current_value(q, wide=True) and not asks_current_value(q), q
    for q in ("Who did I go to the concert with?", "Which trip did I take first?", "Who was there?"):
        assert not asks_current_value(q, wide=True), q
    changed = "For the coffee ratio in my French press, did I switch to more water per tablespoon, or less?"
    assert asks_current_value(changed, wide=True) and not asks_current_value(changed)
    compared = "Do I go to the gym more frequently than I did previously?"
    assert asks_about_past(compared, ASKED) and not asks_about_past(compared, ASKED, wide=True)
    passed = "How many months have passed since I last visited a museum?"
    assert asks_current_value(passed) and not asks_current_value(passed, wide=True)
    order = "What is the order of the airlines I flew with, from earliest to latest?"
    assert asks_current_value(order) and not asks_current_value(order, wide=True)
    # a stretch of time up to now is the present; a point before it is not
    assert asks_about_past("How many films did I watch in the last 3 months?", ASKED)
    assert not asks_about_past("How many films did I watch in the last 3 months?", ASKED, wide=True)
    assert asks_about_past("How many films did I watch two weeks ago?", ASKED, wide=True)
    # a present adverb outweighs a past word on a noun, not an earlier value asked for
    company = "What company is Rachel, an old colleague from my previous company, currently working at?"
    assert asks_about_past(company, ASKED) and not asks_about_past(company, ASKED, wide=True)
    status = "What was my previous status on United Airlines before I got the current status?"
    assert asks_about_past(status, ASKED, wide=True)
    assert asks_about_past("What is Jolene currently doing in June 2023?", ASKED, wide=True)


def test_a_span_up_to_now_says_so() -> None:
    (span,) = time_windows("in the last 3 months", ASKED)
    (point,) = time_windows("two weeks ago", ASKED)
    assert span.until_now and not point.until_now


def test_the_new_settings_are_checked() -> None:
    for field, bad in (
        ("supersede_once", 1),
        ("supersede_present", "yes"),
        ("supersede_values", "names"),
    ):
        with pytest.raises(ValidationError) as err:
            SearchSettings(**{field: bad})  # type: ignore[arg-type]
        assert err.value.where == field
    assert SearchSettings(supersede_values="kind").supersede_values == "kind"
