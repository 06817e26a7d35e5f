import os

from django.core.wsgi import get_wsgi_application

from ingest.malloc import return_large_blocks

# Before gunicorn's master forks its workers, and before their threads start.
return_large_blocks()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxview.settings")
application = get_wsgi_application()

from ctxview.preload import load_request_path  # noqa: E402  (needs the settings configured above)

load_request_path()
