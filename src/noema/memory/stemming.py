"""Words as a language's full-text index knows them.

English turns are indexed by SQLite's own `porter` tokenizer (the store's
`turns_fts`). Other languages get an index of their own, fed with text whose
words were already reduced to their stems here, by a Snowball stemmer
(PyStemmer), and tokenized by plain `unicode61` (SQLite cannot call a Python
tokenizer). Query words go through the same function, so a word in a query
and the same word in a turn always become the same index term, whatever
language either was written in: an English word in a Spanish index is cut by
Spanish rules, but cut the same way on both sides.

Stems are lower-cased and stripped of diacritics after stemming (Snowball's
Spanish rules read the accents: "canción" and "canciones" both end "cancion"),
which is what `unicode61 remove_diacritics 2` would do to them anyway, so the
terms this module returns are exactly those the index holds.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

# The languages with an index of their own: language code -> (Snowball
# algorithm, the store's table). English stays with FTS5's porter index.
SNOWBALL = {"es": "spanish"}
INDEX_TABLES = {"en": "turns_fts", "es": "turns_fts_es"}
STEMMED_TOKENIZER = "unicode61 remove_diacritics 2"

# What unicode61 reads as one word: letters and digits (it splits on
# everything else, underscores included).
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def index_table(language: str) -> str:
    """The full-text table that holds turns indexed in `language`."""
    try:
        return INDEX_TABLES[language]
    except KeyError:
        raise ValueError(
            f"no full-text index for language {language!r}; use one of {', '.join(INDEX_TABLES)}"
        ) from None


def fold(text: str) -> str:
    """Lower case without diacritics (ñ becomes n, as unicode61 folds it)."""
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


class WordStemmer:
    """A Snowball stemmer for one language, with a cache of the words it met."""

    def __init__(self, language: str) -> None:
        if language not in SNOWBALL:
            raise ValueError(
                f"no Snowball stemmer for language {language!r}; use one of {', '.join(SNOWBALL)}"
            )
        self.language = language
        self._stemmer = Stemmer.Stemmer(SNOWBALL[language])
        # A word's stem never changes: most words of a conversation recur.
        self.stem = lru_cache(maxsize=50_000)(self._stem)

    def _stem(self, word: str) -> str:
        return fold(self._stemmer.stemWord(word.casefold()))

    def words(self, text: str) -> list[str]:
        """The index terms of `text`, in order."""
        return [self.stem(w) for w in _WORD.findall(text)]

    def text(self, text: str) -> str:
        """`text` as its index receives it: the stems, separated by spaces."""
        return " ".join(self.words(text))

    def stems(self, words: Iterable[str]) -> list[str]:
        return [self.stem(w) for w in words]


@lru_cache(maxsize=None)
def stemmer_for(language: str) -> WordStemmer:
    """The shared stemmer of a language with its own index."""
    return WordStemmer(language)
