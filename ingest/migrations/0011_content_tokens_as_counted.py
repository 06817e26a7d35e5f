from django.db import migrations


class Migration(migrations.Migration):
    """Content.tokens now holds what the token counter gives for the text, and is read back instead of
    counting the text again; rows written before held the item's count with a message's framing added,
    so they are forgotten (the next call that sends the text counts it again)."""

    dependencies = [
        ("ingest", "0010_rawbatch_compacted"),
    ]

    operations = [
        migrations.RunSQL("UPDATE ingest_content SET tokens = NULL", migrations.RunSQL.noop),
    ]
