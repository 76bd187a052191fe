"""Search in Spanish: words stemmed by Snowball's Spanish rules, in an index of their own."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.memory import store as store_module
from noema.memory.search import HistorySearch
from noema.memory.stemming import WordStemmer, fold, index_table, stemmer_for
from noema.memory.store import TurnStore, start_language_index
from noema.memory.turns import NewTurn, TurnKind

CONVERSATION = [
    ("Lucía", "Ayer canté tres canciones con el coro de la parroquia."),
    ("Tomás", "¡Qué bien! ¿Y los niños fueron contigo?"),
    ("Lucía", "Sí, los niños corrieron por el jardín mientras ensayábamos."),
    ("Tomás", "Mi perra Canela se escapó otra vez al parque."),
    ("Lucía", "Compré unas botas nuevas para caminar por la montaña en octubre."),
    ("Tomás", "I finally bought the hiking boots I told you about."),
    ("Lucía", "La fotografía del lago quedó preciosa, la voy a enmarcar."),
]


def fill(store: TurnStore, lines=CONVERSATION) -> list[int]:
    return [store.append(NewTurn(TurnKind.USER, text, sender=who)).id for who, text in lines]


def ids(found) -> list[int]:
    return [hit.turn.id for hit in found.hits]


def matches(found) -> list[int]:
    """The hits that hold a word of the query (not neighbours lent a score)."""
    return [hit.turn.id for hit in found.hits if "«" in hit.snippet]


@pytest.fixture
def spanish(store: TurnStore) -> TurnStore:
    fill(store)
    store.index_language("es")
    return store


def test_inflected_forms_meet_at_their_spanish_stem(spanish):
    search = HistorySearch(spanish)
    assert spanish.search_language() == "es"
    found = search.search("¿Qué cantó Lucía?")  # cantó / canté: both "cant"
    assert ids(found)[0] == 1 and "«canté»" in found.hits[0].snippet
    assert matches(search.search("canción")) == [1]  # singular, accent, plural
    assert 3 in matches(search.search("¿Dónde corría el niño?"))
    assert matches(search.search("fotografías")) == [7]
    assert matches(search.search("perras")) == [4]


def test_english_porter_rules_miss_what_spanish_rules_find(store):
    fill(store)
    # Porter leaves "canto" (cantó) and "cant" (canté) apart: the store's own
    # index, read by English rules, cannot join them.
    english = HistorySearch(store, language="en")
    assert 1 not in matches(english.search("cantó"))
    store.index_language("es")
    assert 1 in matches(HistorySearch(store).search("cantó"))


def test_english_turns_stay_findable_in_a_spanish_store(spanish):
    search = HistorySearch(spanish)
    assert matches(search.search("hiking boots")) == [6]
    assert 5 in matches(search.search("botas montaña"))


def test_phrases_and_prefixes_in_spanish(spanish):
    search = HistorySearch(spanish)
    assert ids(search.search('"tres canciones"'))[0] == 1
    assert 4 in matches(search.search("parq*"))


def test_a_search_language_is_followed_only_once_its_index_is_complete(store, monkeypatch):
    fill(store)
    monkeypatch.setattr(store_module, "BACKFILL_BATCH", 3)

    def stop_after_first_batch(done: int, total: int) -> None:
        raise KeyboardInterrupt  # the process killed midway

    with pytest.raises(KeyboardInterrupt):
        store.index_language("es", progress=stop_after_first_batch)
    assert store.search_language() == "en"  # half an index would hide turns
    assert store.indexed_languages() == {"en"}
    seen = []
    indexed = store.index_language("es", progress=lambda done, total: seen.append((done, total)))
    assert indexed == len(CONVERSATION) - 3  # resumed after the first batch
    assert seen[-1] == (len(CONVERSATION), len(CONVERSATION))
    assert store.search_language() == "es"
    # Every turn once: the stem of "niños" is in exactly the two turns that hold it.
    doc = _documents(store, "nin")
    assert doc == 2


def test_appends_feed_the_spanish_index_from_every_connection(tmp_path):
    path = tmp_path / "turns.db"
    early = TurnStore(path)  # opened before the Spanish index existed
    agent = TurnStore(path)
    try:
        fill(agent)
        agent.index_language("es")
        late = early.append(NewTurn(TurnKind.USER, "Mañana cantaremos villancicos", sender="Tomás"))
        assert late.id in matches(HistorySearch(agent).search("cantar"))
        assert _documents(agent, "cant") == 2
    finally:
        early.close()
        agent.close()


def test_rebuilding_the_index_starts_the_spanish_one_again(spanish):
    spanish.rebuild_index()
    assert spanish.search_language() == "en"  # until it is built again
    assert matches(HistorySearch(spanish).search("botas")) == [5]  # porter still finds the word
    spanish.index_language("es")
    assert 1 in matches(HistorySearch(spanish).search("cantó"))
    assert _documents(spanish, "cant") == 1


def test_switching_back_to_english_keeps_the_spanish_index(spanish):
    spanish.index_language("en")
    assert spanish.search_language() == "en"
    spanish.append(NewTurn(TurnKind.USER, "Canela volvió a casa cantando", sender="Tomás"))
    spanish.index_language("es")  # nothing to back-fill: appends kept feeding it
    assert _documents(spanish, "cant") == 2


def test_unknown_languages_are_refused_by_name(store):
    with pytest.raises(ValueError, match="'fr'"):
        store.index_language("fr")
    with pytest.raises(ValueError, match="'fr'"):
        index_table("fr")
    with pytest.raises(ValueError, match="'fr'"):
        WordStemmer("fr")


SPANISH_LETTERS = "abcdefghijklmnopqrstuvwxyzáéíóúüñ"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(SPANISH_LETTERS, min_size=2, max_size=12), min_size=1, max_size=8))
def test_every_word_of_a_turn_is_found_by_itself(words):
    # Query and index go through the same stemmer, so whatever Snowball makes
    # of a word, typed again it finds the turn (capitalised or not).
    store = TurnStore(":memory:")
    try:
        store.append(NewTurn(TurnKind.USER, "relleno sin nada"))
        target = store.append(NewTurn(TurnKind.USER, " ".join(words)))
        store.index_language("es")
        search = HistorySearch(store)
        stemmer = stemmer_for("es")
        for word in words:
            found = search.search(word.capitalize(), limit=5)
            if stemmer.stem(word) in stemmer.words("relleno sin nada"):
                continue
            assert target.id in ids(found), (word, stemmer.stem(word))
    finally:
        store.close()


def test_stems_are_folded_as_the_index_folds_them():
    stemmer = stemmer_for("es")
    assert stemmer.words("Canción CANCIONES niño Niños") == ["cancion", "cancion", "nin", "nin"]
    assert fold("Ñandú Ärger") == "nandu arger"


def _documents(store: TurnStore, term: str) -> int:
    db = sqlite3.connect(store.path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, turns_fts_es, row)")
        row = db.execute("SELECT doc FROM temp.v WHERE term = ?", (term,)).fetchone()
        return int(row[0]) if row else 0
    finally:
        db.close()


def test_an_agent_speaking_spanish_gets_its_index_at_start(store, monkeypatch):
    fill(store)
    notices: list[str] = []
    assert start_language_index(store, "es", notices.append) is None  # small: done at once
    assert store.search_language() == "es" and notices == []
    assert start_language_index(store, "en", notices.append) is None
    assert store.search_language() == "en"


def test_a_large_store_is_indexed_in_the_background_and_says_so(store, monkeypatch):
    fill(store)
    monkeypatch.setattr(store_module, "INLINE_BACKFILL", 2)
    notices: list[str] = []
    worker = start_language_index(store, "es", notices.append)
    assert worker is not None
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert store.search_language() == "es"
    assert "7 turns" in notices[0] and "'es'" in notices[-1]
    assert 1 in matches(HistorySearch(store).search("cantó"))
