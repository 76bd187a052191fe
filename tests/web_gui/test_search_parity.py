"""The person's search (the memory page, `noema memory search`) ranks as the
agent's own does: built the same way, with the meaning rerank, and saying how
it ranked. The real local embedding model, a real agent's search."""

from __future__ import annotations

from noema.app import build_app
from noema.config import Config
from noema.interfaces.commands.memory import person_search, search_memory
from noema.memory.embeddings_worker import backfill
from noema.memory.search import HistorySearch
from noema.memory.settings import MemorySettings
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider

TALK = ["The garden needs water: the tomatoes are dry and the soil cracks.",
        "Garden garden garden: a word in my crossword puzzle, seven letters, garden.",
        "My garden party is on Saturday; bring a cake.",
        "The car's garden of warning lights lit up on the motorway.",
        "We watered the plants in the garden and the vegetables look better."]
QUERIES = ["garden plants thirsty", "garden vegetables drought", "garden"]


async def test_the_person_s_search_ranks_as_the_agent_s_own(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path)
    config = Config()  # embeddings: the local model, as by default
    app = build_app(paths, config, provider=ScriptedProvider([]))
    mine = None
    try:
        for text in TALK:
            app.session.append(NewTurn(TurnKind.USER, text))
        agent = app.memory.search
        assert agent.meaning is not None
        backfill(app.store, agent.meaning.embedder)  # what the agent's writer does, now
        mine = person_search(app.store, config, paths)
        mine.wait_for_meaning(60)
        agent.meaning.embedder.ready()
        words_alone = HistorySearch(app.store)  # how the page and the CLI searched before
        try:
            differs = False
            for query in QUERIES:
                ours = mine.engine.search(query, limit=5)
                theirs = agent.search(query, limit=5)
                assert ours.unmeant is None, ours.unmeant
                assert [h.turn.id for h in ours.hits] == [h.turn.id for h in theirs.hits]
                before = [h.turn.id for h in words_alone.search(query, limit=5).hits]
                differs |= before != [h.turn.id for h in ours.hits]
                assert mine.how_ranked(ours) == "ranked by words, then by meaning, as the " \
                                                "agent's own search ranks"
            assert differs, "meaning should reorder at least one of these queries"
        finally:
            words_alone.close()
        printed = search_memory(mine, "garden plants thirsty", limit=3)
        assert "ranked by words, then by meaning" in printed
    finally:
        if mine is not None:
            mine.close()
        await app.aclose()


def test_without_embeddings_the_search_says_it_ranks_by_words_alone(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path)
    paths.ensure()
    config = Config(memory=MemorySettings(embeddings="off"))
    from noema.memory.store import TurnStore

    store = TurnStore(paths.turns_db)
    search = person_search(store, config, paths)
    try:
        store.append(NewTurn(TurnKind.USER, "the garden needs water"))
        printed = search_memory(search, "garden")
        assert "ranked by words alone: embeddings are off ([memory] embeddings)" in printed
    finally:
        search.close()
        store.close()


def test_noema_memory_search_says_it_ranks_as_the_agent_does(tmp_path):
    import os
    import subprocess
    import sys

    from noema.memory.store import TurnStore

    home = tmp_path / "home"
    paths = AgentPaths.for_agent("default", home)
    paths.ensure()
    from noema.memory.embeddings_local import ChildEmbedder

    store, embedder = TurnStore(paths.turns_db), ChildEmbedder()
    try:
        for text in TALK:
            store.append(NewTurn(TurnKind.USER, text))
        backfill(store, embedder)  # what the agent's writer would have done by now
    finally:
        embedder.close()
        store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    done = subprocess.run([sys.executable, "-m", "noema", "memory", "search", "garden", "plants"],
                          capture_output=True, text=True, timeout=120,
                          env={**env, "NOEMA_HOME": str(home), "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert "ranked by words, then by meaning, as the agent's own search ranks" in done.stdout
