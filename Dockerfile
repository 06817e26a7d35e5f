FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CTXVIEW_DATA_DIR=/app/var
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md ./
COPY ctxview ./ctxview
COPY ingest ./ingest
RUN pip install --no-cache-dir .
COPY . .
RUN CTXVIEW_SECRET_KEY=build python manage.py collectstatic --noinput -v0 \
    && useradd --system --uid 1000 --home-dir /app ctxview \
    && mkdir -p /app/var && chown ctxview /app/var
USER ctxview
EXPOSE 8000
# More processes: GUNICORN_CMD_ARGS="--workers 8 --threads 4" (docs/performance.md).
ENV GUNICORN_CMD_ARGS="--workers 4 --threads 4 --max-requests 5000 --max-requests-jitter 500 --timeout 60"
CMD ["gunicorn", "ctxview.wsgi:application", "-b", "0.0.0.0:8000"]
