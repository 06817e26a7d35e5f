"""The rows of a raw batch as stored: its resources (each once per project), spans and log records.

No lock and no interpretation here: the rows are written as the pipeline hands them on."""

import hashlib
import json

from ingest.bulk import insert_rows
from ingest.models import RawBatch, Resource, Span


def common(batch: RawBatch) -> dict:
    return {"project_id": batch.project_id, "batch_id": batch.id, "received_at": batch.received_at}


def insert_spans(batch: RawBatch, rows: list) -> None:
    """Write interpreted spans (interpreting moved model calls' content out of the rows, into items)."""
    ids = resource_ids(batch.project_id, [resource for resource, _ in rows])
    shared = common(batch)
    insert_rows(Span, [{"resource_id": ids[id(resource)], **shared, **row} for resource, row in rows])


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def resource_ids(project_id: int, resources: list[dict]) -> dict[int, int]:
    """Resource row id for each resource dict (by object identity); rows are created as needed."""
    hash_of: dict[int, str] = {}
    by_hash: dict[str, dict] = {}
    for resource in resources:
        if id(resource) not in hash_of:
            resource_hash = digest(resource)
            hash_of[id(resource)] = resource_hash
            by_hash.setdefault(resource_hash, resource)
    Resource.objects.bulk_create(
        [
            Resource(
                project_id=project_id,
                hash=resource_hash,
                service_name=str(attributes.get("service.name", ""))[:200],
                attributes=attributes,
            )
            for resource_hash, attributes in by_hash.items()
        ],
        ignore_conflicts=True,
    )
    row_ids = dict(
        Resource.objects.filter(project_id=project_id, hash__in=list(by_hash)).values_list("hash", "id")
    )
    return {key: row_ids[resource_hash] for key, resource_hash in hash_of.items()}
