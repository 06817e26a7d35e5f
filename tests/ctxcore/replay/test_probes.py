"""Where a probe is in a window, and text search over untrusted, non-ASCII content."""

from hypothesis import given
from hypothesis import strategies as st

from ctxcore.replay import Moment, Probe, Slot, locate, parse, standing_probes, text_hits
from ctxcore.replay.probes import normalise
from ctxcore.vocabulary import Item, digest
from tests.ctxcore.analysis.builders import item, system


def _slot(item_id: str, text: str, tokens: int = 100, **fields) -> Slot:
    return Slot(Item.from_dict(item(item_id, tokens=tokens, text=text, **fields), 0))


def test_an_item_probe_is_verbatim_with_its_position_share():
    window = [_slot("a", "x", 300), _slot("fact:shard", "pay-shard-7", 100)]
    place = locate(Probe("item", "fact:shard"), window, None)
    assert (place.how, place.present, place.item_id, place.share) == ("verbatim", True, "fact:shard", 0.75)


def test_an_absent_probe_is_absent_and_not_present():
    place = locate(Probe("item", "gone"), [_slot("a", "x")], None)
    assert (place.how, place.present, place.item_id) == ("absent", False, None)


def test_a_text_probe_only_in_a_summary_item_is_found_in_the_summary():
    window = [_slot("s", "the shard is pay-shard-7", mode="summary", kind="summary", bucket="summary")]
    hits = text_hits(Probe("text", "pay-shard-7"), {window[0].item.hash: "the shard is pay-shard-7"})
    assert locate(Probe("text", "pay-shard-7"), window, hits).how == "summary"


def test_verbatim_wins_over_a_summary_holding_the_same_text():
    texts = {"s": "summary: pay-shard-7", "m": "pay-shard-7 is degraded"}
    window = [_slot("s", texts["s"], mode="summary"), _slot("m", texts["m"])]
    hits = text_hits(Probe("text", "PAY-SHARD-7"), {digest(text): text for text in texts.values()})
    place = locate(Probe("text", "PAY-SHARD-7"), window, hits)
    assert (place.how, place.item_id) == ("verbatim", "m")


def test_a_stubbed_tool_result_holds_its_probe_only_as_a_stub():
    pool = [_slot("r1", "shard=pay-shard-7", 400, bucket="tool_results", origin_turn=1)]
    window = parse("elide:1").window(pool, Moment(5, {"r1": 1}))
    hits = frozenset({pool[0].item.hash})
    assert locate(Probe("text", "pay-shard-7"), window, hits).how == "stub"
    assert locate(Probe("item", "r1"), window, None).to_dict()["present"] is False


def test_a_probe_inside_a_replayed_summary_is_unknown():
    pool = [_slot("system:0", "sys", bucket="system"), _slot("fact:shard", "pay-shard-7", origin_turn=1)]
    window = parse("compaction:1").window(pool, Moment(3, {"fact:shard": 1}))
    place = locate(Probe("item", "fact:shard"), window, None)
    assert (place.how, place.present) == ("unknown", None)


def test_a_text_probe_on_a_run_without_content_is_unknown_not_absent():
    assert locate(Probe("text", "pay-shard-7"), [_slot("a", "pay-shard-7")], None).how == "unknown"


def test_text_search_is_case_width_and_space_insensitive_and_handles_non_ascii():
    contents = {
        "1": "Mitarbeiter  ÄRGER\n4417",
        "2": "ｐａｙ－ｓｈａｒｄ－７",  # full-width forms
        "3": "русский текст 🚀 emoji",
        "4": "nothing here",
    }
    assert text_hits(Probe("text", "ärger 4417"), contents) == {"1"}
    assert text_hits(Probe("text", "pay-shard-7"), contents) == {"2"}
    assert text_hits(Probe("text", "ТЕКСТ 🚀"), contents) == {"3"}


def test_hostile_content_is_only_searched():
    hostile = {
        "1": "<script>alert(1)</script> pay-shard-7",
        "2": "\x00\ud800 lone surrogate and NUL",
        "3": "a" * 200_000 + "needle",
        "4": "{{ 7*7 }} {% debug %} ' OR 1=1 --",
    }
    assert text_hits(Probe("text", "<script>"), hostile) == {"1"}
    assert text_hits(Probe("text", "needle"), hostile) == {"3"}
    assert text_hits(Probe("text", "{% debug %}"), hostile) == {"4"}
    assert text_hits(Probe("text", "   "), hostile) == frozenset()


@given(st.text(max_size=40), st.text(max_size=40), st.text(min_size=1, max_size=20))
def test_a_text_planted_in_content_is_always_found(before, after, needle):
    if not normalise(needle):
        return
    text = f"{before} {needle} {after}"
    assert text_hits(Probe("text", needle), {"h": text}) == {"h"}


def test_facts_and_rules_are_probes_without_being_asked_for():
    items = [
        Item.from_dict(item("m1"), 0),
        Item.from_dict(item("fact:shard", kind="fact"), 1),
        Item.from_dict(item("rule:owner", kind="rule"), 2),
        Item.from_dict(item("fact:shard", kind="fact"), 3),
        Item.from_dict(system(), 4),
    ]
    assert standing_probes(items) == [Probe("item", "fact:shard"), Probe("item", "rule:owner")]
