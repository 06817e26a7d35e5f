import pytest

from tests.check import stories


@pytest.fixture(scope="session")
def broken_spans():
    """The demo's migration run: a date line in the system prompt from call 30, unstable key order from 60."""
    return stories.migration_spans()


@pytest.fixture(scope="session")
def fixed_spans():
    return stories.migration_spans(fixed=True)


@pytest.fixture(scope="session")
def broken_pb(broken_spans, tmp_path_factory):
    return stories.write_protobuf(tmp_path_factory.mktemp("broken") / "migration.pb.gz", broken_spans)


@pytest.fixture(scope="session")
def broken_jsonl(broken_spans, tmp_path_factory):
    return stories.write_json_lines(tmp_path_factory.mktemp("broken-lines") / "traces.jsonl", broken_spans)


@pytest.fixture(scope="session")
def fixed_json(fixed_spans, tmp_path_factory):
    return stories.write_json(tmp_path_factory.mktemp("fixed") / "migration.json", fixed_spans)
