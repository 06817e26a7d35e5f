FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CTXVIEW_DATA_DIR=/app/var
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md ./
COPY ctxview ./ctxview
COPY ingest ./ingest
RUN pip install --no-cache-dir .
COPY . .
# collectstatic signs nothing, but settings refuse a known key: a throwaway random one.
RUN CTXVIEW_SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    python manage.py collectstatic --noinput -v0 \
    && useradd --system --uid 1000 --home-dir /app ctxview \
    && mkdir -p /app/var && chown ctxview /app/var
USER ctxview
EXPOSE 8000
# gunicorn as deploy/gunicorn.conf.py sets it (more processes: WEB_CONCURRENCY=8, docs/performance.md).
# Publish it only through the buffering proxy in deploy/nginx (docker-compose.yml's `proxy`): clients that
# send a byte a second would hold gunicorn's threads.
CMD ["gunicorn", "ctxview.wsgi:application", "-c", "deploy/gunicorn.conf.py"]
