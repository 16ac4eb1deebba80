"""Text analyzers of VARCHAR fields with `enable_analyzer` (Milvus 2.5's full-text search), and
the term-frequency sparse rows a BM25 function derives from text.

Milvus runs Tantivy's analyzers; so does vectorlog, through Tantivy's Python bindings
(`tantivy`). `analyzer_params`, as Milvus takes them:

    {"type": "standard"}   the default: the standard tokenizer (Tantivy's SimpleTokenizer:
                           runs of letters and digits) and a lowercase filter
    {"type": "english"}    standard + lowercase + English stop words + English stemmer
    {"type": "whitespace"} the whitespace tokenizer alone
    {"type": "standard" | "english", "stop_words": [...]}   stop words added
    {"tokenizer": "standard" | "whitespace", "filter": [...]}   a custom analyzer; filters:
        "lowercase", "asciifolding", "alphanumonly", {"type": "stop", "stop_words": [...]}
        ("_english_" etc.: the language's built-in list), {"type": "stemmer", "language":
        "english"}, {"type": "length", "max": n}

A token's sparse index is Milvus's hash of it (typeutil.HashString2LessUint32: CRC-32 IEEE of
its first 100 bytes, mod 2**32-1), its value the token's count in the text.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from functools import lru_cache
from typing import Any

import tantivy

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.sparse import encode

HASHED_PREFIX = 100  # bytes of a token its hash reads (Milvus: substringLengthForCRC)
BUILT_IN = ("standard", "english", "whitespace")
STOP_LANGUAGES = (
    *("danish", "dutch", "english", "finnish", "french", "german", "hungarian"),
    *("italian", "norwegian", "portuguese", "russian", "spanish", "swedish"),
)


def term_id(token: str) -> int:
    """Returns a token's sparse index, as Milvus hashes it."""
    return zlib.crc32(token.encode()[:HASHED_PREFIX]) % 0xFFFFFFFF


class Analyzer:
    """One analyzer, built from `analyzer_params` (None: Milvus's default, standard)."""

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        self.params = params or {"type": "standard"}
        self._analyzer = _build(self.params)

    def tokens(self, text: str) -> list[str]:
        """Returns the tokens of `text`, in order."""
        return list(self._analyzer.analyze(text))

    def tf_row(self, text: str) -> bytes:
        """Returns the sparse row of `text`: each distinct token's count at its hash."""
        counts = Counter(term_id(t) for t in self.tokens(text))
        return encode(list(counts.keys()), [float(c) for c in counts.values()])


@lru_cache(maxsize=64)
def _cached(text: str) -> Analyzer:
    return Analyzer(json.loads(text))


def analyzer_of(params: dict[str, Any] | None) -> Analyzer:
    """Returns the analyzer of `params` (built once per distinct params). Raises
    InvalidArgument naming what Milvus would refuse in them."""
    return _cached(json.dumps(params or {"type": "standard"}, sort_keys=True))


def _build(params: Any) -> Any:
    if not isinstance(params, dict):
        raise InvalidArgument(f"analyzer params must be a JSON object, not {params!r:.80}")
    kind = params.get("type")
    if kind is not None:
        return _built_in(kind, params)
    tokenizer = params.get("tokenizer", "standard")
    builder = tantivy.TextAnalyzerBuilder(_tokenizer(tokenizer))
    filters = params.get("filter", [])
    if not isinstance(filters, list):
        raise InvalidArgument(f"analyzer filter must be a list, not {filters!r:.80}")
    for entry in filters:
        for f in _filters(entry):
            builder = builder.filter(f)
    return builder.build()


def _built_in(kind: Any, params: dict[str, Any]) -> Any:
    if kind not in BUILT_IN:
        raise InvalidArgument(f"unknown analyzer type {kind!r} (built-in: {list(BUILT_IN)})")
    if kind == "whitespace":
        return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(
        tantivy.Filter.lowercase()
    )
    if kind == "english":
        builder = builder.filter(tantivy.Filter.stopword("english"))
        builder = builder.filter(tantivy.Filter.stemmer("english"))
    for f in _stop_filters(params.get("stop_words") or []):
        builder = builder.filter(f)
    return builder.build()


def _tokenizer(name: Any) -> Any:
    if name == "standard":
        return tantivy.Tokenizer.simple()
    if name == "whitespace":
        return tantivy.Tokenizer.whitespace()
    raise InvalidArgument(f"unsupported tokenizer {name!r} (vectorlog: standard, whitespace)")


def _filters(f: Any) -> list[Any]:
    """Returns the Tantivy filters of one entry of `filter`."""
    simple = {
        "lowercase": tantivy.Filter.lowercase,
        "asciifolding": tantivy.Filter.ascii_fold,
        "alphanumonly": tantivy.Filter.alphanum_only,
    }
    if isinstance(f, str) and f in simple:
        return [simple[f]()]
    kind = f.get("type") if isinstance(f, dict) else None
    if kind == "stop":
        return _stop_filters(f.get("stop_words", []))
    if kind == "stemmer":
        try:
            return [tantivy.Filter.stemmer(str(f.get("language", "")).lower())]
        except ValueError:
            raise InvalidArgument(f"unsupported stemmer language {f.get('language')!r}") from None
    if kind == "length" and isinstance(f.get("max"), int):
        return [tantivy.Filter.remove_long(f["max"])]
    raise InvalidArgument(f"unsupported analyzer filter {f!r:.80}")


def _stop_filters(words: Any) -> list[Any]:
    """Returns the stop-word filters of `words`: a custom list, and Tantivy's built-in list
    for each `_language_` entry (Milvus's `_english_`)."""
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise InvalidArgument(f"stop_words must be a list of strings, not {words!r:.80}")
    langs = [w.strip("_") for w in words if w.startswith("_") and w.endswith("_")]
    bad = [lang for lang in langs if lang not in STOP_LANGUAGES]
    if bad:
        raise InvalidArgument(f"no built-in stop words for {bad[0]!r}")
    custom = [w for w in words if not (w.startswith("_") and w.endswith("_"))]
    out = [tantivy.Filter.stopword(lang) for lang in langs]
    return [*out, tantivy.Filter.custom_stopword(custom)] if custom else out
