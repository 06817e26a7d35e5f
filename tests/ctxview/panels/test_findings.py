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
