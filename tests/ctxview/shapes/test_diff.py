from ctxview.shapes import diff


def ops(result):
    return [(segment["op"], segment["text"]) for segment in result["segments"]]


def test_identical_texts_have_no_segments():
    assert diff.segments("same", "same") == {
        "segments": [],
        "same": True,
        "deleted": 0,
        "inserted": 0,
        "offset": None,
    }


def test_a_changed_timestamp_highlights_only_the_changed_characters():
    old = "Current time: 2026-11-25T14:15:48Z. You migrate the code."
    new = "Current time: 2026-11-25T14:16:10Z. You migrate the code."
    result = diff.segments(old, new)
    assert ("delete", "5:48") in ops(result) and ("insert", "6:10") in ops(result)
    assert result["offset"] == len("Current time: 2026-11-25T14:1")
    assert (result["deleted"], result["inserted"]) == (4, 4)


def test_unrelated_texts_are_one_removal_and_one_insertion():
    result = diff.segments("Which shard is affected?", "Turn 20: canary client limit backoff.")
    assert [op for op, _ in ops(result)] == ["delete", "insert"]


def test_long_unchanged_runs_are_collapsed():
    old = "a" * 2000 + " old " + "z" * 2000
    new = "a" * 2000 + " new " + "z" * 2000
    result = diff.segments(old, new)
    kinds = [op for op, _ in ops(result)]
    assert kinds[0] == "skip" and kinds[-1] == "skip"
    assert sum(len(text) for op, text in ops(result) if op == "equal") <= 4 * diff.CONTEXT
    assert "1,841 unchanged characters" in ops(result)[0][1]


def test_huge_changes_are_not_matched_character_by_character():
    result = diff.segments("x" + "a b " * 6000, "y" + "c d " * 6000)
    assert [op for op, _ in ops(result)][:2] == ["delete", "insert"]
    assert len(ops(result)[0][1]) <= diff.SHOWN
