"""Item texts stored once per project, and their token counts counted once per text.

``Content.tokens`` is what the token counter gives for the text (for a message, its content without
the framing a chat API adds): a text this process has not counted is looked up there before it is
counted, so a text is counted once per project, not once per worker process and restart.
"""

from collections.abc import Iterable

from ctxcore.vocabulary import Item
from ingest import tokens
from ingest.bulk import insert_rows
from ingest.call_rows import Batch
from ingest.models import Content
from ingest.records import CallRecord, TokenCounter

_token_cache: dict[str, int] = {}
_TOKEN_CACHE_SIZE = 200_000


def count_tokens(content_hash: str, text: str) -> int:
    """Token estimate, cached by content hash: a run resends its history, so most items repeat."""
    cached = _token_cache.get(content_hash)
    if cached is None:
        cached = tokens.count(text)
        _remember_count(content_hash, cached)
    return cached


def _remember_count(content_hash: str, count: int) -> None:
    if len(_token_cache) >= _TOKEN_CACHE_SIZE:
        _token_cache.clear()
    _token_cache[content_hash] = count


class BatchTokens:
    """The token counts of one batch's texts, counted after the batch is interpreted, in one sweep.

    Records are made with a counter that only notes the text (and counts it as 0); ``counted`` then
    adds each item's count: from this process's cache, else from ``Content.tokens``, else counted."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.texts: dict[str, str] = {}  # hash -> the text to count

    def deferred(self) -> tuple[TokenCounter, set[str]]:
        """A counter for one record, and the hashes it was asked for (filled as it is used)."""
        asked: set[str] = set()

        def count_later(content_hash: str, text: str) -> int:
            self.texts.setdefault(content_hash, text)
            asked.add(content_hash)
            return 0

        return count_later, asked

    def resolve(self) -> dict[str, int]:
        counts = {h: _token_cache[h] for h in self.texts if h in _token_cache}
        unknown = [content_hash for content_hash in self.texts if content_hash not in counts]
        if unknown:
            stored = _stored(self.batch.project_id, unknown)
            for content_hash in unknown:
                self.batch.texts_looked_up[content_hash] = content_hash in stored
            for content_hash, count in stored.items():
                if count is not None:
                    counts[content_hash] = count
                    _remember_count(content_hash, count)
        uncounted = [content_hash for content_hash in unknown if content_hash not in counts]
        # All at once: the tokenizer's cost per call is that of a few hundred characters.
        for content_hash, count in zip(
            uncounted, tokens.count_all([self.texts[h] for h in uncounted]), strict=True
        ):
            counts[content_hash] = count
            _remember_count(content_hash, count)
        return counts

    @staticmethod
    def counted(record: CallRecord, asked: set[str], counts: dict[str, int]) -> CallRecord:
        """The record with its items' counts (items from a sender's manifest brought their own)."""
        if not asked or record.manifest_source == "explicit":
            return record
        # Set in place: these items were made for this record by its derive_items, with the count
        # deferred, and nothing else holds them yet (a copy of each was 2.7% of a batch's CPU).
        for item in (*record.items, *record.output_items):
            if item.hash in asked:
                object.__setattr__(item, "tokens", item.tokens + counts[item.hash])
        return record


def save_contents(batch: Batch, items: Iterable[Item]) -> dict[str, str]:
    """Store each text once per project; returns the texts stored now, by hash."""
    by_hash = {item.hash: item for item in items if item.content is not None}
    if not by_hash:
        return {}
    looked_up = batch.texts_looked_up
    stored = {content_hash for content_hash in by_hash if looked_up.get(content_hash)}
    ask = [content_hash for content_hash in by_hash if content_hash not in looked_up]
    if ask:
        stored |= set(_stored(batch.project_id, ask))
    inserted = insert_rows(
        Content,
        [
            {
                "project_id": batch.project_id,
                "hash": content_hash,
                "text": item.content,
                "truncated": item.content_truncated,
                "tokens": _token_cache.get(content_hash),  # what the counter gave, if it counted it
            }
            for content_hash, item in by_hash.items()
            if content_hash not in stored
        ],
        returning="hash",
    )
    return {content_hash: by_hash[content_hash].content for content_hash in inserted}


def _stored(project_id: int, hashes: list[str]) -> dict[str, int | None]:
    """The texts of these hashes the project has stored already, with their token counts (None: not
    counted)."""
    return dict(Content.objects.by_hash(project_id, hashes, "tokens"))
