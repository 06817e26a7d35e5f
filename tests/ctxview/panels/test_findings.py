from datetime import UTC, datetime

from ctxview.panels import findings


def finding(kind, severity, seq, **extra):
    return {
        "type": kind,
        "severity": severity,
        "call_seq": seq,
        "item_id": extra.get("item_id"),
        "cause": extra.get("cause"),
        "evidence": extra.get("evidence", {}),
        "fix": f"fix {kind}",
        "url": f"/calls/{seq}/" if seq else None,
    }


def test_groups_by_type_most_severe_first_with_explanations_and_fixes():
    rows = [
        finding("cache_invalidated", "info", 3, cause="below_minimum"),
        finding("cache_invalidated", "warning", 5, cause="ttl_expired"),
        finding("pinned_dropped", "error", 8, item_id="rule:x"),
        finding("unused_tools", "info", None),
    ]
    result = findings.grouped(rows)
    assert [group["type"] for group in result["groups"]] == [
        "pinned_dropped",
        "cache_invalidated",
        "unused_tools",
    ]
    cache = result["groups"][1]
    assert (cache["severity"], cache["count"]) == ("warning", 2)
    assert cache["help"].startswith("A call could not reuse")
    assert cache["fixes"] == ["fix cache_invalidated"]
    assert [row["type"] for row in result["run_level"]] == ["unused_tools"]
    assert len(result["timed"]) == 3


def test_the_timeline_has_a_trace_per_severity_with_links_to_calls():
    rows = [
        finding("fact_dropped", "warning", 4, item_id="<i>fact</i>"),
        finding("budget_exceeded", "error", 9),
    ]
    figure = findings.figure(findings.grouped(rows))
    assert [trace["name"] for trace in figure["data"]] == ["error", "warning"]
    assert figure["data"][1]["customdata"] == ["/calls/4/"]
    assert "&lt;i&gt;fact&lt;/i&gt;" in figure["data"][1]["hovertext"][0]
    assert figure["layout"]["yaxis"]["categoryarray"] == ["budget_exceeded", "fact_dropped"]


def test_the_timeline_is_bounded(monkeypatch):
    monkeypatch.setattr(findings, "MAX_MARKERS", 5)
    result = findings.grouped([finding("fact_dropped", "warning", seq) for seq in range(1, 21)])
    assert (len(result["timed"]), result["timed_total"], result["total"]) == (5, 20, 20)


# --- Review marks: notes and bookmarks on the timeline ----------------------------------------------

WHEN = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)


def note(seq, body="the window slid", **extra):
    return {
        "call_seq": seq,
        "url": f"/calls/{seq}/" if seq else extra.get("url"),
        "item_id": extra.get("item_id"),
        "item_url": f"/runs/1/item?id={extra['item_id']}" if extra.get("item_id") else None,
        "author": extra.get("author", "alice"),
        "created_at": WHEN,
        "body": body,
    }


def bookmark(seq, author="bob"):
    return {"call_seq": seq, "url": f"/calls/{seq}/", "author": author, "created_at": WHEN}


def test_notes_and_bookmarks_get_their_own_rows_above_the_findings_at_their_call():
    result = findings.grouped([finding("budget_exceeded", "error", 9)])
    result["marks"] = findings.marks(
        [note(4), note(4, "again", author="bob"), note(7, item_id="fact:x"), note(None, "on the run")],
        [bookmark(7)],
    )
    figure = findings.figure(result)
    assert [trace["name"] for trace in figure["data"]] == ["error", "bookmark", "note"]
    assert figure["layout"]["yaxis"]["categoryarray"] == ["budget_exceeded", "bookmarks", "notes"]
    notes = figure["data"][2]
    assert (notes["x"], notes["y"], notes["customdata"]) == (
        [4, 7],
        ["notes", "notes"],
        ["/calls/4/", "/calls/7/"],
    )
    assert notes["hovertext"][0] == (
        "call 4: 2 notes<br>alice · 2026-03-04 05:06 UTC: the window slid"
        "<br>bob · 2026-03-04 05:06 UTC: again"
    )
    assert "item fact:x" in notes["hovertext"][1]
    bookmarks = figure["data"][1]
    assert (bookmarks["x"], bookmarks["y"], bookmarks["customdata"]) == ([7], ["bookmarks"], ["/calls/7/"])
    assert bookmarks["hovertext"] == ["call 7: bookmarked by bob · 2026-03-04 05:06 UTC"]
    # The run-level note is listed, not drawn.
    assert [entry["text"] for entry in result["marks"]["listed"]] == ["on the run"]
    assert result["marks"]["note_total"] == 4 and result["marks"]["listed_total"] == 1


def test_a_mark_quotes_the_start_of_the_note_escaped():
    hostile = "<img src=x onerror=alert(1)> & " + "word " * 60
    marks = findings.marks([note(3, hostile, author="<b>eve</b>", item_id="<i>x</i>")], [bookmark(3, "<s>")])
    hover = marks["notes"][0]["hover"]
    assert "<img" not in hover and "<b>" not in hover and "<i>" not in hover
    assert "&lt;b&gt;eve&lt;/b&gt;" in hover and "item &lt;i&gt;x&lt;/i&gt;" in hover
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; word" in hover
    quoted = hover.split("<br>")[1].split(": ", 1)[1]
    assert quoted.endswith("…") and len(quoted) <= findings.HOVER_CHARS + 40  # escaping lengthens it
    assert hover.count("<br>") == 1  # the only markup: between the lines
    assert marks["bookmarks"][0]["hover"] == "call 3: bookmarked by &lt;s&gt; · 2026-03-04 05:06 UTC"


def test_a_call_with_many_notes_quotes_a_few_and_counts_the_rest():
    marks = findings.marks([note(5, f"note {n}") for n in range(6)], [])
    hover = marks["notes"][0]["hover"]
    assert hover.startswith("call 5: 6 notes<br>") and "note 2" in hover and "note 3" not in hover
    assert hover.endswith("and 3 more on the review page")


def test_the_marks_are_bounded_and_say_what_they_left_off(monkeypatch):
    monkeypatch.setattr(findings, "MAX_MARKS", 3)
    monkeypatch.setattr(findings, "MAX_LISTED", 2)
    notes = [note(seq) for seq in range(1, 6)] + [note(2)] + [note(None, f"run {n}") for n in range(4)]
    marks = findings.marks(notes, [bookmark(seq) for seq in range(10, 0, -1)])
    assert [mark["seq"] for mark in marks["notes"]] == [1, 2, 3]
    assert marks["notes_left_off"] == 2  # the notes on calls 4 and 5
    assert [mark["seq"] for mark in marks["bookmarks"]] == [1, 2, 3]
    assert (marks["bookmark_total"], marks["bookmarks_left_off"]) == (10, 7)
    assert [entry["text"] for entry in marks["listed"]] == ["run 0", "run 1"] and marks["listed_total"] == 4


def test_the_timeline_draws_for_marks_alone_and_not_for_nothing():
    panel = findings.FindingsPanel()
    only_marks = panel.compute({"findings": [], "notes": [note(2)], "bookmarks": []}, {})
    assert only_marks["total"] == 0
    assert [trace["name"] for trace in only_marks["figure"]["data"]] == ["note"]
    assert only_marks["figure"]["layout"]["yaxis"]["categoryarray"] == ["notes"]
    run_note_only = panel.compute({"findings": [], "notes": [note(None)], "bookmarks": []}, {})
    assert run_note_only["figure"] is None and len(run_note_only["marks"]["listed"]) == 1


def a_break(seq, cause):
    return {"seq": seq, "cause": cause, "url": f"/calls/{seq}/"}


def test_each_cache_break_is_an_occurrence_of_the_latest_finding_of_its_cause():
    rows = [
        finding("cache_invalidated", "warning", 3, cause="volatile_system_prompt"),
        finding("cache_invalidated", "warning", 5, cause="key_order"),
        finding("cache_invalidated", "warning", 8, cause="volatile_system_prompt"),
        finding("fact_dropped", "warning", 4, item_id="fact:x"),
    ]
    breaks = [a_break(seq, "volatile_system_prompt") for seq in (3, 4, 8, 9)]
    breaks += [a_break(seq, "key_order") for seq in (5, 6, 7)]
    counted = findings.occurrences(rows, breaks)
    assert [[entry["seq"] for entry in row["occurrences"]] for row in counted] == [
        [3, 4],
        [5, 6, 7],
        [8, 9],
        [],
    ]
    result = findings.grouped(counted)
    cache = next(group for group in result["groups"] if group["type"] == "cache_invalidated")
    assert (cache["count"], cache["occurrences"]) == (3, len(breaks))
    fact = next(group for group in result["groups"] if group["type"] == "fact_dropped")
    assert fact["count"] == fact["occurrences"] == 1


def test_the_timeline_draws_the_later_occurrences_beside_the_start():
    rows = [finding("cache_invalidated", "warning", 3, cause="key_order")]
    counted = findings.occurrences(rows, [a_break(seq, "key_order") for seq in (3, 4, 5)])
    figure = findings.figure(findings.grouped(counted))
    repeat = next(trace for trace in figure["data"] if trace["name"] == "occurrence")
    assert repeat["x"] == [4, 5] and repeat["y"] == ["cache_invalidated"] * 2
    assert repeat["customdata"] == ["/calls/4/", "/calls/5/"]
